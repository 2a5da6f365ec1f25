import path from "node:path";
import type {BuildInfo} from "../../../preload/contract/engine.js";
import type {ModelInfo} from "../../../preload/contract/models.js";
import type {RuntimeOptions} from "../EngineApi.js";
import {backendName} from "../builds/engineBuildOrder.js";

/** How the engine process ended: an exit code, or the signal that ended it. */
export type EngineExit = {code: number | null; signal: string | null};

type Model = {path: string; info: ModelInfo | null};

/** With the model the engine comes back with, when there is one: " with qwen3". */
function withModel(target: Model | null): string {
    return target != null ? ` with ${engineWording.model(target)}` : "";
}

/**
 * What the engine proxy says to people: in the status while the engine process stops and comes back, and in the errors of
 * the calls it stopped. One place, so the words stay consistent.
 */
export const engineWording = {
    /** A model, for a person: its name, else its file name. */
    model(model: Model): string {
        return model.info?.name ?? path.basename(model.path);
    },

    /** The build a runtime asks for, for a person: "the CUDA build", "the best build present". */
    choice(runtime: RuntimeOptions): string {
        return runtime.build == null || runtime.build === "auto" ? "the best build present" : `the ${backendName(runtime.build)} build`;
    },

    /** How an engine process ended, for a person. */
    exit({code, signal}: EngineExit): string {
        if (signal === "SIGKILL") return "The engine process was killed (SIGKILL: out of memory, or ended from outside)";
        if (signal === "SIGABRT") return "The engine process aborted (SIGABRT: llama.cpp stopped on a failed check)";
        if (signal != null) return `The engine process crashed (${signal})`;
        return `The engine process exited unexpectedly (code ${code})`;
    },

    /** Why the process ended when rpc-servers it used stopped answering. */
    lostRpcServers(lost: readonly {endpoint: string; error: string}[], exit: EngineExit): string {
        return (
            `${lost.map(({endpoint, error}) => `The RPC server ${endpoint} stopped answering (${error})`).join("; ")}, which ended the engine process ` +
            `(${engineWording.exit(exit)})`
        );
    },

    /** Why the proxy ended the process itself: a generation did not end within `graceMs` of its stop. */
    stopIgnored(graceMs: number): string {
        return `The engine did not stop within ${(graceMs / 1000).toFixed(1)} s of a stop, so its process was ended`;
    },

    /** The error of a call the engine stopped during (it restarts). */
    callStopped(reason: string): string {
        return `${reason}; it is restarting`;
    },

    /** The error of an answer the engine stopped during. */
    answerStopped(reason: string): string {
        return `${reason}. The answer is kept up to where it stopped: Continue resumes it.`;
    },

    /** A calibration running when the engine stopped. */
    calibrationStopped(reason: string): string {
        return `${reason}. The calibration stopped: calibrating again goes on from the prompts it had thought through.`;
    },

    /** The error when reading a model's header stopped the engine. */
    inspectStopped(modelPath: string, reason: string): string {
        return `${path.basename(modelPath)} could not be read: reading its header stopped the engine (${reason})`;
    },

    /** The error when loading a model stopped the engine. */
    loadStopped(model: Model, reason: string): string {
        return `Loading ${engineWording.model(model)} stopped the engine (${reason}): it is not loaded automatically again`;
    },

    shutDown: "The engine is shut down",

    busyRestarting: "Stop the current answer before changing the engine build",

    retiring: "The engine is restarting with another build",

    /** What stopped the engine, for the restart's note: a model's load, the build's start, or `reason` itself. */
    crash(reason: string, cause: {load: Model | null; start: RuntimeOptions | null}): string {
        if (cause.load != null) return `Loading ${engineWording.model(cause.load)} stopped the engine (${reason})`;
        if (cause.start != null) return `Starting the engine on ${engineWording.choice(cause.start)} stopped it (${reason})`;
        return reason;
    },

    /** The note while the engine restarts after `what`. */
    restarting(what: string, target: Model | null): string {
        return `${what}: restarting it${withModel(target)}`;
    },

    /** The note once it came back. */
    restarted(what: string, ms: number, target: Model | null): string {
        return `${what}, so it was restarted in ${(ms / 1000).toFixed(1)} s${withModel(target)}.`;
    },

    /** The note when coming back failed. */
    restartFailed(what: string, err: Error): string {
        return `${what}, and restarting it failed: ${err.message}`;
    },

    /** The note when the engine stopped again while restarting, and the proxy gave up. */
    gaveUp(reason: string): string {
        return `${reason}, again while restarting: it was not restarted. Load a model to try again.`;
    },

    /** The note while the engine restarts on another build. */
    switching(runtime: RuntimeOptions, target: Model | null): string {
        return `Restarting the engine with ${engineWording.choice(runtime)}${target != null ? ` and loading ${engineWording.model(target)} again` : ""}…`;
    },

    /** The note once it runs the other build (or the fallback's reason, when another one runs). */
    switched(build: BuildInfo): string {
        const running = build.gpu === false ? "CPU" : backendName(build.gpu);
        return build.fallback ?? `The engine now runs the ${running} build${build.patched ? " (patched)" : ""}.`;
    },

    /** The note when starting the other build failed. */
    switchFailed(runtime: RuntimeOptions, err: Error): string {
        return `Restarting the engine with ${engineWording.choice(runtime)} failed: ${err.message}`;
    }
};
