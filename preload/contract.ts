// The one contract between the renderer and the main process: request channels, event channels,
// the DTOs they carry and the error envelope. Nothing else crosses processes.

import type {PolicyId, PolicyParams} from "./policyCatalogue.js";

/** The policies as data: their ids, names, parameters with bounds and defaults (preload/policyCatalogue.ts). */
export * from "./policyCatalogue.js";
/** The bounds of a KV budget and of the prune cadence (preload/kvBounds.ts). */
export * from "./kvBounds.js";
/** Token positions as ranges: the evicted positions a memory sample carries (preload/positionRanges.ts). */
export * from "./positionRanges.js";

export type ErrorCode =
    | "BAD_REQUEST"
    | "NOT_FOUND"
    | "FORBIDDEN"
    | "MODEL_NOT_LOADED"
    | "MODEL_INVALID"
    | "ENGINE_UNPATCHED"
    | "BUSY"
    | "STORAGE"
    /** The engine process stopped (a crash, a native abort, out of memory); it restarts. */
    | "ENGINE_STOPPED"
    /** A KV budget above what the model can use (its trained context): refused with the cap in words. */
    | "BUDGET_ABOVE_CONTEXT"
    /** A KV allocation the fit estimate says does not fit in free memory: refused before llama.cpp is asked. */
    | "BUDGET_DOES_NOT_FIT"
    /** With Full KV, a conversation longer than its KV budget holds (with room for the answer's first tokens). */
    | "KV_BUDGET_EXCEEDED"
    /** A policy the loaded model cannot run (TRIM-KV without retention gates trained for it): refused with the reason. */
    | "POLICY_UNAVAILABLE"
    | "INTERNAL";

export type ErrorInfo = {code: ErrorCode, message: string};
export type Result<T> = {ok: true, value: T} | {ok: false, error: ErrorInfo};

export type EngineState = "idle" | "loading" | "ready" | "generating" | "error";

/** A llama.cpp backend an engine build runs on. */
export type EngineBackend = "cuda" | "vulkan" | "metal" | "cpu";

/** Which engine build runs: the best one present (`"auto"`: CUDA, then Vulkan, then CPU; Metal, then CPU, on macOS) or one backend. */
export type EngineBuildChoice = "auto" | EngineBackend;

export type BuildInfo = {
    /** `"local"` for the patched build made by `native/build.mjs`, `"prebuilt"` for an unpatched binary. */
    kind: "local" | "prebuilt" | "none",
    /** GPU backend of the loaded build: `false` for CPU only. */
    gpu: "cuda" | "metal" | "vulkan" | false,
    /** Whether Ponder's native patch series is present in the loaded build. */
    patched: boolean,
    llamaCppRelease: string,
    /** Patch-series hash the build was made from, when local. */
    seriesHash: string | null,
    /** The build the engine was asked for (the engine-build setting). Defaults to `"auto"`. */
    requested?: EngineBuildChoice,
    /**
     * Why the build running is not the one asked for: the chosen build is missing or failed to load, or auto's first
     * choice failed, and another build runs instead. `null` (or absent) when it is the one asked for.
     */
    fallback?: string | null,
    /** llama.cpp's RPC backend in this engine process: its protocol and the rpc-servers it was started with. */
    rpc?: RpcRuntime
};

/** A device of an rpc-server the engine registered (ggml names them RPC0, RPC1, … in registration order). */
export type RpcDevice = {name: string, description: string, freeBytes: number, totalBytes: number};

/** An rpc-server the engine was asked to use: connected (its devices take offloaded layers) or not, with the reason. */
export type RpcServerState = {endpoint: string, connected: boolean, error: string | null, devices: RpcDevice[]};

export type RpcRuntime = {
    /** The RPC protocol version the build speaks ("7.0.0"); `null` when the build has no RPC backend. */
    protocol: string | null,
    servers: RpcServerState[]
};

/** An rpc-server in the engine settings, with what the last check of it found. */
export type RpcServerEntry = {
    endpoint: string,
    /** Used by the engine: every model loads with its layers split across the enabled servers (GPU layers setting). */
    enabled: boolean,
    /** Said next to an address that is not this machine's (rpc-server has no authentication); `null` for loopback. */
    warning: string | null,
    check: RpcServerCheck | null
};

export type RpcServerCheck = {
    /** When it was checked (ISO 8601). */
    at: string,
    ok: boolean,
    /** Its protocol version, when it answered HELLO. */
    protocol: string | null,
    /** Why it cannot be used, for a person; `null` when ok. */
    error: string | null,
    /** Its devices' memory, when ok (or, while the engine holds it, as the engine sees it). */
    devices: {freeBytes: number, totalBytes: number}[],
    /** The engine holds its connection: an rpc-server serves one client at a time. */
    inUse: boolean
};

/** The RPC servers of the engine settings. */
export type RpcServers = {servers: RpcServerEntry[], protocol: string | null};

/** A patched llama.cpp build found among node-llama-cpp's local builds (`localBuilds/<folder>`). */
export type EngineBuild = {
    backend: EngineBackend,
    /** Its folder under `localBuilds`. */
    folder: string,
    /** Whether the engine can run it: complete, stamped with this app's patch series, named for this platform. */
    usable: boolean,
    /** Why it cannot run, for a person; `null` when usable. */
    reason: string | null,
    /** The build configuration of its stamp (`"native"`, `"portable"`); `null` without a stamp. */
    config: string | null,
    /** When it was built (ISO 8601, from its stamp); `null` without a stamp. */
    builtAt: string | null
};

/** The engine builds present and the one chosen, as the engine settings show them. */
export type EngineBuilds = {
    choice: EngineBuildChoice,
    /** Every build folder found, usable or not, in the order auto tries them. */
    builds: EngineBuild[],
    /** The backends auto tries on this platform, best first. */
    autoOrder: EngineBackend[]
};

export type EngineStatus = {
    state: EngineState,
    build: BuildInfo | null,
    model: ModelInfo | null,
    /** Progress of a long operation (model loading) from 0 to 1. */
    progress: number | null,
    message: string | null,
    /** Where the loaded model's layers run, once it has a context (patched builds); absent or `null` otherwise. */
    placement?: LayerPlacement | null
};

/** The device of each repeating layer and of the output layer, by ggml's device name, and where each device is. */
export type LayerPlacement = {
    layers: string[],
    output: string,
    /** Each device named above: `where` is an rpc-server's "host:port", or `null` for this machine. */
    devices: {name: string, where: string | null}[]
};

/**
 * Layers of a model llama.cpp puts on the GPU: `"auto"` lets node-llama-cpp fit them to free VRAM, `"max"` offloads
 * every one, a number that many (of the repeating layers plus the output layer). A CPU build ignores it.
 */
export type GpuLayers = "auto" | "max" | number;

export type ModelInfo = {
    id: string,
    path: string,
    name: string,
    sizeBytes: number,
    architecture: string | null,
    contextLength: number | null,
    /** The GPU layers it is loaded with, set per model; absent means `"auto"`. Defaults to `"auto"`. */
    gpuLayers?: GpuLayers,
    addedAt: number,
    lastUsedAt: number | null,
    /** When loading it stopped the engine (a crash in llama.cpp): it is not loaded by itself again. `null` when it never did. */
    crashedAt: number | null
};

export type ConversationSummary = {
    id: string,
    title: string,
    createdAt: number,
    updatedAt: number,
    messageCount: number,
    /** The policy its next answer runs under (its compression setting), for the list. */
    policy: PolicyId
};

export type MessageStatus = "complete" | "streaming" | "interrupted" | "stopped" | "error";

export type MessageDto = {
    id: string,
    conversationId: string,
    role: "user" | "assistant",
    text: string,
    thinking: string,
    status: MessageStatus,
    promptTokens: number,
    thinkingTokens: number,
    answerTokens: number,
    /** Milliseconds from the request to the last thought token. */
    thinkingMs: number,
    /** Milliseconds from request to last token. */
    totalMs: number,
    /** Milliseconds from the request to the first generated token (the prompt's reading); `null` before it. */
    firstTokenMs: number | null,
    error: string | null,
    stats: MessageStats | null,
    /** The versions of this message (itself included), oldest first: a regenerated answer, an edited question. */
    siblingIds: string[],
    /** Set when the answer reached its token limit before it ended: `tokens` generated by then. It can be continued. */
    cut: {reason: "maxTokens", tokens: number} | null,
    /** The compression an answer ran under, recorded as it started; `null` for questions and answers from before Ponder kept it. */
    compression: MessageCompression | null,
    createdAt: number
};

/**
 * The compression an answer ran under (of its latest run, when it was continued), so versions made under different
 * policies can be compared. Its memory figures are its stats' last sample.
 */
export type MessageCompression = {
    policy: PolicyId,
    /** The live cells its budget allowed; `null` until the budget was resolved (an answer that failed before). */
    budgetCells: number | null,
    /**
     * Every compression setting as it started (the budget as set, cache types, parameters); `null` for answers recorded
     * before Ponder kept them.
     */
    settings: CompressionSettings | null,
    /** Full KV filled these cells and the answer stopped there: Continue needs a larger budget or a pruning policy first. */
    budgetFull?: boolean,
    /** The sampling seed it ran with; absent for answers recorded before Ponder kept it. */
    seed?: number,
    /** Set on a version made by Compare with Full KV: how it compares with the version it checks. */
    comparison?: VersionComparison
};

/** Where two versions of an answer part: the segment, the offset in it, and each version's text from a little before. */
export type VersionParting = {
    segment: "thought" | "answer",
    /** Characters the two have in common in that segment (the parting word starts here). */
    at: number,
    /** Up to 120 characters both have before `at`. */
    before: string,
    /** Each version's text from `at`: the first word (where they part), then up to 160 characters more. */
    pruned: {word: string, rest: string},
    full: {word: string, rest: string}
};

/** A Full KV version checked against the version made under a pruning policy (Compare with Full KV). */
export type VersionComparison = {
    /** The version it checks. */
    messageId: string,
    policy: PolicyId,
    sameAnswer: boolean,
    sameThought: boolean,
    /** Where the two first part; `null` when they are the same. */
    parting: VersionParting | null,
    /** Bytes of KV each held at its end (live) and what a full cache would hold for the pruned version. */
    prunedLiveBytes: number | null,
    fullLiveBytes: number | null
};

/** A type of the K or the V cache; `q8_0` keys with `q4_0` values (K8V4) is LeanKV's recommended pair. */
export type KvCacheType = "f16" | "q8_0" | "q4_0";

/** The KV allocation of a conversation: a number of cells, a size in MiB, or the model's context. */
export type KvBudget = {kind: "auto"} | {kind: "cells", cells: number} | {kind: "mib", mib: number};


export type CompressionSettings = {
    policy: PolicyId,
    budget: KvBudget,
    /** Type of the K cache (the keys). Named when one type covered both: a setting stored without `kvTypeV` meant it for V too. */
    kvType: KvCacheType,
    /** Type of the V cache (the values); a quantized one needs flash attention. */
    kvTypeV: KvCacheType,
    flashAttention: boolean,
    /** How per-layer (and per-head) selections become one set of cells to free (main/engine/policies/types.ts). */
    combine: "quota" | "union" | "aggregate",
    /** Generated tokens between prune rounds. */
    pruneEvery: number,
    params: PolicyParams
};

/** How the next token is drawn (node-llama-cpp's sampler options). */
export type SamplingValues = {
    temperature: number,
    /** Nucleus sampling: the smallest set of tokens whose probability reaches this share; 1 = off. */
    topP: number,
    /** Only the k likeliest tokens; 0 = off. */
    topK: number,
    /** Tokens below this share of the likeliest token's probability are dropped; 0 = off. */
    minP: number,
    /** Penalty on tokens among the last 64; 1 = off. */
    repeatPenalty: number
};

/** A named set of sampling values a user saved. */
export type SamplingPreset = SamplingValues & {name: string};

/** Per-conversation settings: sampling, thinking, and the compression policy with its KV budget. */
export type ConversationSettings = SamplingValues & {
    systemPrompt: string,
    maxTokens: number,
    /** Fixed sampling seed (repeatable answers); `null` draws a new one each time. */
    seed: number | null,
    /** Whether the model thinks before answering, where its chat template has a thought segment. */
    thinking: boolean,
    /** Most tokens of thought before the thought is closed and the answer starts; `null` = no limit. */
    thinkingBudget: number | null,
    compression: CompressionSettings
};

/** Sampling a model's publisher recommends: declared in the GGUF (`general.sampling.*`) or known for its family. */
export type RecommendedSampling = {
    source: "gguf" | "family",
    /** Who recommends it, for the label: "Qwen3 model card", "the GGUF file". */
    label: string,
    /** With thinking on (and for models that always think). */
    thinking: SamplingValues,
    /** With thinking off, for hybrid models that recommend other values then. */
    nonThinking: SamplingValues | null
};

/** What the loaded model offers the generation settings. */
export type GenerationCapabilities = {
    /** The chat template has a thought segment that can be left out (thinking off). */
    thinkingToggle: boolean,
    recommended: RecommendedSampling | null
};

/** One reading of the KV memory of a generation (DESIGN §5). */
export type KvSample = {
    /** Tokens generated in this answer so far. */
    step: number,
    /** Tokens in the conversation's sequence (prompt and answer, kept or not). */
    tokensSeen: number,
    cellsLive: number,
    /**
     * Most live cells after any decode of this answer so far (prompt chunks included): at most the budget for a pruning
     * policy. Absent in samples stored by older versions.
     */
    cellsPeak?: number,
    cellsAllocated: number,
    bytesPerCell: number,
    allocatedBytes: number,
    liveBytes: number,
    /** What a full cache would hold now: tokensSeen x bytesPerCell. */
    fullBytes: number,
    /** This answer's own prune rounds, tokens evicted and forced drops (its prompt's reading included). */
    pruneRounds: number,
    tokensEvicted: number,
    forcedDrops: number,
    /**
     * Per layer, what that layer's own selection would keep at the last prune round, as a share of the tokens seen
     * (1 = all; samples stored by older versions hold the share of the live cells instead).
     */
    keptPerLayer: number[],
    /** Per layer, Hoyer sparsity of its attention scores (Lethe Eq. 1). */
    sparsityPerLayer: number[],
    /** Milliseconds spent reading scores and choosing cells. */
    scoringMs: number,
    /** Bytes of the retention gates loaded (weights and per-cell log beta) while TRIM-KV runs; absent for the other policies. */
    retentionBytes?: number,
    tokensPerSecond: number,
    /**
     * Positions of the cells this answer evicted since its previous sample (a delta: the union over an answer's samples
     * is what it evicted), as `[start, end)` pairs, flat (`toRanges`). Absent in samples stored by older versions.
     */
    evicted?: number[]
};

/**
 * Why the engine reads a prompt into the context before an answer: `message`, mostly the new message (earlier turns
 * already in place, or none); `conversation`, the earlier turns, which the context did not hold (another conversation
 * opened, a model loaded, a pruned prompt read afresh); `settings`, the earlier turns into a context made anew because
 * the budget, a cache type or flash attention changed.
 */
export type ReadReason = "message" | "conversation" | "settings";

export type MessageStats = {
    policy: PolicyId,
    budgetCells: number,
    /** Samples every few tokens while generating, then the last one. */
    samples: KvSample[],
    /** The KV state this answer's run saved to disk, when it saved one (Full KV's: once written, after the answer). */
    savedState?: SavedStateFigures,
    /**
     * The engine holds this answer's KV state unwritten (Full KV's), to write when the conversation is left, another
     * request needs the engine, or the app quits. Absent once written, replaced, or gone.
     */
    statePending?: boolean,
    /** Tokens loaded from a saved state instead of being read again, when the answer started from one. */
    resumedTokens?: number,
    /**
     * The thought's chunks as it was written, flat `[tokens, characters]` pairs (each the thought's length after the
     * chunk): which of its characters each generated position wrote. Absent for a continued answer and older ones.
     */
    thoughtChunks?: number[]
};

/** Where a model runs on a GPU build, with its GPU layers setting. */
export type OffloadEstimate = {
    /** Layers on the GPU (`"auto"` resolved), of `totalLayers`: the repeating layers and the output layer. */
    gpuLayers: number,
    totalLayers: number,
    /** What goes to VRAM: the offloaded layers' weights (unless loaded) and KV, and the compute buffer when any is offloaded. */
    vramBytes: number,
    /** What stays in RAM: the other weights (unless loaded), the other layers' KV, the compute buffer when none is offloaded. */
    ramBytes: number,
    freeVramBytes: number,
    freeRamBytes: number,
    /** Where the offloaded layers go, in words: "the GPU", or "the RPC servers" on a CPU build using rpc-servers. */
    target: string,
    /** That place's memory, in words: "VRAM", or "their memory" for the RPC servers'. */
    memory: string
};

/** What a budget means for a model, shown before it is applied. */
export type BudgetEstimate = {
    /** Live cells Ponder keeps at most. */
    cells: number,
    /** Cells llama.cpp reserves: the budget rounded up to its 256-cell padding. */
    allocatedCells: number,
    bytesPerCell: number,
    /** Bytes reserved: allocatedCells x bytesPerCell. */
    bytes: number,
    /** Bytes of a full cache at the model's own context length. */
    fullContextBytes: number | null,
    modelContextLength: number | null,
    /**
     * The most cells a budget may hold on this model: its trained context (`modelContextLength`), else the most Ponder
     * allocates (1,048,576). A budget above it is refused where it is set; a stored one is capped to it (`cells`).
     */
    maxCells: number,
    /** Why the budget asks for more than `maxCells` (code `BUDGET_ABOVE_CONTEXT`), or `null` when it does not. */
    aboveCap: ErrorInfo | null,
    freeMemoryBytes: number,
    /** Bytes of the model's weights (from the GGUF's tensors). */
    weightsBytes: number | null,
    /** Bytes of llama.cpp's compute buffer for this budget (its graph replayed through ggml's allocator). */
    computeBytes: number | null,
    /** Bytes of the attention scores a scoring policy (H2O, Lethe, ReFreeKV) keeps beside the KV cache; 0 for the others. */
    scoresBytes?: number,
    /**
     * Bytes of TRIM-KV's retention gates: their weights and the log beta kept per cell, layer and KV head (4 bytes each);
     * 0 for the other policies.
     */
    retentionBytes?: number,
    /** Bytes of LAVa's value norms (4 per cell, layer and KV head); 0 for the other policies. */
    valueNormBytes?: number,
    /** Policies this model cannot run, each with the reason in words (TRIM-KV without gates trained for the model). */
    unavailablePolicies?: {policy: PolicyId, reason: string}[],
    /** Whether the model is loaded: its weights already sit in memory and are not counted again. */
    modelLoaded: boolean,
    /** What still has to fit in free memory: the weights (unless loaded), the KV cache (and scores) and the compute buffer. */
    neededBytes: number,
    /** On a GPU build, how that splits between VRAM and RAM; absent or `null` on a CPU build (all of it in RAM). */
    offload?: OffloadEstimate | null,
    /** Whether it fits: in free memory, or on a GPU build, each part in its free VRAM and RAM. */
    fits: boolean,
    /** Whether the model's architecture supports pruning; Full KV always works. */
    compressionSupported: boolean,
    notes: string[]
};

export type ModelDetails = ModelInfo & {
    layers: number | null,
    headCount: number | null,
    headCountKv: number | null,
    embeddingLength: number | null,
    /** A head's K size (`attention.key_length`, else embedding / heads). */
    keyLength: number | null,
    kvBytesPerToken: number | null,
    /** Bytes of the weights, from the GGUF's tensors. */
    weightsBytes: number | null,
    /** Elements of all the GGUF's tensors. */
    parameterCount: number | null,
    /** The ggml type most of the layers' weights are stored in (`Q4_K`, `F16`...): the model's quantization. */
    quantization: string | null,
    compressionSupported: boolean,
    compressionNote: string | null,
    /** Whether the model has retention gates trained for it (TRIM-KV), and if not why, in words. */
    retention?: {available: boolean, reason: string | null},
    /** What loading it with the default budget needs against free memory now; `null` when it cannot be estimated. */
    fit: BudgetEstimate | null
};

/** The TRIM-KV gates converted for a model (`models:convertTrimkv`). */
export type ConvertedTrimkvGates = {
    /** The gates' hidden width and the layers they cover (the model's). */
    hidden: number,
    layers: number,
    /** The cell budget the gates were trained at (config.json's `memory_size`); `null` when unknown (no config.json). */
    budget: number | null,
    /** The model the config says the gates were trained on, when it says. */
    baseModel: string | null,
    /** What the sidecar records as the gates' source. */
    source: string
};

export type DownloadState = "downloading" | "done" | "cancelled" | "error";
export type DownloadStatus = {
    downloadId: string,
    uri: string,
    state: DownloadState,
    downloadedBytes: number,
    totalBytes: number,
    error: string | null,
    model: ModelInfo | null
};

export type ConversationDetail = {
    conversation: ConversationSummary,
    settings: ConversationSettings,
    messages: MessageDto[]
};

export type AppSettings = {
    theme: "system" | "light" | "dark",
    defaultModelId: string | null,
    defaultConversationSettings: ConversationSettings,
    /** Sampling presets the user saved, by name. */
    samplingPresets: SamplingPreset[],
    /**
     * Disk budget of the conversations' saved KV states (resume without reading the history again), in MiB; the oldest
     * go first past it, and `0` saves none. Defaults to `4096` (4 GiB).
     */
    stateDiskBudgetMib: number
};

/** The conversations' saved KV states on disk: the bytes and files they take now. */
export type SavedStatesUsage = {bytes: number, files: number};

/** A conversation's KV state as saved after an answer: its size on disk, and its KV against a Full cache of the same tokens. */
export type SavedStateFigures = {bytes: number, tokens: number, liveCells: number, liveBytes: number, fullBytes: number};

/** A message found by full-text search. */
export type SearchHit = {
    conversationId: string,
    conversationTitle: string,
    messageId: string,
    role: "user" | "assistant",
    /** Where the match is: the message's text, or its thinking. */
    field: "text" | "thinking",
    /** Some words around the match; each matched word between U+0002 and U+0003. */
    snippet: string,
    /** The searched words, to highlight in the message. */
    terms: string[]
};

/** The local OpenAI-compatible API server's settings. */
export type ServerSettings = {
    /** Whether the server listens. Off by default. */
    enabled: boolean,
    /** Address to listen on; anything but loopback requires an API key. Defaults to `127.0.0.1`. */
    host: string,
    /** Port to listen on; `0` picks a free one. Defaults to `8080`. */
    port: number,
    /** The KV policy of requests that do not name one. */
    policy: PolicyId,
    /** The KV budget of requests that do not give one. */
    budget: KvBudget,
    /** Browser origins allowed to call the server (CORS); none by default. */
    corsOrigins: string[],
    /** Requests that may wait while one generates; more are answered 429. Defaults to `4`. */
    maxQueued: number
};

export type ServerStatus = {
    settings: ServerSettings,
    /** Whether an API key is set; the key itself is shown once, when generated. */
    hasKey: boolean,
    running: boolean,
    /** Base URL for OpenAI clients while running, e.g. `http://127.0.0.1:8080/v1`. */
    url: string | null,
    /** The model id served (the loaded model), or `null` when none is loaded. */
    model: string | null,
    /** Why the server is not running although enabled. */
    error: string | null
};

/** One request to the API server, as the Server panel's log shows it. */
export type ServerRequestLog = {
    id: string,
    startedAt: number,
    /** The client's address and, when it says, its name (User-Agent). */
    client: string,
    method: string,
    path: string,
    state: "queued" | "running" | "done" | "error" | "aborted",
    httpStatus: number | null,
    stream: boolean,
    promptTokens: number,
    thinkingTokens: number,
    answerTokens: number,
    /** Decode speed once tokens came. */
    tokensPerSecond: number | null,
    firstTokenMs: number | null,
    totalMs: number | null,
    policy: PolicyId | null,
    budgetCells: number | null,
    /** The latest memory reading of its generation. */
    sample: KvSample | null,
    error: string | null
};

export type AppStatus = {
    version: string,
    engine: EngineStatus
};

/** A held-out problem of the demo model's task, with its known answer, to try the demo model on. */
export type DemoSample = {
    question: string,
    /** The value of ZZ (one digit): what a correct answer says. */
    answer: string,
    /** Steps in the program, for "a problem of N steps". */
    steps: number,
    /** Its seed (from 2^31 up: never trained on), which gives the same problem again. */
    seed: number,
    /** What the demo model can do, in one line. */
    about: string
};

/**
 * What a message would add to a conversation's prompt, against the KV budget its next answer runs under
 * (`chat:countTokens`), counted with the loaded model's tokenizer before the message is sent.
 */
export type TokenCount = {
    /**
     * The message's tokens in the prompt: its chat turn as the model's template renders it in this conversation (the
     * turn's markers and the assistant's opening included), at least the text's own tokens.
     */
    messageTokens: number,
    /**
     * Tokens of the whole prompt the answer would read: the system prompt, the earlier turns, this message and the
     * assistant's opening, counted as the engine counts it before Full KV refuses a conversation.
     */
    promptTokens: number,
    /** The policy the conversation's next answer runs under (a new conversation: the default one). */
    policy: PolicyId,
    /** The live cells its KV budget allows, resolved as the answer resolves it (auto included). */
    budgetCells: number
};

export type Requests = {
    "app:status": {req: void, res: AppStatus},
    /** A sample problem when the loaded model is the demo model Ponder ships; `null` for any other model. */
    "demo:sample": {req: void, res: DemoSample | null},
    "settings:get": {req: void, res: AppSettings},
    "settings:update": {req: Partial<AppSettings>, res: AppSettings},
    /** What the conversations' saved KV states take on disk now. */
    "states:usage": {req: void, res: SavedStatesUsage},
    /** Deletes every saved KV state (conversations then read their history again); returns what is left. */
    "states:clear": {req: void, res: SavedStatesUsage},
    "models:list": {req: void, res: ModelInfo[]},
    /** Registers a local GGUF file (validated) without loading it. */
    "models:add": {req: {path: string}, res: ModelInfo},
    /** Opens a native file dialog; `null` when cancelled or when no dialog exists (headless). */
    "models:pick": {req: void, res: string | null},
    "models:remove": {req: {id: string}, res: void},
    "models:load": {req: {id: string}, res: EngineStatus},
    "models:details": {req: {id: string}, res: ModelDetails},
    /** Sets the GPU layers a model loads with (from its next load). */
    "models:setGpuLayers": {req: {id: string, gpuLayers: GpuLayers}, res: ModelInfo},
    /** Downloads a GGUF by URL or Hugging Face URI (`hf:user/repo:quant`); progress arrives as `models:download` events. */
    "models:download": {req: {uri: string}, res: DownloadStatus},
    "models:cancelDownload": {req: {downloadId: string}, res: void},
    "models:downloads": {req: void, res: DownloadStatus[]},
    /**
     * Opens a native file dialog for the TRIM-KV authors' `trimkv_weights.pth` (its `config.json` is taken from the same
     * folder when there); `null` when cancelled or when no dialog exists (headless).
     */
    "models:pickTrimkv": {req: void, res: {weights: string, config: string | null} | null},
    /**
     * Converts the TRIM-KV authors' released gates (a local `trimkv_weights.pth`, and its `config.json`: given, or beside
     * it) into the model's retention sidecar. Nothing in the checkpoint is executed; a file that is not the "rg" gates for
     * this model's shape is refused with the reason (BAD_REQUEST) and nothing is written.
     */
    "models:convertTrimkv": {req: {id: string, weights: string, config?: string}, res: ConvertedTrimkvGates},
    /** What a compression setting means for a model (the loaded one when `modelId` is absent). */
    "compression:estimate": {req: {modelId?: string, compression: CompressionSettings}, res: BudgetEstimate},
    /** Whether the loaded model can think on and off, and its recommended sampling; `null` when no model is loaded. */
    "generation:capabilities": {req: void, res: GenerationCapabilities | null},
    "conversations:list": {req: {query?: string}, res: ConversationSummary[]},
    /** Full-text search over every message's text and thinking (words, prefixes), best matches first. */
    "search:messages": {req: {query: string}, res: SearchHit[]},
    "conversations:create": {req: {title?: string}, res: ConversationSummary},
    "conversations:rename": {req: {id: string, title: string}, res: ConversationSummary},
    "conversations:delete": {req: {id: string}, res: void},
    "conversations:get": {req: {id: string}, res: ConversationDetail},
    "conversations:updateSettings": {req: {id: string, settings: Partial<ConversationSettings>}, res: ConversationSettings},
    "conversations:export": {req: {id: string, format: "markdown" | "json"}, res: {fileName: string, mimeType: string, content: string}},
    /**
     * Counts the tokens a message would add before it is sent, against the KV budget of the conversation (none named:
     * a new conversation, with the default settings). `null` when no model is loaded; a text over 4 MiB is refused.
     */
    "chat:countTokens": {req: {conversationId?: string, text: string}, res: TokenCount | null},
    "chat:send": {req: {conversationId: string, text: string}, res: {userMessage: MessageDto, assistantMessage: MessageDto}},
    "chat:regenerate": {req: {conversationId: string, compareFull?: boolean}, res: {assistantMessage: MessageDto}},
    /** Resumes the conversation's last answer where it was cut off, stopped or interrupted. */
    "chat:continue": {req: {conversationId: string}, res: {assistantMessage: MessageDto}},
    /** Sends a new version of one of the user's messages (a branch), answered afresh. */
    "chat:edit": {req: {conversationId: string, messageId: string, text: string}, res: {userMessage: MessageDto, assistantMessage: MessageDto}},
    /** Deletes a message and everything after it (in every branch); returns what the conversation shows then. */
    "conversations:deleteMessage": {req: {id: string, messageId: string}, res: ConversationDetail},
    /** A new conversation holding a copy of the path up to a message, with the same settings. */
    "conversations:fork": {req: {id: string, messageId: string}, res: ConversationSummary},
    /** Adds a conversation from the JSON export (`conversations:export` with `json`): the file's text. */
    "conversations:import": {req: {content: string}, res: ConversationSummary},
    /** Shows another version of a message (and the path last viewed below it); the KV context follows at the next answer. */
    "conversations:switchBranch": {req: {id: string, messageId: string}, res: ConversationDetail},
    "chat:stop": {req: {conversationId: string}, res: void},
    "shell:openExternal": {req: {url: string}, res: void},
    "server:get": {req: void, res: {status: ServerStatus, log: ServerRequestLog[]}},
    /** Changes the API server's settings, starting, stopping or moving it as needed. */
    "server:update": {req: Partial<ServerSettings>, res: ServerStatus},
    /** Makes a new API key, replacing any; the key is in this answer only. */
    "server:generateKey": {req: void, res: {key: string, status: ServerStatus}},
    "server:clearKey": {req: void, res: ServerStatus},
    /** The engine builds present (usable or not, with the reason) and the one chosen. */
    "engine:builds": {req: void, res: EngineBuilds},
    /**
     * Stores the engine-build choice and restarts the engine with it, loading the model again; progress arrives as
     * `engine:status` events. Refused while an answer is being written, or for a backend with no usable build.
     */
    "engine:setBuild": {req: {build: EngineBuildChoice}, res: EngineBuilds},
    /** The rpc-servers of the engine settings, with their last checks, and the protocol the engine speaks. */
    "rpc:list": {req: void, res: RpcServers},
    /** Adds an rpc-server ("host:port"), checks it, and uses it (the engine restarts) when the check passes. */
    "rpc:add": {req: {endpoint: string}, res: RpcServers},
    "rpc:remove": {req: {endpoint: string}, res: RpcServers},
    /** Uses an rpc-server for the engine's layers, or stops: the engine restarts and loads the model again. */
    "rpc:setEnabled": {req: {endpoint: string, enabled: boolean}, res: RpcServers},
    "rpc:check": {req: {endpoint: string}, res: RpcServers}
};

export type Events = {
    "engine:status": EngineStatus,
    /** A small delta of a streaming answer: only the new text. */
    "chat:delta": {
        conversationId: string,
        messageId: string,
        segment: "thought" | "answer",
        text: string,
        thinkingTokens: number,
        answerTokens: number,
        elapsedMs: number
    },
    /** The final state of a message that stopped streaming (complete, stopped or error). */
    "chat:done": {conversationId: string, message: MessageDto},
    /** A KV memory reading while an answer streams. */
    "chat:memory": {conversationId: string, messageId: string, sample: KvSample},
    /** Progress (0 to 1) of reading a long prompt into the context before the answer, and why it is read. */
    "chat:rebuild": {conversationId: string, progress: number, reason: ReadReason},
    "models:download": DownloadStatus,
    "server:status": ServerStatus,
    /** A request to the API server, new or changed (its state, tokens, memory reading). */
    "server:request": ServerRequestLog
};

export type RequestChannel = keyof Requests;
export type EventChannel = keyof Events;
export type Req<C extends RequestChannel> = Requests[C]["req"];
export type Res<C extends RequestChannel> = Requests[C]["res"];

export const requestChannels = [
    "app:status", "demo:sample", "settings:get", "settings:update", "states:usage", "states:clear", "models:list", "models:add", "models:pick", "models:remove", "models:load",
    "models:details", "models:setGpuLayers", "models:download", "models:cancelDownload", "models:downloads", "models:pickTrimkv", "models:convertTrimkv", "compression:estimate", "generation:capabilities",
    "conversations:list", "search:messages", "conversations:create", "conversations:rename", "conversations:delete", "conversations:get",
    "conversations:updateSettings", "conversations:export", "chat:countTokens", "chat:send", "chat:regenerate", "chat:continue", "chat:edit", "conversations:switchBranch", "conversations:deleteMessage", "conversations:fork", "conversations:import", "chat:stop", "shell:openExternal",
    "server:get", "server:update", "server:generateKey", "server:clearKey", "engine:builds", "engine:setBuild",
    "rpc:list", "rpc:add", "rpc:remove", "rpc:setEnabled", "rpc:check"
] as const satisfies readonly RequestChannel[];
export const eventChannels = ["engine:status", "chat:delta", "chat:done", "chat:memory", "chat:rebuild", "models:download",
    "server:status", "server:request"] as const satisfies readonly EventChannel[];

/** What the preload bridge exposes as `window.ponder`. */
export type PonderApi = {
    invoke<C extends RequestChannel>(channel: C, payload: Req<C>): Promise<Result<Res<C>>>,
    on<C extends EventChannel>(channel: C, listener: (payload: Events[C]) => void): () => void
};

// Compile-time check that the runtime channel lists name every channel of the type maps.
type MissingRequest = Exclude<RequestChannel, (typeof requestChannels)[number]>;
type MissingEvent = Exclude<EventChannel, (typeof eventChannels)[number]>;
export const channelListsComplete: [MissingRequest, MissingEvent] extends [never, never] ? true : never = true;

/**
 * Frames of the loopback WebSocket transport (tests and headless mode). It carries the same
 * requests and events as Electron IPC: `{id, channel, payload}` up, `{id, result}` or
 * `{event, payload}` down.
 */
export type BridgeRequestFrame = {id: number, channel: RequestChannel, payload: unknown};
export type BridgeResponseFrame = {id: number, result: Result<unknown>};
export type BridgeEventFrame = {event: EventChannel, payload: unknown};
