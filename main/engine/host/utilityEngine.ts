import {utilityProcess} from "electron";
import {engineArgs} from "./engineArgs.js";
import type {EngineChild, SpawnEngine} from "./EngineSupervisor.js";
import type {FromEngine} from "../protocol.js";

/** The engine as an Electron utility process (the app): a Node process of Electron's own, messages over its port. */
export function utilityEngine(entry: string, args: string[] = []): SpawnEngine {
    return (runtime): EngineChild => {
        const child = utilityProcess.fork(entry, [...args, ...engineArgs(runtime)], {serviceName: "Ponder engine", stdio: "inherit"});
        let exited: {code: number} | null = null;
        child.once("exit", (code) => (exited = {code}));
        return {
            get pid() {
                return child.pid;
            },
            post(message) {
                if (exited == null) child.postMessage(message);
            },
            onMessage(listener) {
                child.on("message", (message) => listener(message as FromEngine));
            },
            onExit(listener) {
                // Electron reports the exit code only; on POSIX a signal shows as its code.
                if (exited != null) listener({code: exited.code, signal: null});
                else child.once("exit", (code) => listener({code, signal: null}));
            },
            kill() {
                child.kill();
            }
        };
    };
}
