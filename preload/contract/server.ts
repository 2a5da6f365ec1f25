// The local OpenAI-compatible API server: its settings, status and request log.

import type {PolicyId} from "../policyCatalogue.js";
import type {KvBudget, KvSample} from "./compression.js";

/** The local OpenAI-compatible API server's settings. */
export type ServerSettings = {
    /** Whether the server listens. Off by default. */
    enabled: boolean;
    /** Address to listen on; anything but loopback requires an API key. Defaults to `127.0.0.1`. */
    host: string;
    /** Port to listen on; `0` picks a free one. Defaults to `8080`. */
    port: number;
    /** The KV policy of requests that do not name one. */
    policy: PolicyId;
    /** The KV budget of requests that do not give one. */
    budget: KvBudget;
    /** Browser origins allowed to call the server (CORS); none by default. */
    corsOrigins: string[];
    /** Requests that may wait while one generates; more are answered 429. Defaults to `4`. */
    maxQueued: number;
};

export type ServerStatus = {
    settings: ServerSettings;
    /** Whether an API key is set; the key itself is shown once, when generated. */
    hasKey: boolean;
    running: boolean;
    /** Base URL for OpenAI clients while running, e.g. `http://127.0.0.1:8080/v1`. */
    url: string | null;
    /** The model id served (the loaded model), or `null` when none is loaded. */
    model: string | null;
    /** Why the server is not running although enabled. */
    error: string | null;
};

/** One request to the API server, as the Server panel's log shows it. */
export type ServerRequestLog = {
    id: string;
    startedAt: number;
    /** The client's address and, when it says, its name (User-Agent). */
    client: string;
    method: string;
    path: string;
    state: "queued" | "running" | "done" | "error" | "aborted";
    httpStatus: number | null;
    stream: boolean;
    promptTokens: number;
    thinkingTokens: number;
    answerTokens: number;
    /** Decode speed once tokens came. */
    tokensPerSecond: number | null;
    firstTokenMs: number | null;
    totalMs: number | null;
    policy: PolicyId | null;
    budgetCells: number | null;
    /** The latest memory reading of its generation. */
    sample: KvSample | null;
    error: string | null;
};
