import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {EventChannel, Events, MessageDto} from "../../preload/contract.js";
import {createApp} from "../../main/createApp.js";
import {spawnTestEngine} from "./spawnTestEngine.js";

type App = ReturnType<typeof createApp>;

/**
 * The app as a fresh install runs it, in a data folder of its own with `bundledModelPath` as the shipped model and its
 * engine in a process of its own; `body` gets it and the messages it has finished so far (each `chat:done`, in order),
 * and the app is disposed and its folder removed however `body` ends.
 */
export async function withTestApp(
    options: {bundledModelPath: string},
    body: (app: App, done: readonly MessageDto[]) => Promise<void>
): Promise<void> {
    const done: MessageDto[] = [];
    const emit = <C extends EventChannel>(channel: C, payload: Events[C]) => {
        if (channel === "chat:done") done.push((payload as Events["chat:done"]).message);
    };
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-app-"));
    const app = createApp({
        dataDir,
        version: "test",
        engine: {spawn: spawnTestEngine()},
        bundledModelPath: options.bundledModelPath,
        chat: {flushIntervalMs: 0},
        emit
    });
    try {
        await body(app, done);
    } finally {
        await app.dispose();
        await fs.rm(dataDir, {recursive: true, force: true});
    }
}
