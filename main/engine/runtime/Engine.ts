import type {Llama} from "node-llama-cpp";
import {withLock} from "lifecycle-utils";
import type {BuildInfo, EngineStatus} from "../../../preload/contract/engine.js";
import {AppError} from "../../AppError.js";
import {calibrateLoadedModel} from "./calibrateLoadedModel.js";
import {countPromptTokens} from "../generation/chatPrompt.js";
import type {
    EngineApi,
    LoadOptions,
    RuntimeOptions,
    CountTokensRequest,
    GenerateRequest,
    GenerationResult,
    ModelInspection,
    PromptTokenCount,
    StateSave,
    CalibrateRequest,
    CalibrationResult
} from "../EngineApi.js";
import {EngineContext} from "./EngineContext.js";
import {EngineRuntime, type LlamaLoader} from "./EngineRuntime.js";
import type {LoadedModel} from "./engineState.js";
import {generateAnswer} from "../generation/generateAnswer.js";
import {inspectModel} from "./inspectModel.js";
import {loadChatModel} from "./loadChatModel.js";
import {SavedStates} from "../states/SavedStates.js";

export type {LoadOptions, LlamaLoader};
export type {ContextConfig} from "./engineState.js";
export {toChatHistory} from "../generation/chatPrompt.js";

export type EngineOptions = {
    /** Loads the llama.cpp runtime; the app's loader prefers the patched build and says when it is missing. */
    loadLlama: LlamaLoader;
    /** The runtime to load (the engine build). Defaults to `{build: "auto"}`. */
    runtime?: RuntimeOptions;
    /** Threads per context; `0` lets llama.cpp decide. Defaults to `0`. */
    threads?: number;
    /** Whether `dispose()` also disposes the runtime `loadLlama` gave (false when the caller shares it). Defaults to `true`. */
    ownsRuntime?: boolean;
    /**
     * Bytes free where a new context goes, read before each one is created (its fit is checked against them). Defaults to
     * `freeMemory()`: free VRAM on a GPU build, free RAM otherwise.
     */
    freeMemory?: () => Promise<number>;
};

/** The model a load or a restart replaces: what loaded it and the status it showed. */
type PreviousLoad = {inspection: ModelInspection; info: EngineStatus["model"]; options: LoadOptions};

/**
 * Owns the llama.cpp runtime, the loaded model and its chat context, and runs one generation at a time with
 * the conversation's KV policy. The only module (with its helpers) that imports node-llama-cpp.
 *
 * A façade: the runtime (EngineRuntime), the model (loadChatModel), the context (EngineContext), the chat prompt
 * (chatPrompt), a generation (generateAnswer, with prefill) and the saved states (SavedStates) are modules of their own;
 * the engine keeps the status, the lock everything that changes the model or the context runs under, and the order of
 * what loads and unloads.
 */
export class Engine implements EngineApi {
    private readonly _runtime: EngineRuntime;
    private readonly _context: EngineContext;
    private readonly _states: SavedStates;
    private _loaded: LoadedModel | null = null;
    private _status: EngineStatus = {state: "idle", build: null, model: null, progress: null, message: null, placement: null};
    private _generating = false;
    private readonly _listeners = new Set<(status: EngineStatus) => void>();

    constructor(private readonly _options: EngineOptions) {
        const setStatus = (patch: Partial<EngineStatus>) => this._setStatus(patch);
        this._runtime = new EngineRuntime(_options.loadLlama, _options.runtime ?? {}, _options.ownsRuntime !== false, setStatus);
        this._states = new SavedStates(() => this._context.active, setStatus);
        this._context = new EngineContext({
            runtime: this._runtime,
            threads: _options.threads ?? 0,
            freeMemory: () => this._options.freeMemory?.() ?? this.freeMemory(),
            beforeReplace: () => this._states.flush(),
            setStatus
        });
    }

    get status(): EngineStatus {
        return this._status;
    }

    get inspection(): ModelInspection | null {
        return this._loaded?.inspection ?? null;
    }

    onStatus(listener: (status: EngineStatus) => void): () => void {
        this._listeners.add(listener);
        return () => this._listeners.delete(listener);
    }

    /** Loads the runtime (once, however many ask at the same time) and reports which llama.cpp build it is. */
    runtime(): Promise<{llama: Llama; build: BuildInfo}> {
        return this._runtime.load();
    }

    async start(): Promise<BuildInfo> {
        return (await this.runtime()).build;
    }

    freeMemory(): Promise<number> {
        return this._runtime.freeMemory();
    }

    inspect(modelPath: string): Promise<ModelInspection> {
        return inspectModel(modelPath);
    }

    /**
     * Validates and loads a GGUF model, replacing the loaded one. A file that fails validation changes nothing; a
     * model that fails to load puts the previous one back. Loads and generations run one at a time, in order.
     */
    async loadModel(modelPath: string, modelInfo: EngineStatus["model"], options: LoadOptions = {}): Promise<ModelInspection> {
        if (this._generating) throw new AppError("BUSY", "Stop the current answer before loading another model");
        return withLock([this, "engine"], async () => {
            if (this._generating) throw new AppError("BUSY", "Stop the current answer before loading another model");
            const inspection = await inspectModel(modelPath);
            const {llama} = await this.runtime();
            const previous = await this._unloadForReplacement();
            this._setStatus({state: "loading", progress: 0, model: modelInfo, message: `Loading ${inspection.name}`});
            try {
                await this._load(llama, inspection, options);
            } catch (err) {
                const reason = `Could not load ${inspection.name}: ${(err as Error).message}`;
                const restored =
                    previous != null &&
                    (await this._load(llama, previous.inspection, previous.options).then(
                        () => true,
                        () => false
                    ));
                if (restored)
                    this._setStatus({
                        state: "ready",
                        progress: null,
                        model: previous.info,
                        message: `${reason}. ${previous.inspection.name} is loaded again.`
                    });
                else this._setStatus({state: "error", progress: null, model: null, message: reason});
                throw new AppError("MODEL_INVALID", reason, {cause: err});
            }
            this._setStatus({state: "ready", progress: null, model: modelInfo, message: null});
            return inspection;
        });
    }

    /**
     * Where the loaded model's layers are, by device name ("CPU", "RPC0", …), once a context exists; `null` before, or on a
     * build without patch 0010.
     */
    layerDevices(): {layers: string[]; output: string} | null {
        return this._context.layerDevices();
    }

    /**
     * Streams an answer to the last user turn of `history`; the thinking and the answer arrive as separate
     * segments, and the KV policy prunes while the model thinks.
     */
    async generate(request: GenerateRequest): Promise<GenerationResult> {
        if (this._generating) throw new AppError("BUSY", "An answer is already being generated");
        // Held from here, so a load asked for meanwhile is refused; a load already running finishes first.
        this._generating = true;
        try {
            return await withLock([this, "engine"], request.signal, async () => {
                const loaded = this._loaded;
                if (loaded == null) throw new AppError("MODEL_NOT_LOADED", "No model is loaded: open a model first");
                return generateAnswer(
                    {
                        loaded,
                        build: this._runtime.build,
                        offloads: this._runtime.offloads,
                        context: this._context,
                        states: this._states,
                        setStatus: (patch) => this._setStatus(patch)
                    },
                    request
                );
            });
        } catch (err) {
            if (request.signal.aborted && !(err instanceof AppError)) return {stopReason: "abort", promptTokens: 0};
            throw err;
        } finally {
            this._generating = false;
        }
    }

    /**
     * Makes the loaded model's retention gates from its own thinking (calibrateLoadedModel) and installs them beside it when
     * they validate. It runs under the engine's lock, as an answer does: answers asked for meanwhile wait for it to end,
     * and it waits for an answer running. `null` when cancelled.
     */
    async calibrateRetention(request: CalibrateRequest): Promise<CalibrationResult | null> {
        if (this._generating) throw new AppError("BUSY", "Stop the current answer before calibrating");
        try {
            return await withLock([this, "engine"], request.signal, async () => {
                const loaded = this._loaded;
                if (loaded == null || loaded.inspection.path !== request.modelPath)
                    throw new AppError("MODEL_NOT_LOADED", "Load the model before calibrating it");
                return calibrateLoadedModel(
                    {
                        loaded,
                        context: this._context,
                        states: this._states,
                        threads: this._options.threads ?? 0,
                        setStatus: (patch) => this._setStatus(patch)
                    },
                    request
                );
            });
        } catch (err) {
            if (request.signal.aborted && !(err instanceof AppError)) return null;
            throw err;
        }
    }

    /**
     * Counts the prompt an answer to `request.history` (ending with a new user message) would read, as `generate` renders
     * it (countPromptTokens). `null` when no model is loaded.
     */
    async countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null> {
        const loaded = this._loaded;
        if (loaded == null) return null;
        return countPromptTokens(loaded, request);
    }

    /**
     * Loads another build in this process: the model is unloaded, the runtime disposed and loaded with `options`, and the
     * model loaded again. (The app runs the engine in a process of its own, which `EngineProxy` restarts instead.)
     */
    async restart(options: RuntimeOptions): Promise<BuildInfo> {
        if (this._options.ownsRuntime === false)
            throw new AppError("BAD_REQUEST", "This engine shares its runtime: it cannot load another build");
        if (this._generating) throw new AppError("BUSY", "Stop the current answer before changing the engine build");
        return withLock([this, "engine"], async () => {
            if (this._generating) throw new AppError("BUSY", "Stop the current answer before changing the engine build");
            const previous = await this._unloadForReplacement();
            await this._runtime.dispose();
            this._runtime.options = options;
            this._setStatus({state: "loading", build: null, progress: null, model: previous?.info ?? null, message: null});
            const {llama, build} = await this.runtime();
            if (previous == null) {
                this._setStatus({state: "idle", model: null});
                return build;
            }
            try {
                await this._load(llama, previous.inspection, previous.options);
            } catch (err) {
                this._setStatus({
                    state: "error",
                    progress: null,
                    model: null,
                    message: `Could not load ${previous.inspection.name} again: ${(err as Error).message}`
                });
                throw new AppError("MODEL_INVALID", `Could not load ${previous.inspection.name} again`, {cause: err});
            }
            this._setStatus({state: "ready", progress: null, model: previous.info});
            return build;
        });
    }

    /**
     * Writes the state an answer left in the context (`StateOutcome.pending`; with `path`, only that one), after any
     * generation running; `null` when none waits (written already, or superseded by a later answer of its conversation).
     */
    async saveState(path?: string): Promise<StateSave | null> {
        return withLock([this, "engine"], () => this._states.flush(path));
    }

    /** What becomes of each state that waited in the context: written, not written, or superseded (`StateSave`). */
    onStateSettled(listener: (save: StateSave) => void): () => void {
        return this._states.onSettled(listener);
    }

    /** Disposes the model and the runtime; a state waiting to be written is dropped (`saveState` first to keep it). */
    async dispose(): Promise<void> {
        await withLock([this, "engine"], () => {
            this._states.drop();
            return this._unload();
        });
        await this._runtime.dispose();
    }

    private async _load(llama: Llama, inspection: ModelInspection, options: LoadOptions): Promise<void> {
        this._loaded = await loadChatModel(llama, this._runtime.build, inspection, options, (progress) => {
            // node-llama-cpp may report progress after the load resolved: a ready engine stays without progress.
            if (this._status.state === "loading") this._setStatus({progress});
        });
    }

    /**
     * Writes any state waiting in the context and unloads the model, returning what loaded it (`null` when none was), so
     * a load that replaces it can put it back when it fails.
     */
    private async _unloadForReplacement(): Promise<PreviousLoad | null> {
        const loaded = this._loaded;
        const previous = loaded == null ? null : {inspection: loaded.inspection, info: this._status.model, options: loaded.options};
        await this._states.flush();
        await this._unload();
        return previous;
    }

    private async _unload(): Promise<void> {
        await this._context.dispose();
        const loaded = this._loaded;
        this._loaded = null;
        if (loaded != null) {
            await loaded.model.dispose();
            this._setStatus({state: "idle", model: null, placement: null});
        }
    }

    private _setStatus(patch: Partial<EngineStatus>): void {
        this._status = {...this._status, ...patch};
        for (const listener of this._listeners) listener(this._status);
    }
}
