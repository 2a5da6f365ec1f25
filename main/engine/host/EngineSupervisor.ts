import type {BuildInfo, EngineStatus} from "../../../preload/contract/engine.js";
import type {ModelInfo} from "../../../preload/contract/models.js";
import {AppError} from "../../AppError.js";
import type {LoadOptions, RuntimeOptions, ModelInspection} from "../EngineApi.js";
import type {RpcProbe} from "../rpc/probeRpcServer.js";
import type {CallTable} from "./CallTable.js";
import {engineWording, type EngineExit} from "./engineWording.js";
import type {FromEngine, ToEngine} from "../protocol.js";

export type {EngineExit};

/** A running engine process, as `EngineProxy` sees it (Electron's `utilityProcess` or Node's `fork`). */
export type EngineChild = {
    readonly pid: number | undefined;
    post(message: ToEngine): void;
    onMessage(listener: (message: FromEngine) => void): void;
    onExit(listener: (exit: EngineExit) => void): void;
    kill(): void;
};

/** Starts an engine process that loads the runtime `runtime` asks for (the engine build). */
export type SpawnEngine = (runtime: RuntimeOptions) => EngineChild;

/** A model the engine loads, and loads again after a restart. */
export type ModelRef = {path: string; info: ModelInfo | null; options?: LoadOptions};

export type EngineSupervisorOptions = {
    spawn: SpawnEngine;
    /** The runtime every engine process starts with, until a restart on purpose changes it. */
    runtime: RuntimeOptions;
    /** The calls in flight, settled when the process stops. */
    calls: CallTable;
    /** Milliseconds the engine process has to dispose before it is killed. */
    disposeTimeoutMs: number;
    now: () => number;
    /** Checks an rpc-server after the engine process ended while using it. */
    probeRpcServer: (endpoint: string) => Promise<RpcProbe>;
    /** Loading this model stopped the engine: it is not loaded again automatically. */
    onModelCrashed?: (model: ModelInfo) => void;
    /** Each message of the engine process running now. */
    onMessage(message: FromEngine): void;
    /** The engine process ended, on purpose or not: what it held (the loaded model's inspection) is gone with it. */
    onGone(): void;
    /** Loads the runtime in the process (through `whileStarting`). */
    start(): Promise<BuildInfo>;
    /** Loads a model in the process (through `whileLoading`). */
    load(model: ModelRef): Promise<ModelInspection>;
    /** Says in the status what happens: `note` is its message, kept while the engine has none of its own. */
    report(note: string, patch: Partial<EngineStatus>): void;
};

/** Restarts in a row that may fail (the engine stopping again while it comes back) before the proxy gives up. */
const maxFailedRestarts = 2;

/**
 * Keeps an engine process running for `EngineProxy`: spawns it when a call needs it, and when it stops, settles its calls,
 * names the rpc-server whose loss ended it, and restarts it with the model that was loaded, except when loading a model is
 * what stopped it (reported through `onModelCrashed`). Gives up after `maxFailedRestarts` stops in a row while coming
 * back. Ends it on purpose for another build, and at shut-down.
 */
export class EngineSupervisor {
    /** The runtime the next process starts with. */
    runtime: RuntimeOptions;
    /** Restarts after the engine stopped, and how long the last one took (ms, to the model loaded again). */
    restarts = 0;
    lastRestartMs: number | null = null;
    private _child: EngineChild | null = null;
    /** The model that loaded and works; a restart loads it again. */
    private _loaded: ModelRef | null = null;
    /** A load in flight: when the engine stops during it, that model is what stopped it. */
    private _loading: ModelRef | null = null;
    private _started = false;
    /** Set while a `start` call loads the runtime (the engine build): a stop of the process then is the build's doing. */
    private _starting: object | null = null;
    private _restoring: Promise<void> | null = null;
    private _failedRestarts = 0;
    private _disposed = false;
    /** Why the proxy killed the engine process itself, for the status after its exit. */
    private _killedBecause: string | null = null;

    constructor(private readonly _options: EngineSupervisorOptions) {
        this.runtime = _options.runtime;
    }

    /** The engine process's id, while one runs. */
    get pid(): number | undefined {
        return this._child?.pid;
    }

    /** Whether an engine process runs now. */
    get running(): boolean {
        return this._child != null;
    }

    /** The model a restart loads again; `null` when none loaded (or loading it stopped the engine). */
    get loaded(): ModelRef | null {
        return this._loaded;
    }

    /** Whether `child` is the process running now (a message or a timer of one that ended is ignored). */
    isCurrent(child: EngineChild): boolean {
        return this._child === child;
    }

    /** The process running now, started when none runs. */
    spawned(): EngineChild {
        if (this._child != null) return this._child;
        const child = this._options.spawn(this.runtime);
        this._child = child;
        child.onMessage((message) => {
            if (this._child === child) this._options.onMessage(message);
        });
        child.onExit((exit) => {
            if (this._child === child) this._onExit(exit);
        });
        return child;
    }

    /** A runtime was asked for: a restart after a stop loads it again. */
    markStarted(): void {
        this._started = true;
    }

    /** Runs `start` (the runtime's load in the process); while it runs, a stop of the process is the build's doing. */
    async whileStarting(start: () => Promise<BuildInfo>): Promise<BuildInfo> {
        const starting = {};
        this._starting = starting;
        try {
            return await start();
        } finally {
            if (this._starting === starting) this._starting = null;
        }
    }

    /** Runs `load` (`model`'s load in the process); while it runs, a stop of the process is the model's doing. */
    async whileLoading(model: ModelRef, load: () => Promise<ModelInspection>): Promise<ModelInspection> {
        this._loading = model;
        try {
            const inspection = await load();
            this._loaded = {path: inspection.path, info: model.info, options: model.options};
            return inspection;
        } finally {
            if (this._loading === model) this._loading = null;
        }
    }

    /** Waits for a restart in progress (and any that follows it), so a call goes to the engine with its model back. */
    async settled(): Promise<void> {
        if (this._disposed) throw new AppError("ENGINE_STOPPED", engineWording.shutDown);
        let restoring: Promise<void> | null;
        while ((restoring = this._restoring) != null) {
            await restoring.catch(() => {});
            if (this._restoring === restoring) break;
        }
    }

    /** Ends `child`, when it still runs, because it did not do what `reason` says (its calls end as ended for them). */
    endFor(child: EngineChild, reason: string): void {
        if (this._child !== child) return;
        this._killedBecause = reason;
        child.kill();
    }

    /** Kills the engine process outright, as the system's out-of-memory killer would (tests). */
    kill(): void {
        this._child?.kill();
    }

    /**
     * Restarts the engine on `runtime` (another build): `beforeEnd` runs first in the old process (3 s at most), which then
     * ends, and a new one starts and loads the model that was loaded. Calls made meanwhile wait for it.
     */
    async switchTo(runtime: RuntimeOptions, beforeEnd: () => Promise<unknown>): Promise<BuildInfo> {
        this.runtime = runtime;
        const target = this._loaded;
        const restarting = (async () => {
            // A state an answer left in the old process is written before that process ends; the restart waits 3 s at most.
            if (this._child != null) {
                let timer: NodeJS.Timeout | undefined;
                await Promise.race([beforeEnd().catch(() => null), new Promise((resolve) => (timer = setTimeout(resolve, 3000)))]);
                clearTimeout(timer);
            }
            await this._retire(engineWording.retiring);
            this._started = true;
            const build = await this._options.start();
            if (target != null) await this._options.load(target);
            return build;
        })();
        const settled = restarting.then(
            () => {},
            () => {}
        );
        this._restoring = settled;
        try {
            const build = await restarting;
            this._options.report(engineWording.switched(build), {});
            return build;
        } catch (err) {
            // A stop of the new engine process is the crash restart's to report; anything else is this restart's.
            if (this._restoring === settled)
                this._options.report(engineWording.switchFailed(runtime, err as Error), {state: "error", progress: null});
            throw err;
        } finally {
            if (this._restoring === settled) this._restoring = null;
        }
    }

    /** Ends the engine for good: `dispose` asks the process to free the model and the runtime; one that hangs is killed. */
    async shutDown(dispose: () => Promise<unknown>): Promise<void> {
        if (this._disposed) return;
        this._disposed = true;
        await this._restoring?.catch(() => {});
        const child = this._child;
        if (child == null) return;
        const exited = new Promise<void>((resolve) => child.onExit(() => resolve()));
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, this._options.disposeTimeoutMs)));
        // The engine frees the model and the runtime, then exits; one that hangs is killed.
        await Promise.race([
            dispose().then(
                () => exited,
                () => exited
            ),
            timeout
        ]);
        clearTimeout(timer);
        if (this._child === child) {
            child.kill();
            await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
        }
    }

    /**
     * Ends the engine process on purpose: it no longer counts as running (its exit is not a crash), its calls fail with
     * `reason`, and it is asked to dispose, then killed if it has not exited in time.
     */
    private async _retire(reason: string): Promise<void> {
        const child = this._child;
        if (child == null) return;
        this._child = null;
        this._options.onGone();
        this._options.calls.rejectAll(new AppError("ENGINE_STOPPED", reason));
        let exited = false;
        const exit = new Promise<void>((resolve) =>
            child.onExit(() => {
                exited = true;
                resolve();
            })
        );
        child.post({type: "call", id: this._options.calls.nextId(), method: "dispose", args: []});
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([exit, new Promise((resolve) => (timer = setTimeout(resolve, this._options.disposeTimeoutMs)))]);
        clearTimeout(timer);
        if (!exited) {
            child.kill();
            await Promise.race([exit, new Promise((resolve) => setTimeout(resolve, 1000))]);
        }
    }

    private _onExit(exit: EngineExit): void {
        this._child = null;
        this._options.onGone();
        const killedBecause = this._killedBecause;
        this._killedBecause = null;
        const servers = this.runtime.rpcServers ?? [];
        if (servers.length === 0 || killedBecause != null || this._disposed) {
            this._afterExit(killedBecause ?? engineWording.exit(exit), killedBecause, false);
            return;
        }
        // ggml aborts the engine when an rpc-server it uses stops answering: ask each, so the error names the one lost.
        // Calls made meanwhile wait (`settled`).
        const naming = (async () => {
            const lost = await this._findLostRpcServers(servers);
            this._afterExit(lost.length === 0 ? engineWording.exit(exit) : engineWording.lostRpcServers(lost, exit), null, lost.length > 0);
        })();
        this._restoring = naming;
    }

    private async _findLostRpcServers(servers: readonly string[]): Promise<{endpoint: string; error: string}[]> {
        const probes = await Promise.all(servers.map((endpoint) => this._options.probeRpcServer(endpoint)));
        return probes.flatMap((probed) => (probed.ok ? [] : [{endpoint: probed.endpoint, error: probed.error}]));
    }

    /** `rpcLost`: an rpc-server stopped answering, which ended the process: a model loading then is not what stopped it. */
    private _afterExit(reason: string, killedBecause: string | null, rpcLost: boolean): void {
        this._options.calls.settleStopped(reason, killedBecause, this._disposed);
        if (this._disposed) return;

        const interruptedLoad = this._loading;
        this._loading = null;
        const crashedLoad = rpcLost ? null : interruptedLoad;
        if (crashedLoad != null) {
            // Loading it stopped the engine: not again by itself, even when it is the model that was loaded before.
            if (this._loaded?.path === crashedLoad.path) this._loaded = null;
            if (crashedLoad.info != null) this._options.onModelCrashed?.(crashedLoad.info);
        }
        if (this._failedRestarts >= maxFailedRestarts) {
            this._restoring = null;
            this._options.report(engineWording.gaveUp(reason), {state: "error", model: null, progress: null});
            this._failedRestarts = 0;
            return;
        }
        this._failedRestarts++;
        // The engine comes back without the lost server (it checks each before use) and loads the model on what is left.
        const target = rpcLost && interruptedLoad != null ? interruptedLoad : this._loaded;
        const crashedStart = this._starting != null;
        this._starting = null;
        const what = engineWording.crash(reason, {load: crashedLoad, start: crashedStart ? this.runtime : null});
        this._options.report(engineWording.restarting(what, target), {
            state: "loading",
            model: target?.info ?? null,
            progress: null,
            placement: null
        });
        const started = this._options.now();
        const restoring = (async () => {
            if (this._started) await this._options.start();
            if (target != null) await this._options.load(target);
            this._failedRestarts = 0;
            this.restarts++;
            this.lastRestartMs = this._options.now() - started;
            this._options.report(engineWording.restarted(what, this.lastRestartMs, target), {});
        })();
        this._restoring = restoring;
        restoring.then(
            () => {
                if (this._restoring === restoring) this._restoring = null;
            },
            (err: unknown) => {
                // A newer restart took over (the engine stopped again), or the proxy gave up and said so.
                if (this._restoring !== restoring) return;
                this._restoring = null;
                this._options.report(engineWording.restartFailed(what, err as Error), {state: "error", progress: null});
            }
        );
    }
}
