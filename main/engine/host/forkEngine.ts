import {fork} from "node:child_process";
import {engineArgs} from "./engineArgs.js";
import type {EngineChild, SpawnEngine} from "./EngineSupervisor.js";
import type {FromEngine} from "../protocol.js";

export type ForkEngineOptions = {
    /** The engine process's script (`out/main/engineProcess.js`, or `main/engineProcess.ts` with tsx). */
    entry: string;
    args?: string[];
    execArgv?: string[];
    env?: NodeJS.ProcessEnv;
};

/** The engine as a forked Node process (headless mode, tests): messages as structured clones over its IPC channel. */
export function forkEngine(options: ForkEngineOptions): SpawnEngine {
    return (runtime): EngineChild => {
        const child = fork(options.entry, [...(options.args ?? []), ...engineArgs(runtime)], {
            execArgv: options.execArgv ?? [],
            env: options.env ?? process.env,
            serialization: "advanced",
            stdio: ["ignore", "inherit", "inherit", "ipc"]
        });
        // A message to a process that has just died fails with EPIPE; its exit is what reports it.
        child.on("error", () => {});
        return {
            pid: child.pid,
            post(message) {
                if (child.connected) child.send(message, (err) => void err);
            },
            onMessage(listener) {
                child.on("message", (message) => listener(message as FromEngine));
            },
            onExit(listener) {
                if (child.exitCode != null || child.signalCode != null) listener({code: child.exitCode, signal: child.signalCode});
                else child.once("exit", (code, signal) => listener({code, signal}));
            },
            kill() {
                child.kill("SIGKILL");
            }
        };
    };
}
