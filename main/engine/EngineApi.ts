import type {BuildInfo, EngineBuildChoice, EngineStatus} from "../../preload/contract/engine.js";
import type {ModelInfo} from "../../preload/contract/models.js";
import type {CalibrateRequest, CalibrationResult} from "./calibrateLoadedModel.js";
import type {CountTokensRequest, GenerateRequest, GenerationResult, ModelInspection, PromptTokenCount, StateSave} from "./types.js";

/** How a model is loaded. */
export type LoadOptions = {
    /** Layers on the GPU: node-llama-cpp's fit to free VRAM, all of them, or a count. A CPU build ignores it. Defaults to `"auto"`. */
    gpuLayers?: number | "auto" | "max";
};

/** Which llama.cpp runtime the engine runs. */
export type RuntimeOptions = {
    /** The engine build: the best one present, or one backend (see main/engine/loadRuntime.ts). Defaults to `"auto"`. */
    build?: EngineBuildChoice;
    /**
     * The rpc-servers ("host:port") whose devices take a model's offloaded layers (the GPU layers setting), registered
     * when the runtime loads; each is checked first and left out, with the reason, when it cannot be used. Defaults to none.
     */
    rpcServers?: string[];
};

/**
 * What the services call on the engine. `Engine` runs llama.cpp in the calling process (tests, benchmarks);
 * `EngineProxy` runs the same engine in a child process and speaks to it in messages (the app, headless mode).
 */
export type EngineApi = {
    readonly status: EngineStatus;
    /** The loaded model's inspection; `null` when none is loaded. */
    readonly inspection: ModelInspection | null;
    onStatus(listener: (status: EngineStatus) => void): () => void;
    /** Loads the llama.cpp runtime (once); the status then says which build runs. */
    start(): Promise<BuildInfo>;
    /** Bytes free where the KV cache goes: VRAM on a GPU build, RAM otherwise. */
    freeMemory(): Promise<number>;
    /** Reads and checks a GGUF file's header (the parser runs where llama.cpp runs). */
    inspect(modelPath: string): Promise<ModelInspection>;
    loadModel(modelPath: string, modelInfo: ModelInfo | null, options?: LoadOptions): Promise<ModelInspection>;
    generate(request: GenerateRequest): Promise<GenerationResult>;
    /**
     * Counts, with the loaded model's tokenizer, the prompt an answer to `request.history` would read and what its last
     * turn (a new user message) adds; `null` when no model is loaded. Runs beside a generation: no context is touched.
     */
    countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null>;
    /**
     * Writes the KV state an answer left in the context unwritten (`StateOutcome.pending`: Full KV's sequence after the
     * answer), with `path` only that one, once any generation running has ended. `null` when none waits: written already
     * (a request that did not continue its conversation wrote it first), or superseded by a later answer of its conversation.
     */
    saveState(path?: string): Promise<StateSave | null>;
    /**
     * Hears what becomes of each state that waited in the context: written (by `saveState`, or before another request
     * changed the context), not written, or superseded by a later answer of its conversation.
     */
    onStateSettled(listener: (save: StateSave) => void): () => void;
    /**
     * Makes the loaded model's (`request.modelPath`) retention gates from its own thinking and installs them when they
     * validate (calibration/calibrateRetention), with progress; answers wait while it runs. `null` when cancelled through
     * the signal. Refused while an answer is being written, or when the model is not the loaded one.
     */
    calibrateRetention(request: CalibrateRequest): Promise<CalibrationResult | null>;

    /**
     * Runs the engine on another build: ends the runtime (in the app, the engine process), starts it with `options`
     * and loads the model that was loaded again; the status follows it. Refused while an answer is being written.
     */
    restart(options: RuntimeOptions): Promise<BuildInfo>;
    dispose(): Promise<void>;
};
