// The engine process played in memory: a child whose messages go through structured cloning to `serveEngine` over a
// scripted engine, and which can "die" at any moment.
import type {ModelInfo} from "../../../preload/contract.js";
import type {RuntimeOptions} from "../../../main/engine/EngineApi.js";
import type {EngineChild, EngineExit} from "../../../main/engine/host/EngineProxy.js";
import type {FromEngine, ToEngine} from "../../../main/engine/protocol.js";
import {serveEngine} from "../../../main/engine/runtime/serveEngine.js";
import {FakeEngine} from "./FakeEngine.js";

/** A fake engine that also loads: each load takes `loadMs` and names the model loaded. */
export class LoadingEngine extends FakeEngine {
    paths: string[] = [];
    loadMs = 5;
    private readonly _statusListeners = new Set<(status: FakeEngine["status"]) => void>();
    override onStatus(listener: (status: FakeEngine["status"]) => void): () => void {
        this._statusListeners.add(listener);
        return () => this._statusListeners.delete(listener);
    }
    /** Reports the status again, as node-llama-cpp's late load progress does. */
    emitStatus(): void {
        for (const listener of this._statusListeners) listener(this.status);
    }

    override async loadModel(modelPath: string, modelInfo: ModelInfo | null) {
        this.paths.push(modelPath);
        await new Promise((resolve) => setTimeout(resolve, this.loadMs));
        this.inspection = {...this.inspection!, path: modelPath, name: modelInfo?.name ?? "m"};
        this.status = {...this.status, state: "ready", model: modelInfo};
        for (const listener of this._statusListeners) listener(this.status);
        return this.inspection;
    }
}

/**
 * Spawns in-memory engine processes; `children[i].die()` ends one as a crash would. Each runs the build its runtime
 * options ask for (a patched local build of that backend; CPU for auto), unless `configure` says otherwise.
 */
export function memoryEngines(configure: (engine: LoadingEngine, runtime: RuntimeOptions) => void = () => {}) {
    const children: Array<{
        engine: LoadingEngine;
        runtime: RuntimeOptions;
        die(exit?: EngineExit): void;
        sent: ToEngine[];
        received: FromEngine[];
        alive: boolean;
    }> = [];
    const spawn = (runtime: RuntimeOptions): EngineChild => {
        const engine = new LoadingEngine();
        engine.inspection = null;
        const build = runtime.build ?? "auto";
        engine.status = {
            ...engine.status,
            build: {
                kind: "local",
                gpu: build === "auto" || build === "cpu" ? false : build,
                patched: true,
                llamaCppRelease: "v0.5.0",
                seriesHash: "series",
                requested: build,
                fallback: null
            }
        };
        configure(engine, runtime);
        const toChild = new Set<(message: ToEngine) => void>();
        const toParent = new Set<(message: FromEngine) => void>();
        const exits = new Set<(exit: EngineExit) => void>();
        const record = {
            engine,
            runtime,
            sent: [] as ToEngine[],
            received: [] as FromEngine[],
            alive: true,
            die(exit: EngineExit = {code: null, signal: "SIGKILL"}) {
                if (!record.alive) return;
                record.alive = false;
                for (const listener of exits) listener(exit);
            }
        };
        children.push(record);
        serveEngine(
            {
                post: (message) => {
                    const copy = structuredClone(message);
                    queueMicrotask(() => {
                        if (!record.alive) return;
                        record.received.push(copy);
                        for (const listener of toParent) listener(copy);
                    });
                },
                onMessage: (listener) => toChild.add(listener)
            },
            engine,
            {onDisposed: () => record.die({code: 0, signal: null})}
        );
        return {
            pid: children.length,
            post(message) {
                record.sent.push(message);
                const copy = structuredClone(message);
                setTimeout(() => {
                    if (record.alive) for (const listener of toChild) listener(copy);
                });
            },
            onMessage: (listener) => toParent.add(listener),
            onExit(listener) {
                if (!record.alive) listener({code: null, signal: "SIGKILL"});
                else exits.add(listener);
            },
            kill: () => record.die()
        };
    };
    return {children, spawn};
}

/** Waits, polling, until `condition` holds; throws after `ms`. */
export async function until(condition: () => boolean, ms = 2000): Promise<void> {
    const end = Date.now() + ms;
    while (!condition()) {
        if (Date.now() > end) throw new Error("timed out waiting");
        await new Promise((resolve) => setTimeout(resolve, 2));
    }
}
