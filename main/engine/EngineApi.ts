import type {CompressionSettings, KvSample} from "../../preload/contract/compression.js";
import type {BuildInfo, EngineBuildChoice, EngineStatus, ReadReason} from "../../preload/contract/engine.js";
import type {ModelInfo} from "../../preload/contract/models.js";
import type {CalibrateRetentionOptions, CalibrationJobProgress, CalibrationResult} from "./calibration/types.js";

// The engine's API, types only: what the services call on the engine (`EngineApi`), with the requests of its calls and
// their answers. Both processes import it (the engine process runs `Engine`, the main process speaks to it through
// `EngineProxy`), so it imports no implementation.

export type ChatTurn = {role: "user"; text: string} | {role: "assistant"; text: string; thinking: string};

/** What a GGUF file says about itself, read from its header without loading weights. */
export type ModelInspection = {
    path: string;
    name: string;
    sizeBytes: number;
    architecture: string | null;
    contextLength: number | null;
    layers: number | null;
    headCount: number | null;
    headCountKv: number | null;
    embeddingLength: number | null;
    /** `attention.key_length` / `value_length`: a head's K and V size when the GGUF declares it (else embedding / heads). */
    keyLength?: number | null;
    valueLength?: number | null;
    feedForwardLength?: number | null;
    /** Tokens in the vocabulary (the logits' width). Absent in inspections stored by older versions. */
    vocabularySize?: number | null;
    /** Bytes of the weights (all tensors, as stored in the file). Absent in inspections stored by older versions. */
    weightsBytes?: number;
    /** Of the weights, the repeating layers' and the output layer's, and a tied output's copy (GgufHeader): what GPU offload moves. */
    layerWeightsBytes?: number;
    outputWeightsBytes?: number;
    tiedOutputBytes?: number;
    /** Elements of every tensor, and the type most layer weights are stored in (GgufHeader). Absent in older inspections. */
    parameterCount?: number;
    weightType?: string | null;
    hasChatTemplate: boolean;
    /** The chat template has a `<think>` segment, so thinking can be left out (or it reads `enable_thinking`). */
    thinkingToggle?: boolean;
    /** Sampling the GGUF declares (`general.sampling.*`), when it does. */
    declaredSampling?: Partial<Record<"temperature" | "topP" | "topK" | "minP" | "repeatPenalty", number>>;
};

export type GenerationChunk = {segment: "thought" | "answer"; text: string; tokens: number};

export type GenerateRequest = {
    /** The conversation so far; the last turn is the user's prompt to answer (or, with `continueLast`, the answer to continue). */
    history: ChatTurn[];
    /** The last turn is an unfinished answer (cut off, stopped): generate its rest. Defaults to `false`. */
    continueLast?: boolean;
    systemPrompt: string;
    temperature: number;
    /** Top-p (1 = off), top-k (0 = off), min-p (0 = off), repeat penalty over the last 64 tokens (1 = off). Default off. */
    topP?: number;
    topK?: number;
    minP?: number;
    repeatPenalty?: number;
    /**
     * Thinking off leaves the thought out (an empty, closed thought opens the answer, as Qwen3's `enable_thinking=false`
     * renders it), where the chat template has one; a budget closes the thought after that many tokens. Defaults to on, no budget.
     */
    thinking?: {enabled: boolean; budget: number | null};
    maxTokens: number;
    /** Sampling seed; a fixed seed makes a generation repeatable. */
    seed?: number;
    /** Texts that end the generation when produced; they are not part of the answer. */
    stop?: string[];
    signal: AbortSignal;
    /** The KV policy and the budget in cells (the context's allocation). */
    kv: {compression: CompressionSettings; cells: number};
    onChunk(chunk: GenerationChunk): void;
    /** Memory readings every few tokens and at the end (patched build only). */
    onSample?(sample: KvSample): void;
    /** Generated tokens between two memory readings. Defaults to `pruneEvery`, within 4 to 32. */
    sampleEvery?: number;
    /** Progress (0 to 1) of reading a long prompt into the context, and why it is read (`readReason`). */
    onRebuild?(progress: number, reason: ReadReason): void;
    /** The conversation's states on disk (SequenceStates): loaded instead of re-reading the history, saved as it goes. Defaults to none. */
    states?: StateFiles;
};

/**
 * State files of one path of messages (or the API server's). `load`: files of the path's earlier messages, newest first;
 * of those that match (model, cache types, flash attention, policy and budget, and tokens the prompt starts with), the one
 * that spares the most reading is loaded (the newest among equals). `save`: where this request's state goes: Full KV's
 * whole sequence after the answer (kept in the context and written later: `StateOutcome.pending`), a pruning policy's
 * prompt read up to its last whole chunk (the state the next turn's prompt read passes through).
 */
export type StateFiles = {load: string[]; save?: string};

/** What became of the states of a request: the file loaded (or why none was), the file saved. */
export type StateOutcome = {
    restored: {path: string; tokens: number} | null;
    /** Why the history was read again although a state was offered; `null` when it was not. */
    note: string | null;
    saved: {path: string; bytes: number; tokens: number; liveCells: number; liveBytes: number; fullBytes: number} | null;
    /**
     * The file of a state kept in the context, not written yet (Full KV's sequence after the answer): the engine writes it
     * when asked (`EngineApi.saveState`) or before a request that does not continue it changes the context. Absent when none.
     */
    pending?: string;
};

/**
 * What became of a state that waited in the context (`StateOutcome.pending`): written (`saved`), not written (`note` says
 * why), or `superseded`: a later answer of its conversation continued the context, and its own state stands for it.
 */
export type StateSave = {path: string; saved: StateOutcome["saved"]; note: string | null; superseded?: boolean};

export type GenerationResult = {
    /** `budget`: Full KV filled its cells and stopped. */
    stopReason: "eogToken" | "maxTokens" | "abort" | "stopGenerationTrigger" | "customStopTrigger" | "functionCalls" | "budget";
    /** Tokens evaluated for the prompt in this generation (after prefix reuse). */
    promptTokens: number;
    /** The whole prompt as rendered, in tokens (reused or evaluated); absent when the generation stopped before it. */
    promptLength?: number;
    /** Tokens the answer wrote after the prompt, thought and segment markers included; absent as `promptLength`. */
    outputTokens?: number;
    /** The states loaded and saved, when the request offered any. */
    states?: StateOutcome;
};

/** A prompt to count (`EngineApi.countTokens`): the conversation ending with the new user message, rendered as `generate` renders it. */
export type CountTokensRequest = {
    history: ChatTurn[];
    systemPrompt: string;
    /** Whether the answer thinks (with it off the template may open the answer with an empty thought). Defaults to `true`. */
    thinking?: boolean;
};

/** A prompt's tokens: the whole of it, and its last turn's (the new message's, as `Engine.countTokens` renders it). */
export type PromptTokenCount = {messageTokens: number; promptTokens: number};

export type LlamaRuntimeInfo = BuildInfo;

/** How a model is loaded. */
export type LoadOptions = {
    /** Layers on the GPU: node-llama-cpp's fit to free VRAM, all of them, or a count. A CPU build ignores it. Defaults to `"auto"`. */
    gpuLayers?: number | "auto" | "max";
};

/** Which llama.cpp runtime the engine runs. */
export type RuntimeOptions = {
    /** The engine build: the best one present, or one backend (see main/engine/runtime/loadRuntime.ts). Defaults to `"auto"`. */
    build?: EngineBuildChoice;
    /**
     * The rpc-servers ("host:port") whose devices take a model's offloaded layers (the GPU layers setting), registered
     * when the runtime loads; each is checked first and left out, with the reason, when it cannot be used. Defaults to none.
     */
    rpcServers?: string[];
};

/** A calibration's settings as they cross to the engine process: those of `calibrateRetention`, without the model. */
export type CalibrationSettings = Pick<
    CalibrateRetentionOptions,
    "promptSet" | "texts" | "prompts" | "validationPrompts" | "tokens" | "maxTokens" | "seed" | "hidden" | "epochs" | "workDir"
>;

/** A calibration of the loaded model (`EngineApi.calibrateRetention`). */
export type CalibrateRequest = CalibrationSettings & {
    /** The model to calibrate: the loaded one (any other is refused). */
    modelPath: string;
    signal: AbortSignal;
    onProgress?: (progress: CalibrationJobProgress) => void;
};

export type {CalibrationJobProgress, CalibrationResult};

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
