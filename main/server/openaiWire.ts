import type {z} from "zod";
import {AppError} from "../AppError.js";
import type {ChatTurn} from "../engine/EngineApi.js";
import type {ChatCompletionRequestBody} from "./openaiSchemas.js";
import type {CompletionResult} from "./types.js";

// The OpenAI wire format, mapped to and from Ponder's own types at the edge and nowhere else.

/** An OpenAI-style error object, and the HTTP status it goes with. */
export type ApiError = {status: number; error: {message: string; type: string; param: string | null; code: string | null}};

export function apiError(
    status: number,
    message: string,
    options: {type?: string; param?: string | null; code?: string | null} = {}
): ApiError {
    const type =
        options.type ??
        (status === 401
            ? "authentication_error"
            : status === 429
              ? "rate_limit_error"
              : status >= 500
                ? "server_error"
                : "invalid_request_error");
    return {status, error: {message, type, param: options.param ?? null, code: options.code ?? null}};
}

/** The KV figures Ponder adds to `usage`. */
export type KvUsage = {
    policy: string;
    budget_cells: number;
    /** The K and V cache types (`f16`, `q8_0`, `q4_0`). */
    cache_type_k: string;
    cache_type_v: string;
    /** Bytes the live cells hold at the end. */
    live_bytes: number | null;
    /** Bytes the context reserves for its cells. */
    allocated_bytes: number | null;
    /** Bytes a cache keeping every token would hold at the end. */
    full_bytes: number | null;
    tokens_evicted: number | null;
    prune_rounds: number | null;
};

export type Usage = {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    prompt_tokens_details: {cached_tokens: number};
    completion_tokens_details: {reasoning_tokens: number};
    kv: KvUsage;
};

export function toUsage(result: CompletionResult): Usage {
    // The engine's own counts where it gave them: the prompt as rendered (the figure a Full KV refusal names) and every
    // token written after it, the thought's markers included (they count as reasoning).
    const completion = result.outputTokens ?? result.thinkingTokens + result.answerTokens;
    const sample = result.sample;
    const prompt =
        result.promptLength ??
        (sample != null ? Math.max(result.promptTokensEvaluated, sample.tokensSeen - completion) : result.promptTokensEvaluated);
    return {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        prompt_tokens_details: {cached_tokens: Math.max(0, prompt - result.promptTokensEvaluated)},
        completion_tokens_details: {reasoning_tokens: Math.max(result.thinkingTokens, completion - result.answerTokens)},
        kv: {
            policy: result.policy,
            budget_cells: result.budgetCells,
            cache_type_k: result.kvType,
            cache_type_v: result.kvTypeV,
            live_bytes: sample?.liveBytes ?? null,
            allocated_bytes: sample?.allocatedBytes ?? null,
            full_bytes: sample?.fullBytes ?? null,
            tokens_evicted: sample?.tokensEvicted ?? null,
            prune_rounds: sample?.pruneRounds ?? null
        }
    };
}

/** OpenAI's finish reason; `budget` (Full KV filled its cells) is a length stop. */
export function finishReason(stopReason: CompletionResult["stopReason"]): "stop" | "length" {
    return stopReason === "maxTokens" || stopReason === "budget" ? "length" : "stop";
}

/** Why Ponder stopped, beside OpenAI's finish reason. */
/** `ponder.stop_reason`'s documented values, one per way a generation ends. */
const stopReasons: Record<CompletionResult["stopReason"], string> = {
    eogToken: "end_of_turn",
    maxTokens: "max_tokens",
    abort: "aborted",
    stopGenerationTrigger: "stop_sequence",
    customStopTrigger: "stop_sequence",
    functionCalls: "function_call",
    budget: "kv_budget_full"
};

export function ponderStop(result: CompletionResult): {stop_reason: string; policy: string; budget_cells: number; compare_full?: object} {
    const stop = {stop_reason: stopReasons[result.stopReason] ?? "unknown", policy: result.policy, budget_cells: result.budgetCells};
    const compare = result.compareFull;
    if (compare == null) return stop;
    // `ponder.compare_full`: whether the Full KV run wrote the same, and each run's memory as `usage.kv` gives it.
    return {
        ...stop,
        compare_full: {
            texts_match: compare.sameText && compare.sameThinking,
            answer_matches: compare.sameText,
            thinking_matches: compare.sameThinking,
            usage: toUsage(result).kv,
            full_usage: toUsage(compare.full).kv,
            full_stop_reason: stopReasons[compare.full.stopReason] ?? "unknown"
        }
    };
}

function textOf(content: string | {type: "text"; text: string}[] | {type: string}[] | null | undefined): string {
    if (content == null) return "";
    if (typeof content === "string") return content;
    return content.map((part) => ("text" in part ? String(part.text) : "")).join("");
}

/** A chat request's messages as the engine's turns: system and developer messages form the system prompt. */
export function toTurns(messages: ChatCompletionRequestBody["messages"]): {systemPrompt: string; history: ChatTurn[]} | ApiError {
    const system: string[] = [];
    const history: ChatTurn[] = [];
    for (const [index, message] of messages.entries()) {
        if (message.role === "system" || message.role === "developer") {
            system.push(textOf(message.content));
            continue;
        }
        if (message.role === "user") history.push({role: "user", text: textOf(message.content)});
        else if (message.role === "assistant")
            history.push({role: "assistant", text: textOf(message.content), thinking: message.reasoning_content ?? ""});
        if (history.length === 1 && message.role === "assistant")
            return apiError(400, "The conversation must start with a user message after any system messages", {
                param: `messages[${index}]`
            });
    }
    const last = history.at(-1);
    if (last == null || last.role !== "user")
        return apiError(400, "The last message must be the user's: this server answers it", {param: "messages"});
    return {systemPrompt: system.join("\n\n"), history};
}

export function stopList(stop: string | string[] | null | undefined): string[] | undefined {
    if (stop == null) return undefined;
    return typeof stop === "string" ? [stop] : stop;
}

/** The first zod issue as an OpenAI error, naming the parameter. */
export function fromZod(error: z.ZodError): ApiError {
    const issue = error.issues[0]!;
    const param =
        issue.path.map((part, index) => (typeof part === "number" ? `[${part}]` : `${index > 0 ? "." : ""}${String(part)}`)).join("") ||
        null;
    const custom = issue.code === "custom" ? (issue.params as {code?: string} | undefined)?.code : undefined;
    const code = custom ?? (issue.code === "unrecognized_keys" ? "unknown_parameter" : "invalid_value");
    const message =
        issue.code === "unrecognized_keys"
            ? `Unrecognized request argument${issue.keys.length > 1 ? "s" : ""}: ${issue.keys.join(", ")}`
            : `${param != null ? `${param}: ` : ""}${issue.message}`;
    return apiError(400, message, {param: issue.code === "unrecognized_keys" ? (issue.keys[0] ?? null) : param, code});
}

export function toApiError(err: unknown): ApiError {
    if (err instanceof AppError) {
        const status = {
            BAD_REQUEST: 400,
            NOT_FOUND: 404,
            FORBIDDEN: 403,
            MODEL_NOT_LOADED: 503,
            MODEL_INVALID: 500,
            ENGINE_UNPATCHED: 400,
            BUSY: 429,
            CANNOT_CALIBRATE: 400,
            STORAGE: 500,
            ENGINE_STOPPED: 503,
            BUDGET_ABOVE_CONTEXT: 400,
            BUDGET_DOES_NOT_FIT: 400,
            KV_BUDGET_EXCEEDED: 400,
            POLICY_UNAVAILABLE: 400,
            INTERNAL: 500
        }[err.code];
        // A conversation longer than Full KV's budget is OpenAI's `context_length_exceeded`, which clients know to trim for.
        const code =
            {
                BUSY: "queue_full",
                MODEL_NOT_LOADED: "model_not_loaded",
                ENGINE_UNPATCHED: "engine_unpatched",
                ENGINE_STOPPED: "engine_stopped",
                BUDGET_ABOVE_CONTEXT: "budget_above_context",
                BUDGET_DOES_NOT_FIT: "budget_does_not_fit",
                KV_BUDGET_EXCEEDED: "context_length_exceeded",
                POLICY_UNAVAILABLE: "policy_unavailable"
            }[err.code as string] ?? null;
        const param =
            {
                ENGINE_UNPATCHED: "ponder.policy",
                BUDGET_ABOVE_CONTEXT: "ponder.budget",
                BUDGET_DOES_NOT_FIT: "ponder.budget",
                KV_BUDGET_EXCEEDED: "messages",
                POLICY_UNAVAILABLE: "ponder.policy"
            }[err.code as string] ?? null;
        return apiError(status, err.message, {code, param});
    }
    return apiError(500, `Generation failed: ${err instanceof Error ? err.message : String(err)}`);
}
