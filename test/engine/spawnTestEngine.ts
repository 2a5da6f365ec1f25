import path from "node:path";
import {forkEngine} from "../../main/engine/host/forkEngine.js";
import type {SpawnEngine} from "../../main/engine/host/EngineProxy.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";

/** The engine process as the app starts it, from the sources (through tsx): one thread, faults allowed when asked. */
export function spawnTestEngine(options: {threads?: number; faults?: boolean} = {}): SpawnEngine {
    return forkEngine({
        entry: path.join(REPO_ROOT, "main", "engineProcess.ts"),
        execArgv: ["--import", "tsx"],
        args: [`--threads=${options.threads ?? 1}`],
        env: {...process.env, PONDER_ENGINE_FAULTS: options.faults === true ? "1" : "0"}
    });
}

/** Waits until `condition` holds, polling every 20 ms; fails after `ms`, naming `what`. */
export async function until(condition: () => boolean, ms: number, what: string): Promise<void> {
    const end = Date.now() + ms;
    while (!condition()) {
        if (Date.now() > end) throw new Error(`Timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}
