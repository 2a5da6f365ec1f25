// The one contract between the renderer and the main process: request channels, event channels,
// the DTOs they carry and the error envelope. Nothing else crosses processes.

export type ErrorCode =
    | "BAD_REQUEST"
    | "NOT_FOUND"
    | "FORBIDDEN"
    | "MODEL_NOT_LOADED"
    | "MODEL_INVALID"
    | "ENGINE_UNPATCHED"
    | "BUSY"
    | "STORAGE"
    | "INTERNAL";

export type ErrorInfo = {code: ErrorCode, message: string};
export type Result<T> = {ok: true, value: T} | {ok: false, error: ErrorInfo};

export type EngineState = "idle" | "loading" | "ready" | "generating" | "error";

export type BuildInfo = {
    /** `"local"` for the patched build made by `native/build.mjs`, `"prebuilt"` for an unpatched binary. */
    kind: "local" | "prebuilt" | "none",
    /** GPU backend of the loaded build: `false` for CPU only. */
    gpu: "cuda" | "metal" | "vulkan" | false,
    /** Whether Ponder's native patch series is present in the loaded build. */
    patched: boolean,
    llamaCppRelease: string,
    /** Patch-series hash the build was made from, when local. */
    seriesHash: string | null
};

export type EngineStatus = {
    state: EngineState,
    build: BuildInfo | null,
    model: ModelInfo | null,
    /** Progress of a long operation (model loading) from 0 to 1. */
    progress: number | null,
    message: string | null
};

export type ModelInfo = {
    id: string,
    path: string,
    name: string,
    sizeBytes: number,
    architecture: string | null,
    contextLength: number | null,
    addedAt: number,
    lastUsedAt: number | null
};

export type ConversationSummary = {
    id: string,
    title: string,
    createdAt: number,
    updatedAt: number,
    messageCount: number
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
    error: string | null,
    stats: MessageStats | null,
    createdAt: number
};

export type PolicyId = "full" | "streamingllm" | "h2o" | "lethe" | "refreekv";
export type KvCacheType = "f16" | "q8_0" | "q4_0";

/** The KV allocation of a conversation: a number of cells, a size in MiB, or the model's context. */
export type KvBudget = {kind: "auto"} | {kind: "cells", cells: number} | {kind: "mib", mib: number};

/** Each policy's parameters, with the papers' defaults (see main/engine/policies). */
export type PolicyParams = {
    streamingllm: {sinks: number},
    h2o: {heavyRatio: number},
    lethe: {sparseRatio: number, recentRatio: number, segments: number, sinks: number, gamma: number, initialEvictRatio: number},
    refreekv: {threshold: number, firstM: number, wholeLayers: number, mode: "once" | "rounds"}
};

export type CompressionSettings = {
    policy: PolicyId,
    budget: KvBudget,
    kvType: KvCacheType,
    flashAttention: boolean,
    /** How per-layer (and per-head) selections become one set of cells to free (main/engine/policies/types.ts). */
    combine: "quota" | "union" | "aggregate",
    /** Generated tokens between prune rounds. */
    pruneEvery: number,
    params: PolicyParams
};

/** Per-conversation settings: sampling, and the compression policy with its KV budget. */
export type ConversationSettings = {
    systemPrompt: string,
    temperature: number,
    maxTokens: number,
    compression: CompressionSettings
};

/** One reading of the KV memory of a generation (DESIGN §5). */
export type KvSample = {
    /** Tokens generated in this answer so far. */
    step: number,
    /** Tokens in the conversation's sequence (prompt and answer, kept or not). */
    tokensSeen: number,
    cellsLive: number,
    cellsAllocated: number,
    bytesPerCell: number,
    allocatedBytes: number,
    liveBytes: number,
    /** What a full cache would hold now: tokensSeen x bytesPerCell. */
    fullBytes: number,
    pruneRounds: number,
    tokensEvicted: number,
    forcedDrops: number,
    /** Per layer, the share of live cells that layer's own selection keeps (1 = all). */
    keptPerLayer: number[],
    /** Per layer, Hoyer sparsity of its attention scores (Lethe Eq. 1). */
    sparsityPerLayer: number[],
    /** Milliseconds spent reading scores and choosing cells. */
    scoringMs: number,
    tokensPerSecond: number
};

export type MessageStats = {
    policy: PolicyId,
    budgetCells: number,
    /** Samples every few tokens while generating, then the last one. */
    samples: KvSample[]
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
    freeMemoryBytes: number,
    /** Bytes of the model's weights (from the GGUF's tensors). */
    weightsBytes: number | null,
    /** Approximate bytes of llama.cpp's compute buffer for this budget (attention scores and one layer's activations). */
    computeBytes: number | null,
    /** Whether the model is loaded: its weights already sit in memory and are not counted again. */
    modelLoaded: boolean,
    /** What still has to fit in free memory: the weights (unless loaded), the KV cache and the compute buffer. */
    neededBytes: number,
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
    compressionSupported: boolean,
    compressionNote: string | null,
    /** What loading it with the default budget needs against free memory now; `null` when it cannot be estimated. */
    fit: BudgetEstimate | null
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
    defaultConversationSettings: ConversationSettings
};

export type AppStatus = {
    version: string,
    engine: EngineStatus
};

export type Requests = {
    "app:status": {req: void, res: AppStatus},
    "settings:get": {req: void, res: AppSettings},
    "settings:update": {req: Partial<AppSettings>, res: AppSettings},
    "models:list": {req: void, res: ModelInfo[]},
    /** Registers a local GGUF file (validated) without loading it. */
    "models:add": {req: {path: string}, res: ModelInfo},
    /** Opens a native file dialog; `null` when cancelled or when no dialog exists (headless). */
    "models:pick": {req: void, res: string | null},
    "models:remove": {req: {id: string}, res: void},
    "models:load": {req: {id: string}, res: EngineStatus},
    "models:details": {req: {id: string}, res: ModelDetails},
    /** Downloads a GGUF by URL or Hugging Face URI (`hf:user/repo:quant`); progress arrives as `models:download` events. */
    "models:download": {req: {uri: string}, res: DownloadStatus},
    "models:cancelDownload": {req: {downloadId: string}, res: void},
    "models:downloads": {req: void, res: DownloadStatus[]},
    /** What a compression setting means for a model (the loaded one when `modelId` is absent). */
    "compression:estimate": {req: {modelId?: string, compression: CompressionSettings}, res: BudgetEstimate},
    "conversations:list": {req: {query?: string}, res: ConversationSummary[]},
    "conversations:create": {req: {title?: string}, res: ConversationSummary},
    "conversations:rename": {req: {id: string, title: string}, res: ConversationSummary},
    "conversations:delete": {req: {id: string}, res: void},
    "conversations:get": {req: {id: string}, res: ConversationDetail},
    "conversations:updateSettings": {req: {id: string, settings: Partial<ConversationSettings>}, res: ConversationSettings},
    "conversations:export": {req: {id: string, format: "markdown" | "json"}, res: {fileName: string, mimeType: string, content: string}},
    "chat:send": {req: {conversationId: string, text: string}, res: {userMessage: MessageDto, assistantMessage: MessageDto}},
    "chat:regenerate": {req: {conversationId: string}, res: {assistantMessage: MessageDto}},
    "chat:stop": {req: {conversationId: string}, res: void},
    "shell:openExternal": {req: {url: string}, res: void}
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
    /** Progress of a context rebuild after a compression change (0 to 1). */
    "chat:rebuild": {conversationId: string, progress: number},
    "models:download": DownloadStatus
};

export type RequestChannel = keyof Requests;
export type EventChannel = keyof Events;
export type Req<C extends RequestChannel> = Requests[C]["req"];
export type Res<C extends RequestChannel> = Requests[C]["res"];

export const requestChannels = [
    "app:status", "settings:get", "settings:update", "models:list", "models:add", "models:pick", "models:remove", "models:load",
    "models:details", "models:download", "models:cancelDownload", "models:downloads", "compression:estimate",
    "conversations:list", "conversations:create", "conversations:rename", "conversations:delete", "conversations:get",
    "conversations:updateSettings", "conversations:export", "chat:send", "chat:regenerate", "chat:stop", "shell:openExternal"
] as const satisfies readonly RequestChannel[];
export const eventChannels = ["engine:status", "chat:delta", "chat:done", "chat:memory", "chat:rebuild", "models:download"] as const satisfies readonly EventChannel[];

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
