import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {EventChannel, Events} from "../../preload/contract.js";
import {createApp} from "../../main/createApp.js";
import {spawnTestEngine} from "./spawnTestEngine.js";

type App = ReturnType<typeof createApp>;

/**
 * The app as a fresh install runs it, in a data folder of its own with `bundledModelPath` as the shipped model and its
 * engine in a process of its own; `body` gets it, and the app is disposed and its folder removed however `body` ends.
 */
export async function withTestApp(
    options: {bundledModelPath: string; emit?: <C extends EventChannel>(channel: C, payload: Events[C]) => void},
    body: (app: App) => Promise<void>
): Promise<void> {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-app-"));
    const app = createApp({
        dataDir,
        version: "test",
        engine: {spawn: spawnTestEngine()},
        bundledModelPath: options.bundledModelPath,
        chat: {flushIntervalMs: 0},
        emit: options.emit ?? (() => {})
    });
    try {
        await body(app);
    } finally {
        await app.dispose();
        await fs.rm(dataDir, {recursive: true, force: true});
    }
}
