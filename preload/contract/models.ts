// Models: the library's entries, their details and fit, the sampling they recommend, the demo model's problems.

import type {BudgetEstimate} from "./compression.js";
import type {SamplingValues} from "./conversations.js";

/**
 * Layers of a model llama.cpp puts on the GPU: `"auto"` lets node-llama-cpp fit them to free VRAM, `"max"` offloads
 * every one, a number that many (of the repeating layers plus the output layer). A CPU build ignores it.
 */
export type GpuLayers = "auto" | "max" | number;

export type ModelInfo = {
    id: string;
    path: string;
    name: string;
    sizeBytes: number;
    architecture: string | null;
    contextLength: number | null;
    /** The GPU layers it is loaded with, set per model; absent means `"auto"`. Defaults to `"auto"`. */
    gpuLayers?: GpuLayers;
    addedAt: number;
    lastUsedAt: number | null;
    /** When loading it stopped the engine (a crash in llama.cpp): it is not loaded by itself again. `null` when it never did. */
    crashedAt: number | null;
};

/** Sampling a model's publisher recommends: declared in the GGUF (`general.sampling.*`) or known for its family. */
export type RecommendedSampling = {
    source: "gguf" | "family";
    /** Who recommends it, for the label: "Qwen3 model card", "the GGUF file". */
    label: string;
    /** With thinking on (and for models that always think). */
    thinking: SamplingValues;
    /** With thinking off, for hybrid models that recommend other values then. */
    nonThinking: SamplingValues | null;
};

/** What the loaded model offers the generation settings. */
export type GenerationCapabilities = {
    /** The chat template has a thought segment that can be left out (thinking off). */
    thinkingToggle: boolean;
    recommended: RecommendedSampling | null;
};

export type ModelDetails = ModelInfo & {
    layers: number | null;
    headCount: number | null;
    headCountKv: number | null;
    embeddingLength: number | null;
    /** A head's K size (`attention.key_length`, else embedding / heads). */
    keyLength: number | null;
    kvBytesPerToken: number | null;
    /** Bytes of the weights, from the GGUF's tensors. */
    weightsBytes: number | null;
    /** Elements of all the GGUF's tensors. */
    parameterCount: number | null;
    /** The ggml type most of the layers' weights are stored in (`Q4_K`, `F16`...): the model's quantization. */
    quantization: string | null;
    compressionSupported: boolean;
    compressionNote: string | null;
    /**
     * Whether the model has retention gates trained for it (TRIM-KV), and if not why, in words; `calibration`: how
     * Ponder's calibration made them, when it did.
     */
    retention?: {available: boolean; reason: string | null; calibration?: CalibrationProvenance | null};
    /**
     * The TRIM-KV gates the authors released for a model of this one's shape (architecture, layers, width, heads), each
     * fetched by `models:getTrimkvGates`; `why`: when the model's name does not single one out (or names another model
     * made from it), why these are offered; when none fits, the nearest release and how its shape differs.
     */
    trimkvReleases?: {releases: {repo: string; baseModel: string; memorySize: number}[]; why: string | null};
    /** What loading it with the default budget needs against free memory now; `null` when it cannot be estimated. */
    fit: BudgetEstimate | null;
};

/** The TRIM-KV gates converted for a model (`models:convertTrimkv`). */
export type ConvertedTrimkvGates = {
    /** The gates' hidden width and the layers they cover (the model's). */
    hidden: number;
    layers: number;
    /** The cell budget the gates were trained at (config.json's `memory_size`); `null` when unknown (no config.json). */
    budget: number | null;
    /** The model the config says the gates were trained on, when it says. */
    baseModel: string | null;
    /** What the sidecar records as the gates' source. */
    source: string;
};

/**
 * A held-out problem of the task of a model Ponder ships (the demo model, the merge model, the many-task model), with its
 * known answer, to try that model on.
 */
export type DemoSample = {
    /** The task the loaded model was trained on (`multi`: six families asked in words). */
    task: "demo" | "merge" | "multi";
    question: string;
    /** What a correct answer says: the value of ZZ (one digit), the k-th number of the merge (two digits), ... */
    answer: string;
    /** What the answer is, for "the sample's known answer: 7 (the value of ZZ)". */
    answerMeaning: string;
    /** The problem's size, for "Try a sample problem (24 steps)". */
    size: string;
    /** Its seed (from 2^31 up: never trained on), which gives the same problem again. */
    seed: number;
    /** What the model can do, in one line. */
    about: string;
};

/**
 * Top-1 agreement with Full KV on held-out prompts at one share of the cells, the calibrated gates' and Lethe's: over
 * every token, and over the answers' tokens (after the thought; `null` when no held-out answer was reached).
 */
export type CalibrationPoint = {share: number; gates: number; lethe: number; answers: {gates: number; lethe: number} | null};

/** Top-1 agreement with Full KV on held-out prompts, per share of the cells: the calibrated gates' and Lethe's. */
export type CalibrationValidation = {prompts: number; tokens: number; points: CalibrationPoint[]};

/** What a calibration recorded in the gates it installed (`ponder.retention.calibration.*`). */
export type CalibrationProvenance = {
    /**
     * The prompts: `"english"` (Ponder's), `"demo"`, `"merge"` or `"multi"` (a task model's training problems), `"own"` (the model's own
     * questions), `"file"` (a person's), `"conversations"` or `"traces"` (texts already written, read).
     */
    promptSet: string;
    /** Prompts the model thought through. */
    prompts: number;
    /** Tokens it wrote (prompts included). */
    tokens: number;
    /** Tokens the gates were fitted on. */
    samples: number;
    seconds: number;
    /** When it finished (ISO 8601). */
    date: string;
    /** The calibration texts' lengths in tokens (prompt and thought), and how many a limit cut; `null` where not recorded. */
    texts?: {mean: number; longest: number; cut: number} | null;
    validation: CalibrationValidation | null;
};

/** A model's stored conversations a calibration could read, and the fewest it needs. */
export type CalibrationConversations = {conversations: number; exchanges: number; tokens: number; minimum: number};

/** Where a retention calibration is: its stage and step, and the time it still needs. */
export type CalibrationStage = "starting" | "questions" | "thinking" | "reading" | "training" | "validating" | "writing";

/** A retention calibration of a model (`models:calibrate`), as it runs and as it ended (`models:calibration` events). */
export type CalibrationStatus = {
    modelId: string;
    /** Running; ended with the gates installed, refused by the validation, cancelled, or failed (`message` says why). */
    state: "running" | "installed" | "refused" | "cancelled" | "failed";
    stage: CalibrationStage;
    /** Steps of the stage done and to do: prompts (thinking), layer-epochs (training), runs (validating). */
    step: number;
    of: number;
    /** Seconds the whole job still needs; `null` before anything is measured. */
    etaSeconds: number | null;
    /** What it does, or how it ended, in words (a refusal with its numbers). */
    message: string;
    /** Prompts thought in an earlier run (before a cancel, a restart or a crash) that this one goes on from. */
    resumed: number;
    /** What it made: with the gates installed, or refused by the validation; `null` otherwise. */
    result: (CalibrationProvenance & {installed: boolean}) | null;
};
