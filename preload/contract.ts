// The one contract between the renderer and the main process: request channels, event channels,
// the DTOs they carry and the error envelope. Nothing else crosses processes. The DTOs live in preload/contract/, one
// file per domain, re-exported here: the renderer and main import this file alone.

import type {BudgetEstimate, CompressionSettings, KvSample, NewConversationCompression, SavedStatesUsage} from "./contract/compression.js";
import type {
    ConversationDetail,
    ConversationSettings,
    ConversationSummary,
    MessageDto,
    SearchHit,
    TokenCount
} from "./contract/conversations.js";
import type {DownloadStatus} from "./contract/downloads.js";
import type {AppStatus, EngineBuildChoice, EngineBuilds, EngineStatus, ReadReason, RpcServers} from "./contract/engine.js";
import type {Result} from "./contract/errors.js";
import type {
    CalibrationConversations,
    CalibrationStatus,
    ConvertedTrimkvGates,
    DemoSample,
    GenerationCapabilities,
    GpuLayers,
    ModelDetails,
    ModelInfo
} from "./contract/models.js";
import type {ServerRequestLog, ServerSettings, ServerStatus} from "./contract/server.js";
import type {AppSettings} from "./contract/settings.js";

/** The policies as data: their ids, names, parameters with bounds and defaults (preload/policyCatalogue.ts). */
export * from "./policyCatalogue.js";
/** The bounds of a KV budget and of the prune cadence (preload/kvBounds.ts). */
export * from "./kvBounds.js";
/** The KV cache's units: bytes in a MiB, MiB <-> cells, the cache types in words (preload/kvUnits.ts). */
export * from "./kvUnits.js";
/** Token positions as ranges: the evicted positions a memory sample carries (preload/positionRanges.ts). */
export * from "./positionRanges.js";
/** What prune rounds record of each token, and the rounds, in bounded lists (preload/tokenScores.ts). */
export * from "./tokenScores.js";
/** Which of a conversation's settings are its generation's (preload/generationSettings.ts). */
export * from "./generationSettings.js";
export type * from "./contract/errors.js";
export type * from "./contract/engine.js";
export type * from "./contract/models.js";
export type * from "./contract/conversations.js";
export type * from "./contract/compression.js";
export type * from "./contract/downloads.js";
export type * from "./contract/settings.js";
export type * from "./contract/server.js";

export type Requests = {
    "app:status": {req: void; res: AppStatus};
    /** A sample problem when the loaded model is one of the task models Ponder ships; `null` for any other model. */
    "demo:sample": {req: void; res: DemoSample | null};
    "settings:get": {req: void; res: AppSettings};
    "settings:update": {req: Partial<AppSettings>; res: AppSettings};
    /** What the conversations' saved KV states take on disk now. */
    "states:usage": {req: void; res: SavedStatesUsage};
    /** Deletes every saved KV state (conversations then read their history again); returns what is left. */
    "states:clear": {req: void; res: SavedStatesUsage};
    "models:list": {req: void; res: ModelInfo[]};
    /** Registers a local GGUF file (validated) without loading it. */
    "models:add": {req: {path: string}; res: ModelInfo};
    /** Opens a native file dialog; `null` when cancelled or when no dialog exists (headless). */
    "models:pick": {req: void; res: string | null};
    "models:remove": {req: {id: string}; res: void};
    "models:load": {req: {id: string}; res: EngineStatus};
    "models:details": {req: {id: string}; res: ModelDetails};
    /** Sets the GPU layers a model loads with (from its next load). */
    "models:setGpuLayers": {req: {id: string; gpuLayers: GpuLayers}; res: ModelInfo};
    /** Downloads a GGUF by URL or Hugging Face URI (`hf:user/repo:quant`); progress arrives as `models:download` events. */
    "models:download": {req: {uri: string}; res: DownloadStatus};
    "models:cancelDownload": {req: {downloadId: string}; res: void};
    "models:downloads": {req: void; res: DownloadStatus[]};
    /**
     * Opens a native file dialog for the TRIM-KV authors' `trimkv_weights.pth` (its `config.json` is taken from the same
     * folder when there); `null` when cancelled or when no dialog exists (headless).
     */
    "models:pickTrimkv": {req: void; res: {weights: string; config: string | null} | null};
    /**
     * Converts the TRIM-KV authors' released gates (a local `trimkv_weights.pth`, and its `config.json`: given, or beside
     * it) into the model's retention sidecar. Nothing in the checkpoint is executed; a file that is not the "rg" gates for
     * this model's shape is refused with the reason (BAD_REQUEST) and nothing is written.
     */
    "models:convertTrimkv": {req: {id: string; weights: string; config?: string}; res: ConvertedTrimkvGates};
    /**
     * Downloads a released TRIM-KV checkpoint (`config.json` and `trimkv_weights.pth` of `repo`, one of the releases the
     * model's details offer) as a download (`models:download` events, `models:cancelDownload`, resumed by asking again),
     * then converts it as `models:convertTrimkv` does; the status's `gates.converted`, or its error, says how it went.
     */
    "models:getTrimkvGates": {req: {id: string; repo: string}; res: DownloadStatus};
    /**
     * Starts a retention calibration of a model (loaded first when it is not): its progress and end arrive as
     * `models:calibration` events. Answers wait while it runs. Refused while one runs (BUSY), and for a model that
     * cannot be calibrated (CANNOT_CALIBRATE).
     */
    "models:calibrate": {req: {id: string; source?: "thinking" | "conversations"}; res: CalibrationStatus};
    "models:calibrationConversations": {req: {id: string}; res: CalibrationConversations};
    /** Cancels the running calibration (what it thought through is kept: calibrating again goes on from it). */
    "models:calibrateCancel": {req: void; res: void};
    /** The calibration running, or the last one's end; `null` when none ran since the app started. */
    "models:calibrationStatus": {req: void; res: CalibrationStatus | null};
    /** What a compression setting means for a model (the loaded one when `modelId` is absent). */
    "compression:estimate": {req: {modelId?: string; compression: CompressionSettings}; res: BudgetEstimate};
    /** What a conversation created now would start under, with the loaded model. */
    "compression:newConversation": {req: void; res: NewConversationCompression};
    /** Whether the loaded model can think on and off, and its recommended sampling; `null` when no model is loaded. */
    "generation:capabilities": {req: void; res: GenerationCapabilities | null};
    "conversations:list": {req: {query?: string}; res: ConversationSummary[]};
    /** Full-text search over every message's text and thinking (words, prefixes), best matches first. */
    "search:messages": {req: {query: string}; res: SearchHit[]};
    "conversations:create": {req: {title?: string}; res: ConversationSummary};
    "conversations:rename": {req: {id: string; title: string}; res: ConversationSummary};
    "conversations:delete": {req: {id: string}; res: void};
    "conversations:get": {req: {id: string}; res: ConversationDetail};
    "conversations:updateSettings": {req: {id: string; settings: Partial<ConversationSettings>}; res: ConversationSettings};
    "conversations:export": {req: {id: string; format: "markdown" | "json"}; res: {fileName: string; mimeType: string; content: string}};
    /**
     * Counts the tokens a message would add before it is sent, against the KV budget of the conversation (none named:
     * a new conversation, with the default settings). `null` when no model is loaded; a text over 4 MiB is refused.
     */
    "chat:countTokens": {req: {conversationId?: string; text: string}; res: TokenCount | null};
    "chat:send": {req: {conversationId: string; text: string}; res: {userMessage: MessageDto; assistantMessage: MessageDto}};
    "chat:regenerate": {req: {conversationId: string; compareFull?: boolean}; res: {assistantMessage: MessageDto}};
    /** Resumes the conversation's last answer where it was cut off, stopped or interrupted. */
    "chat:continue": {req: {conversationId: string}; res: {assistantMessage: MessageDto}};
    /** Sends a new version of one of the user's messages (a branch), answered afresh. */
    "chat:edit": {
        req: {conversationId: string; messageId: string; text: string};
        res: {userMessage: MessageDto; assistantMessage: MessageDto};
    };
    /** Deletes a message and everything after it (in every branch); returns what the conversation shows then. */
    "conversations:deleteMessage": {req: {id: string; messageId: string}; res: ConversationDetail};
    /** A new conversation holding a copy of the path up to a message, with the same settings. */
    "conversations:fork": {req: {id: string; messageId: string}; res: ConversationSummary};
    /** Adds a conversation from the JSON export (`conversations:export` with `json`): the file's text. */
    "conversations:import": {req: {content: string}; res: ConversationSummary};
    /** Shows another version of a message (and the path last viewed below it); the KV context follows at the next answer. */
    "conversations:switchBranch": {req: {id: string; messageId: string}; res: ConversationDetail};
    "chat:stop": {req: {conversationId: string}; res: void};
    "shell:openExternal": {req: {url: string}; res: void};
    "server:get": {req: void; res: {status: ServerStatus; log: ServerRequestLog[]}};
    /** Changes the API server's settings, starting, stopping or moving it as needed. */
    "server:update": {req: Partial<ServerSettings>; res: ServerStatus};
    /** Makes a new API key, replacing any; the key is in this answer only. */
    "server:generateKey": {req: void; res: {key: string; status: ServerStatus}};
    "server:clearKey": {req: void; res: ServerStatus};
    /** The engine builds present (usable or not, with the reason) and the one chosen. */
    "engine:builds": {req: void; res: EngineBuilds};
    /**
     * Stores the engine-build choice and restarts the engine with it, loading the model again; progress arrives as
     * `engine:status` events. Refused while an answer is being written, or for a backend with no usable build.
     */
    "engine:setBuild": {req: {build: EngineBuildChoice}; res: EngineBuilds};
    /** The rpc-servers of the engine settings, with their last checks, and the protocol the engine speaks. */
    "rpc:list": {req: void; res: RpcServers};
    /** Adds an rpc-server ("host:port"), checks it, and uses it (the engine restarts) when the check passes. */
    "rpc:add": {req: {endpoint: string}; res: RpcServers};
    "rpc:remove": {req: {endpoint: string}; res: RpcServers};
    /** Uses an rpc-server for the engine's layers, or stops: the engine restarts and loads the model again. */
    "rpc:setEnabled": {req: {endpoint: string; enabled: boolean}; res: RpcServers};
    "rpc:check": {req: {endpoint: string}; res: RpcServers};
};

export type Events = {
    "engine:status": EngineStatus;
    /** A small delta of a streaming answer: only the new text. */
    "chat:delta": {
        conversationId: string;
        messageId: string;
        segment: "thought" | "answer";
        text: string;
        thinkingTokens: number;
        answerTokens: number;
        elapsedMs: number;
    };
    /** The final state of a message that stopped streaming (complete, stopped or error). */
    "chat:done": {conversationId: string; message: MessageDto};
    /** A KV memory reading while an answer streams. */
    "chat:memory": {conversationId: string; messageId: string; sample: KvSample};
    /** Progress (0 to 1) of reading a long prompt into the context before the answer, and why it is read. */
    "chat:rebuild": {conversationId: string; progress: number; reason: ReadReason};
    "models:download": DownloadStatus;
    /** A retention calibration's progress and end. */
    "models:calibration": CalibrationStatus;
    "server:status": ServerStatus;
    /** A request to the API server, new or changed (its state, tokens, memory reading). */
    "server:request": ServerRequestLog;
};

export type RequestChannel = keyof Requests;
export type EventChannel = keyof Events;
export type Req<C extends RequestChannel> = Requests[C]["req"];
export type Res<C extends RequestChannel> = Requests[C]["res"];

export const requestChannels = [
    "app:status",
    "demo:sample",
    "settings:get",
    "settings:update",
    "states:usage",
    "states:clear",
    "models:list",
    "models:add",
    "models:pick",
    "models:remove",
    "models:load",
    "models:details",
    "models:setGpuLayers",
    "models:download",
    "models:cancelDownload",
    "models:downloads",
    "models:pickTrimkv",
    "models:convertTrimkv",
    "models:getTrimkvGates",
    "models:calibrate",
    "models:calibrationConversations",
    "models:calibrateCancel",
    "models:calibrationStatus",
    "compression:estimate",
    "compression:newConversation",
    "generation:capabilities",
    "conversations:list",
    "search:messages",
    "conversations:create",
    "conversations:rename",
    "conversations:delete",
    "conversations:get",
    "conversations:updateSettings",
    "conversations:export",
    "chat:countTokens",
    "chat:send",
    "chat:regenerate",
    "chat:continue",
    "chat:edit",
    "conversations:switchBranch",
    "conversations:deleteMessage",
    "conversations:fork",
    "conversations:import",
    "chat:stop",
    "shell:openExternal",
    "server:get",
    "server:update",
    "server:generateKey",
    "server:clearKey",
    "engine:builds",
    "engine:setBuild",
    "rpc:list",
    "rpc:add",
    "rpc:remove",
    "rpc:setEnabled",
    "rpc:check"
] as const satisfies readonly RequestChannel[];
export const eventChannels = [
    "engine:status",
    "chat:delta",
    "chat:done",
    "chat:memory",
    "chat:rebuild",
    "models:download",
    "models:calibration",
    "server:status",
    "server:request"
] as const satisfies readonly EventChannel[];

/** What the preload bridge exposes as `window.ponder`. */
export type PonderApi = {
    invoke<C extends RequestChannel>(channel: C, payload: Req<C>): Promise<Result<Res<C>>>;
    on<C extends EventChannel>(channel: C, listener: (payload: Events[C]) => void): () => void;
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
export type BridgeRequestFrame = {id: number; channel: RequestChannel; payload: unknown};
export type BridgeResponseFrame = {id: number; result: Result<unknown>};
export type BridgeEventFrame = {event: EventChannel; payload: unknown};
