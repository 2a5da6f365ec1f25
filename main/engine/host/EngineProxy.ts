import type {BuildInfo, EngineStatus} from "../../../preload/contract/engine.js";
import type {ModelInfo} from "../../../preload/contract/models.js";
import {AppError} from "../../AppError.js";
import type {
    EngineApi,
    LoadOptions,
    RuntimeOptions,
    CalibrateRequest,
    CalibrationResult,
    CountTokensRequest,
    GenerateRequest,
    GenerationResult,
    ModelInspection,
    PromptTokenCount,
    StateSave
} from "../EngineApi.js";
import {CallTable} from "./CallTable.js";
import {EngineSupervisor, type ModelRef, type SpawnEngine} from "./EngineSupervisor.js";
import {engineWording} from "./engineWording.js";
import type {EngineCalls, EngineFault, EngineMethod, FromEngine} from "../protocol.js";
import {probeRpcServer, type RpcProbe} from "../rpc/probeRpcServer.js";

export type {EngineChild, EngineExit, SpawnEngine} from "./EngineSupervisor.js";
export {engineArgs} from "./engineArgs.js";

export type EngineProxyOptions = {
    spawn: SpawnEngine;
    /** The runtime every engine process starts with, until `restart` changes it. Defaults to `{build: "auto"}`. */
    runtime?: RuntimeOptions;
    /** Loading this model stopped the engine: it is not loaded again automatically (at start-up or on a restart). */
    onModelCrashed?: (model: ModelInfo) => void;
    /** Milliseconds the engine process has to dispose before it is killed. Defaults to `5000`. */
    disposeTimeoutMs?: number;
    /**
     * Milliseconds a generation has to end after its stop before the engine process is killed (and restarted), so that
     * a stop always stops, even in an engine stuck in native code. Defaults to `5000`.
     */
    stopGraceMs?: number;
    now?: () => number;
    /** Checks an rpc-server after the engine process ended while using it. Defaults to `probeRpcServer` over TCP (tests pass their own). */
    probeRpcServer?: (endpoint: string) => Promise<RpcProbe>;
};

/**
 * The engine in a child process, behind the same API as `Engine`: llama.cpp's aborts, crashes and out-of-memory
 * kills end that process, not the app. When it stops, every call running in it fails with `ENGINE_STOPPED` (an answer
 * being written keeps what had arrived), and it restarts with the model that was loaded, except when loading a model is
 * what stopped it: that model is reported through `onModelCrashed` and the one that worked before is loaded again.
 *
 * The calls in flight are a `CallTable`, the process's life and restarts an `EngineSupervisor`, and what people read
 * `engineWording`; the proxy keeps the status and maps the API onto calls.
 */
export class EngineProxy implements EngineApi {
    private readonly _calls = new CallTable();
    private readonly _supervisor: EngineSupervisor;
    private _status: EngineStatus = {state: "idle", build: null, model: null, progress: null, message: null};
    private _inspection: ModelInspection | null = null;
    private readonly _listeners = new Set<(status: EngineStatus) => void>();
    private readonly _stateListeners = new Set<(save: StateSave) => void>();
    /** What the proxy has to say in the status (the engine stopped, it restarted) while the engine has nothing of its own. */
    private _note: string | null = null;

    constructor(private readonly _options: EngineProxyOptions) {
        this._supervisor = new EngineSupervisor({
            spawn: _options.spawn,
            runtime: _options.runtime ?? {},
            calls: this._calls,
            disposeTimeoutMs: _options.disposeTimeoutMs ?? 5000,
            now: _options.now ?? (() => performance.now()),
            probeRpcServer: _options.probeRpcServer ?? ((endpoint: string) => probeRpcServer(endpoint, {timeoutMs: 2000})),
            onModelCrashed: _options.onModelCrashed,
            onMessage: (message) => this._onMessage(message),
            onGone: () => {
                this._inspection = null;
            },
            start: () => this._start(),
            load: (model) => this._load(model),
            report: (note, patch) => {
                this._note = note;
                this._setStatus({...patch, message: note});
            }
        });
    }

    get status(): EngineStatus {
        return this._status;
    }

    get inspection(): ModelInspection | null {
        return this._inspection;
    }

    /** The engine process's id, while one runs. */
    get pid(): number | undefined {
        return this._supervisor.pid;
    }

    /** Restarts after the engine stopped. */
    get restarts(): number {
        return this._supervisor.restarts;
    }

    /** How long the last restart took (ms, to the model loaded again); `null` before the first. */
    get lastRestartMs(): number | null {
        return this._supervisor.lastRestartMs;
    }

    onStatus(listener: (status: EngineStatus) => void): () => void {
        this._listeners.add(listener);
        return () => this._listeners.delete(listener);
    }

    async start(): Promise<BuildInfo> {
        this._supervisor.markStarted();
        await this._supervisor.settled();
        return this._start();
    }

    async freeMemory(): Promise<number> {
        await this._supervisor.settled();
        return this._call("freeMemory", []);
    }

    async inspect(modelPath: string): Promise<ModelInspection> {
        await this._supervisor.settled();
        return this._call(
            "inspect",
            [modelPath],
            (reason) => new AppError("MODEL_INVALID", engineWording.inspectStopped(modelPath, reason))
        );
    }

    async loadModel(modelPath: string, modelInfo: ModelInfo | null, options?: LoadOptions): Promise<ModelInspection> {
        await this._supervisor.settled();
        this._note = null;
        return this._load({path: modelPath, info: modelInfo, options});
    }

    /** `null` without asking the engine process while no model is loaded (none is started for a count). */
    async countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null> {
        await this._supervisor.settled();
        if (this._inspection == null || !this._supervisor.running) return null;
        return this._call("countTokens", [request]);
    }

    /** `null` without asking when no engine process runs (a state kept in one that ended is gone with it). */
    async saveState(path?: string): Promise<StateSave | null> {
        await this._supervisor.settled();
        if (!this._supervisor.running) return null;
        return this._call("saveState", [path]);
    }

    onStateSettled(listener: (save: StateSave) => void): () => void {
        this._stateListeners.add(listener);
        return () => this._stateListeners.delete(listener);
    }

    async generate(request: GenerateRequest): Promise<GenerationResult> {
        await this._supervisor.settled();
        if (request.signal.aborted) return {stopReason: "abort", promptTokens: 0};
        this._note = null;
        const {signal, onChunk, onSample, onRebuild, ...rest} = request;
        const child = this._supervisor.spawned();
        const id = this._calls.nextId();
        let grace: NodeJS.Timeout | undefined;
        const abort = () => {
            if (!this._supervisor.isCurrent(child)) return;
            child.post({type: "abort", id});
            // A stop always stops: an engine that does not end the generation in time is ended with it.
            const graceMs = this._options.stopGraceMs ?? 5000;
            grace = setTimeout(() => {
                if (this._calls.has(id)) this._supervisor.endFor(child, engineWording.stopIgnored(graceMs));
            }, graceMs);
        };
        signal.addEventListener("abort", abort);
        try {
            return await new Promise<GenerationResult>((resolve, reject) => {
                this._calls.expect(id, {
                    resolve: resolve as (value: unknown) => void,
                    reject,
                    stopped: (reason) => new AppError("ENGINE_STOPPED", engineWording.answerStopped(reason)),
                    endedForIt: () => resolve({stopReason: "abort", promptTokens: 0}),
                    onChunks: (chunks) => {
                        for (const chunk of chunks) onChunk(chunk);
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
     * Runs a calibration in the engine process; its progress arrives as events, and the signal cancels it there (the job
     * stops at its next token or training step). When the engine process stops meanwhile it fails with `ENGINE_STOPPED`
     * (its work folder stays: the next calibration goes on from it).
     */
    async calibrateRetention(request: CalibrateRequest): Promise<CalibrationResult | null> {
        await this._supervisor.settled();
        if (request.signal.aborted) return null;
        const {signal, onProgress, ...rest} = request;
        const child = this._supervisor.spawned();
        const id = this._calls.nextId();
        const abort = () => {
            if (this._supervisor.isCurrent(child)) child.post({type: "abort", id});
        };
        signal.addEventListener("abort", abort);
        try {
            return await new Promise<CalibrationResult | null>((resolve, reject) => {
                this._calls.expect(id, {
                    resolve: resolve as (value: unknown) => void,
                    reject,
                    stopped: (reason) => new AppError("ENGINE_STOPPED", engineWording.calibrationStopped(reason)),
                    onCalibration: onProgress
                });
                child.post({type: "calibrate", id, request: rest});
            });
        } finally {
            signal.removeEventListener("abort", abort);
        }
    }

    /**
     * Starts the engine on another build: the engine process ends (it is asked to dispose, and killed if it does not), a
     * new one starts with `options` and loads the model that was loaded. The status says what happens meanwhile; calls
     * made meanwhile wait for it. Refused while an answer is being written.
     */
    async restart(options: RuntimeOptions): Promise<BuildInfo> {
        await this._supervisor.settled();
        if (this._calls.generating) throw new AppError("BUSY", engineWording.busyRestarting);
        const target = this._supervisor.loaded;
        this._note = engineWording.switching(options, target);
        this._setStatus({state: "loading", build: null, progress: null, model: target?.info ?? null, message: this._note, placement: null});
        return this._supervisor.switchTo(options, () => this._call("saveState", []));
    }

    /** Makes the engine process inject a fault into itself (tests; the process refuses unless started to allow it). */
    injectFault(fault: EngineFault): void {
        if (this._supervisor.running) this._supervisor.spawned().post({type: "fault", fault});
    }

    /** Kills the engine process outright, as the system's out-of-memory killer would (tests). */
    kill(): void {
        this._supervisor.kill();
    }

    async dispose(): Promise<void> {
        await this._supervisor.shutDown(() => this._call("dispose", []));
    }

    /** Loads the runtime in the engine process; while it runs, a stop of the process is the build's doing. */
    private _start(): Promise<BuildInfo> {
        return this._supervisor.whileStarting(() => this._call("start", []));
    }

    private async _load(model: ModelRef): Promise<ModelInspection> {
        const inspection = await this._supervisor.whileLoading(model, () =>
            this._call(
                "loadModel",
                [model.path, model.info, model.options],
                (reason) => new AppError("MODEL_INVALID", engineWording.loadStopped(model, reason))
            )
        );
        this._inspection = inspection;
        return inspection;
    }

    private _call<M extends EngineMethod>(
        method: M,
        args: EngineCalls[M]["args"],
        stopped?: (reason: string) => Error
    ): Promise<EngineCalls[M]["res"]> {
        return this._calls.call(this._supervisor.spawned(), method, args, stopped);
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
            case "stateSettled":
                for (const listener of this._stateListeners) {
                    try {
                        listener(message.save);
                    } catch {
                        // a listener's failure is its own (one that hears after the app closed its database, say)
                    }
                }
                return;
            default:
                this._calls.route(message);
        }
    }

    private _setStatus(patch: Partial<EngineStatus>): void {
        this._status = {...this._status, ...patch};
        for (const listener of this._listeners) listener(this._status);
    }
}
