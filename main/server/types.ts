import type {KvBudget, KvCacheType, KvSample, PolicyId} from "../../preload/contract.js";
import type {ChatTurn, GenerationChunk, GenerationResult} from "../engine/EngineApi.js";

// What the API server asks of the app, and what it gets back: the server owns this contract, and the app's services
// implement it (ServerService hands the server its backend), so main/server never imports main/services.

/** One generation asked for by a program outside the app: no conversation, nothing stored. */
export type CompletionRequest = {
    /** The conversation so far; the last turn is the user's prompt to answer. */
    history: ChatTurn[];
    systemPrompt: string;
    temperature: number;
    /** Tokens to generate at most, thinking included. */
    maxTokens: number;
    seed?: number;
    /** Nucleus, top-k and min-p sampling and the repeat penalty; unset: node-llama-cpp's defaults. */
    topP?: number;
    topK?: number;
    minP?: number;
    repeatPenalty?: number;
    /** Texts that end the answer when generated (not included in it). */
    stop?: string[];
    policy: PolicyId;
    budget: KvBudget;
    /** The K cache's type; unset: the app's default. */
    kvType?: KvCacheType;
    /** The V cache's type; unset: the app's default. */
    kvTypeV?: KvCacheType;
    /** Flash attention; unset: the app's default, on for a quantized V cache (llama.cpp needs it there). */
    flashAttention?: boolean;
    /**
     * Generates the answer again under Full KV (auto budget, same cache types and seed) after it, and returns how the two
     * compare (`CompletionResult.compareFull`); only for a pruning policy. Defaults to `false`.
     */
    compareFull?: boolean;
    signal: AbortSignal;
    /** Its turn came: the engine is about to generate for it. */
    onStart?(): void;
    onChunk(chunk: GenerationChunk): void;
    onSample?(sample: KvSample): void;
};

export type CompletionResult = {
    stopReason: GenerationResult["stopReason"];
    /**
     * Tokens the engine evaluated for the prompt: a prefix already in the context, or in a state of an earlier request
     * loaded from disk (Full KV), is reused, not evaluated.
     */
    promptTokensEvaluated: number;
    /** The whole prompt and the answer's tokens as the engine counted them (GenerationResult); `null` when unknown. */
    promptLength: number | null;
    outputTokens: number | null;
    thinking: string;
    text: string;
    thinkingTokens: number;
    answerTokens: number;
    policy: PolicyId;
    budgetCells: number;
    /** The K and V cache types it ran with. */
    kvType: KvCacheType;
    kvTypeV: KvCacheType;
    /** The last memory reading (patched build only). */
    sample: KvSample | null;
    /** Milliseconds spent waiting for the engine. */
    queuedMs: number;
    /** Milliseconds from its turn to the first generated token; `null` when none came. */
    firstTokenMs: number | null;
    /** Milliseconds from its turn to the last token. */
    generationMs: number;
    /** With `compareFull`: the Full KV run's result and whether its texts match this one's. */
    compareFull?: {full: CompletionResult; sameText: boolean; sameThinking: boolean};
};

/** What the server needs from the app: the model it serves and generations. Nothing else (no database, no files). */
export type ApiBackend = {
    /** The model served, or `null` when none is loaded. */
    model(): {id: string; createdAt: number} | null;
    /** The request's defaults: the server's policy and budget, the app's sampling defaults. */
    defaults(): Pick<CompletionRequest, "policy" | "budget" | "temperature" | "maxTokens">;
    /** Generates; `null` when the request's signal aborted while it waited for its turn (nothing ran). */
    complete(request: CompletionRequest): Promise<CompletionResult | null>;
};
