import path from "node:path";
import type {BuildInfo, EngineStatus, ModelInfo} from "../../../preload/contract.js";
import {AppError} from "../../AppError.js";
import type {EngineApi, LoadOptions, RuntimeOptions} from "../EngineApi.js";
import {backendName} from "../native/engineBuildOrder.js";
import type {CountTokensRequest, GenerateRequest, GenerationChunk, GenerationResult, ModelInspection, PromptTokenCount, StateSave} from "../types.js";
import type {EngineCalls, EngineFault, EngineMethod, FromEngine, ToEngine} from "./protocol.js";
import {probeRpcServer, type RpcProbe} from "../rpc/probeRpcServer.js";

/** How the engine process ended: an exit code, or the signal that ended it. */
export type EngineExit = {code: number | null, signal: string | null};

/** A running engine process, as `EngineProxy` sees it (Electron's `utilityProcess` or Node's `fork`). */
export type EngineChild = {
    readonly pid: number | undefined,
    post(message: ToEngine): void,
    onMessage(listener: (message: FromEngine) => void): void,
    onExit(listener: (exit: EngineExit) => void): void,
    kill(): void
};

/** Starts an engine process that loads the runtime `runtime` asks for (the engine build). */
export type SpawnEngine = (runtime: RuntimeOptions) => EngineChild;

/** The engine process's command-line arguments for `runtime` (main/engineProcess.ts reads them). */
export function engineArgs(runtime: RuntimeOptions): string[] {
    return [
        ...runtime.build != null ? [`--build=${runtime.build}`] : [],
        ...runtime.rpcServers != null && runtime.rpcServers.length > 0 ? [`--rpc=${runtime.rpcServers.join(",")}`] : []
    ];
}

export type EngineProxyOptions = {
    spawn: SpawnEngine,
    /** The runtime every engine process starts with, until `restart` changes it. Defaults to `{build: "auto"}`. */
    runtime?: RuntimeOptions,
    /** Loading this model stopped the engine: it is not loaded again automatically (at start-up or on a restart). */
    onModelCrashed?: (model: ModelInfo) => void,
    /** Milliseconds the engine process has to dispose before it is killed. Defaults to `5000`. */
    disposeTimeoutMs?: number,
    /**
     * Milliseconds a generation has to end after its stop before the engine process is killed (and restarted), so that
     * a stop always stops, even in an engine stuck in native code. Defaults to `5000`.
     */
    stopGraceMs?: number,
    now?: () => number,
    /** Checks an rpc-server after the engine process ended while using it. Defaults to `probeRpcServer` over TCP (tests pass their own). */
    probeRpcServer?: (endpoint: string) => Promise<RpcProbe>
};

type Pending = {
    resolve(value: unknown): void,
    reject(err: Error): void,
    /** The error a caller gets when the engine stops while this call runs. */
    stopped(reason: string): Error,
    /** Settles the call instead, when the proxy itself ended the engine for it (a stop the engine did not honour). */
    endedForIt?: () => void,
    onChunks?(chunks: GenerationChunk[]): void,
    onSample?: GenerateRequest["onSample"],
    onRebuild?: GenerateRequest["onRebuild"]
};

type ModelRef = {path: string, info: ModelInfo | null, options?: LoadOptions};

/** Restarts in a row that may fail (the engine stopping again while it comes back) before the proxy gives up. */
const maxFailedRestarts = 2;

/**
 * The engine in a child process, behind the same API as `Engine`: llama.cpp's aborts, crashes and out-of-memory
 * kills end that process, not the app. When it stops, every call running in it fails with `ENGINE_STOPPED` (an answer
 * being written keeps what had arrived), and it restarts with the model that was loaded, except when loading a model is
 * what stopped it: that model is reported through `onModelCrashed` and the one that worked before is loaded again.
 */
export class EngineProxy implements EngineApi {
    private _child: EngineChild | null = null;
    private _nextId = 1;
    private readonly _calls = new Map<number, Pending>();
    private _status: EngineStatus = {state: "idle", build: null, model: null, progress: null, message: null};
    private _inspection: ModelInspection | null = null;
    private readonly _listeners = new Set<(status: EngineStatus) => void>();
    private readonly _stateListeners = new Set<(save: StateSave) => void>();
    /** The model that loaded and works; a restart loads it again. */
    private _loaded: ModelRef | null = null;
    /** A load in flight: when the engine stops during it, that model is what stopped it. */
    private _loading: ModelRef | null = null;
    private _started = false;
    private _restoring: Promise<void> | null = null;
    private _failedRestarts = 0;
    private _disposed = false;
    /** What the proxy has to say in the status (the engine stopped, it restarted) while the engine has nothing of its own. */
    private _note: string | null = null;
    /** Why the proxy killed the engine process itself, for the status after its exit. */
    private _killedBecause: string | null = null;
    private readonly _now: () => number;
    private _runtime: RuntimeOptions;
    /** Set while a `start` call loads the runtime (the engine build): a stop of the process then is the build's doing. */
    private _starting: object | null = null;
    /** Restarts after the engine stopped, and how long the last one took (ms, to the model loaded again). */
    restarts = 0;
    lastRestartMs: number | null = null;

    constructor(private readonly _options: EngineProxyOptions) {
        this._now = _options.now ?? (() => performance.now());
        this._runtime = _options.runtime ?? {};
    }

    get status(): EngineStatus {
        return this._status;
    }

    get inspection(): ModelInspection | null {
        return this._inspection;
    }

    /** The engine process's id, while one runs. */
    get pid(): number | undefined {
        return this._child?.pid;
    }

    onStatus(listener: (status: EngineStatus) => void): () => void {
        this._listeners.add(listener);
        return () => this._listeners.delete(listener);
    }

    async start(): Promise<BuildInfo> {
        this._started = true;
        await this._settled();
        return this._start();
    }

    async freeMemory(): Promise<number> {
        await this._settled();
        return this._call("freeMemory", []);
    }

    async inspect(modelPath: string): Promise<ModelInspection> {
        await this._settled();
        return this._call("inspect", [modelPath], (reason) =>
            new AppError("MODEL_INVALID", `${path.basename(modelPath)} could not be read: reading its header stopped the engine (${reason})`));
    }

    async loadModel(modelPath: string, modelInfo: ModelInfo | null, options?: LoadOptions): Promise<ModelInspection> {
        await this._settled();
        this._note = null;
        return this._load({path: modelPath, info: modelInfo, options});
    }

    /** `null` without asking the engine process while no model is loaded (none is started for a count). */
    async countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null> {
        await this._settled();
        if (this._inspection == null || this._child == null)
            return null;
        return this._call("countTokens", [request]);
    }

    /** `null` without asking when no engine process runs (a state kept in one that ended is gone with it). */
    async saveState(path?: string): Promise<StateSave | null> {
        await this._settled();
        if (this._child == null)
            return null;
        return this._call("saveState", [path]);
    }

    onStateSettled(listener: (save: StateSave) => void): () => void {
        this._stateListeners.add(listener);
        return () => this._stateListeners.delete(listener);
    }

    async generate(request: GenerateRequest): Promise<GenerationResult> {
        await this._settled();
        if (request.signal.aborted)
            return {stopReason: "abort", promptTokens: 0};
        this._note = null;
        const {signal, onChunk, onSample, onRebuild, ...rest} = request;
        const child = this._spawned();
        const id = this._nextId++;
        let grace: NodeJS.Timeout | undefined;
        const abort = () => {
            if (this._child !== child)
                return;
            child.post({type: "abort", id});
            // A stop always stops: an engine that does not end the generation in time is ended with it.
            const graceMs = this._options.stopGraceMs ?? 5000;
            grace = setTimeout(() => {
                if (this._child === child && this._calls.has(id)) {
                    this._killedBecause = `The engine did not stop within ${(graceMs / 1000).toFixed(1)} s of a stop, so its process was ended`;
                    child.kill();
                }
            }, graceMs);
        };
        signal.addEventListener("abort", abort);
        try {
            return await new Promise<GenerationResult>((resolve, reject) => {
                this._calls.set(id, {
                    resolve: resolve as (value: unknown) => void,
                    reject,
                    stopped: (reason) => new AppError("ENGINE_STOPPED", `${reason}. The answer is kept up to where it stopped: Continue resumes it.`),
                    endedForIt: () => resolve({stopReason: "abort", promptTokens: 0}),
                    onChunks: (chunks) => {
                        for (const chunk of chunks)
                            onChunk(chunk);
                    },
                    onSample,
                    onRebuild
                });
                child.post({type: "generate", id, request: {...rest, samples: onSample != null, rebuild: onRebuild != null}});
            });
        } finally {
            clearTimeout(grace);
            signal.removeEventListener("abort", abort);
        }
    }

    /**
     * Starts the engine on another build: the engine process ends (it is asked to dispose, and killed if it does not), a
     * new one starts with `options` and loads the model that was loaded. The status says what happens meanwhile; calls
     * made meanwhile wait for it. Refused while an answer is being written.
     */
    async restart(options: RuntimeOptions): Promise<BuildInfo> {
        await this._settled();
        if ([...this._calls.values()].some((call) => call.onChunks != null))
            throw new AppError("BUSY", "Stop the current answer before changing the engine build");
        this._runtime = options;
        const target = this._loaded;
        const wanted = describeChoice(options);
        this._note = `Restarting the engine with ${wanted}${target != null ? ` and loading ${target.info?.name ?? path.basename(target.path)} again` : ""}…`;
        this._setStatus({state: "loading", build: null, progress: null, model: target?.info ?? null, message: this._note, placement: null});
        const restarting = (async () => {
            // A state an answer left in the old process is written before that process ends; the restart waits 3 s at most.
            if (this._child != null) {
                let timer: NodeJS.Timeout | undefined;
                await Promise.race([this._call("saveState", []).catch(() => null), new Promise((resolve) => timer = setTimeout(resolve, 3000))]);
                clearTimeout(timer);
            }
            await this._retire("The engine is restarting with another build");
            this._started = true;
            const build = await this._start();
            if (target != null)
                await this._load(target);
            return build;
        })();
        const settled = restarting.then(() => {}, () => {});
        this._restoring = settled;
        try {
            const build = await restarting;
            const running = build.gpu === false ? "CPU" : backendName(build.gpu);
            this._note = build.fallback ?? `The engine now runs the ${running} build${build.patched ? " (patched)" : ""}.`;
            this._setStatus({message: this._note});
            return build;
        } catch (err) {
            // A stop of the new engine process is the crash restart's to report; anything else is this restart's.
            if (this._restoring === settled) {
                this._note = `Restarting the engine with ${wanted} failed: ${(err as Error).message}`;
                this._setStatus({state: "error", progress: null, message: this._note});
            }
            throw err;
        } finally {
            if (this._restoring === settled)
                this._restoring = null;
        }
    }

    /** Makes the engine process inject a fault into itself (tests; the process refuses unless started to allow it). */
    injectFault(fault: EngineFault): void {
        this._child?.post({type: "fault", fault});
    }

    /** Kills the engine process outright, as the system's out-of-memory killer would (tests). */
    kill(): void {
        this._child?.kill();
    }

    async dispose(): Promise<void> {
        if (this._disposed)
            return;
        this._disposed = true;
        await this._restoring?.catch(() => {});
        const child = this._child;
        if (child == null)
            return;
        const exited = new Promise<void>((resolve) => child.onExit(() => resolve()));
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<void>((resolve) => timer = setTimeout(resolve, this._options.disposeTimeoutMs ?? 5000));
        // The engine frees the model and the runtime, then exits; one that hangs is killed.
        await Promise.race([this._call("dispose", []).then(() => exited, () => exited), timeout]);
        clearTimeout(timer);
        if (this._child === child) {
            child.kill();
            await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1000))]);
        }
    }

    /** Loads the runtime in the engine process; while it runs, a stop of the process is the build's doing. */
    private async _start(): Promise<BuildInfo> {
        const starting = {};
        this._starting = starting;
        try {
            return await this._call("start", []);
        } finally {
            if (this._starting === starting)
                this._starting = null;
        }
    }

    /**
     * Ends the engine process on purpose: it no longer counts as running (its exit is not a crash), its calls fail with
     * `reason`, and it is asked to dispose, then killed if it has not exited in time.
     */
    private async _retire(reason: string): Promise<void> {
        const child = this._child;
        if (child == null)
            return;
        this._child = null;
        this._inspection = null;
        const calls = [...this._calls.values()];
        this._calls.clear();
        for (const call of calls)
            call.reject(new AppError("ENGINE_STOPPED", reason));
        let exited = false;
        const exit = new Promise<void>((resolve) => child.onExit(() => {
            exited = true;
            resolve();
        }));
        child.post({type: "call", id: this._nextId++, method: "dispose", args: []});
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([exit, new Promise((resolve) => timer = setTimeout(resolve, this._options.disposeTimeoutMs ?? 5000))]);
        clearTimeout(timer);
        if (!exited) {
            child.kill();
            await Promise.race([exit, new Promise((resolve) => setTimeout(resolve, 1000))]);
        }
    }

    /** Waits for a restart in progress (and any that follows it), so a call goes to the engine with its model back. */
    private async _settled(): Promise<void> {
        if (this._disposed)
            throw new AppError("ENGINE_STOPPED", "The engine is shut down");
        let restoring: Promise<void> | null;
        while ((restoring = this._restoring) != null) {
            await restoring.catch(() => {});
            if (this._restoring === restoring)
                break;
        }
    }

    private async _load(model: ModelRef): Promise<ModelInspection> {
        this._loading = model;
        try {
            const inspection = await this._call("loadModel", [model.path, model.info, model.options], (reason) => new AppError("MODEL_INVALID",
                `Loading ${model.info?.name ?? path.basename(model.path)} stopped the engine (${reason}): it is not loaded automatically again`));
            this._loaded = {path: inspection.path, info: model.info, options: model.options};
            this._inspection = inspection;
            return inspection;
        } finally {
            if (this._loading === model)
                this._loading = null;
        }
    }

    private _call<M extends EngineMethod>(method: M, args: EngineCalls[M]["args"], stopped?: (reason: string) => Error): Promise<EngineCalls[M]["res"]> {
        const child = this._spawned();
        const id = this._nextId++;
        return new Promise((resolve, reject) => {
            this._calls.set(id, {
                resolve: resolve as (value: unknown) => void,
                reject,
                stopped: stopped ?? ((reason) => new AppError("ENGINE_STOPPED", `${reason}; it is restarting`))
            });
            child.post({type: "call", id, method, args} as ToEngine);
        });
    }

    private _spawned(): EngineChild {
        if (this._child != null)
            return this._child;
        const child = this._options.spawn(this._runtime);
        this._child = child;
        child.onMessage((message) => {
            if (this._child === child)
                this._onMessage(message);
        });
        child.onExit((exit) => {
            if (this._child === child)
                this._onExit(exit);
        });
        return child;
    }

    private _onMessage(message: FromEngine): void {
        switch (message.type) {
            case "ready":
                return;
            case "status": {
                this._inspection = message.inspection;
                // The note on a restart stays until the engine has a message of its own or a person loads or sends.
                this._setStatus({...message.status, message: message.status.message ?? this._note});
                return;
            }
            case "result": {
                const pending = this._calls.get(message.id);
                this._calls.delete(message.id);
                if (message.ok)
                    pending?.resolve(message.value);
                else
                    pending?.reject(new AppError(message.error.code, message.error.message));
                return;
            }
            case "chunks":
                this._calls.get(message.id)?.onChunks?.(message.chunks);
                return;
            case "sample":
                this._calls.get(message.id)?.onSample?.(message.sample);
                return;
            case "rebuild":
                this._calls.get(message.id)?.onRebuild?.(message.progress, message.reason);
                return;
            case "stateSettled":
                for (const listener of this._stateListeners) {
                    try {
                        listener(message.save);
                    } catch {
                        // a listener's failure is its own (one that hears after the app closed its database, say)
                    }
                }
                return;
        }
    }

    private _onExit(exit: EngineExit): void {
        this._child = null;
        this._inspection = null;
        const killedBecause = this._killedBecause;
        this._killedBecause = null;
        const servers = this._runtime.rpcServers ?? [];
        if (servers.length === 0 || killedBecause != null || this._disposed) {
            this._afterExit(killedBecause ?? describeExit(exit), killedBecause, false);
            return;
        }
        // ggml aborts the engine when an rpc-server it uses stops answering: ask each, so the error names the one lost.
        // Calls made meanwhile wait (`_settled`).
        const naming = (async () => {
            const lost = await this._findLostRpcServers(servers);
            const reason = lost.length === 0 ? describeExit(exit)
                : `${lost.map(({endpoint, error}) => `The RPC server ${endpoint} stopped answering (${error})`).join("; ")}, which ended the engine process ` +
                    `(${describeExit(exit)})`;
            this._afterExit(reason, null, lost.length > 0);
        })();
        this._restoring = naming;
    }

    private async _findLostRpcServers(servers: readonly string[]): Promise<{endpoint: string, error: string}[]> {
        const probe = this._options.probeRpcServer ?? ((endpoint: string) => probeRpcServer(endpoint, {timeoutMs: 2000}));
        const probes = await Promise.all(servers.map((endpoint) => probe(endpoint)));
        return probes.flatMap((probed) => probed.ok ? [] : [{endpoint: probed.endpoint, error: probed.error}]);
    }

    /** `rpcLost`: an rpc-server stopped answering, which ended the process: a model loading then is not what stopped it. */
    private _afterExit(reason: string, killedBecause: string | null, rpcLost: boolean): void {
        const calls = [...this._calls.values()];
        this._calls.clear();
        for (const call of calls) {
            if (this._disposed)
                call.reject(new AppError("ENGINE_STOPPED", "The engine is shut down"));
            else if (killedBecause != null && call.endedForIt != null)
                call.endedForIt();
            else
                call.reject(call.stopped(reason));
        }
        if (this._disposed)
            return;

        const interruptedLoad = this._loading;
        this._loading = null;
        const crashedLoad = rpcLost ? null : interruptedLoad;
        if (crashedLoad != null) {
            // Loading it stopped the engine: not again by itself, even when it is the model that was loaded before.
            if (this._loaded?.path === crashedLoad.path)
                this._loaded = null;
            if (crashedLoad.info != null)
                this._options.onModelCrashed?.(crashedLoad.info);
        }
        if (this._failedRestarts >= maxFailedRestarts) {
            this._restoring = null;
            this._note = `${reason}, again while restarting: it was not restarted. Load a model to try again.`;
            this._setStatus({state: "error", model: null, progress: null, message: this._note});
            this._failedRestarts = 0;
            return;
        }
        this._failedRestarts++;
        // The engine comes back without the lost server (it checks each before use) and loads the model on what is left.
        const target = rpcLost && interruptedLoad != null ? interruptedLoad : this._loaded;
        const crashedStart = this._starting != null;
        this._starting = null;
        const what = crashedLoad != null ? `Loading ${crashedLoad.info?.name ?? path.basename(crashedLoad.path)} stopped the engine (${reason})`
            : crashedStart ? `Starting the engine on ${describeChoice(this._runtime)} stopped it (${reason})`
                : reason;
        this._note = `${what}: restarting it${target != null ? ` with ${target.info?.name ?? path.basename(target.path)}` : ""}`;
        this._setStatus({state: "loading", model: target?.info ?? null, progress: null, message: this._note, placement: null});
        const started = this._now();
        const restoring = (async () => {
            if (this._started)
                await this._start();
            if (target != null)
                await this._load(target);
            this._failedRestarts = 0;
            this.restarts++;
            this.lastRestartMs = this._now() - started;
            this._note = `${what}, so it was restarted in ${(this.lastRestartMs / 1000).toFixed(1)} s` +
                `${target != null ? ` with ${target.info?.name ?? path.basename(target.path)}` : ""}.`;
            this._setStatus({message: this._note});
        })();
        this._restoring = restoring;
        restoring.then(() => {
            if (this._restoring === restoring)
                this._restoring = null;
        }, (err: unknown) => {
            // A newer restart took over (the engine stopped again), or the proxy gave up and said so.
            if (this._restoring !== restoring)
                return;
            this._restoring = null;
            this._note = `${what}, and restarting it failed: ${(err as Error).message}`;
            this._setStatus({state: "error", progress: null, message: this._note});
        });
    }

    private _setStatus(patch: Partial<EngineStatus>): void {
        this._status = {...this._status, ...patch};
        for (const listener of this._listeners)
            listener(this._status);
    }
}

/** The build a runtime asks for, for a person: "the CUDA build", "the best build present". */
function describeChoice(runtime: RuntimeOptions): string {
    return runtime.build == null || runtime.build === "auto" ? "the best build present" : `the ${backendName(runtime.build)} build`;
}

/** How an engine process ended, for a person. */
export function describeExit({code, signal}: EngineExit): string {
    if (signal === "SIGKILL")
        return "The engine process was killed (SIGKILL: out of memory, or ended from outside)";
    if (signal === "SIGABRT")
        return "The engine process aborted (SIGABRT: llama.cpp stopped on a failed check)";
    if (signal != null)
        return `The engine process crashed (${signal})`;
    return `The engine process exited unexpectedly (code ${code})`;
}
