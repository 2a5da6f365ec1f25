import {chatCompletionRequestSchema, completionRequestSchema, type PonderExtension} from "./openaiSchemas.js";
import {apiError, fromZod, stopList, toTurns, type ApiError} from "./openaiWire.js";
import type {ApiBackend, CompletionRequest} from "./types.js";

/** The fields chat and text completions share. */
type GenerationBody = {
    model: string;
    stream?: boolean | null;
    temperature?: number | null;
    seed?: number | null;
    stop?: string | string[] | null;
    top_p?: number | null;
    top_k?: number | null;
    min_p?: number | null;
    repeat_penalty?: number | null;
    ponder?: PonderExtension;
};

/** A chat or text completion request, validated, with its messages (or prompt) as the engine's turns. */
export type OpenAiRequest = Pick<CompletionRequest, "systemPrompt" | "history"> & {
    kind: "chat" | "completion";
    body: GenerationBody;
    /** The client's bound on the tokens generated; unset: the app's default. */
    maxTokens: number | undefined;
    /** A streamed request ends with a chunk that carries the usage. */
    includeUsage: boolean;
};

/** Validates the body of `POST /v1/chat/completions` (`chat`) or `POST /v1/completions`: the request, or why it is refused. */
export function parseOpenAiRequest(kind: OpenAiRequest["kind"], json: unknown): OpenAiRequest | ApiError {
    if (kind === "chat") {
        const parsed = chatCompletionRequestSchema.safeParse(json);
        if (!parsed.success) return fromZod(parsed.error);
        const body = parsed.data;
        const turns = toTurns(body.messages);
        if ("status" in turns) return turns;
        return {
            kind,
            body,
            ...turns,
            maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
            includeUsage: body.stream_options?.include_usage === true
        };
    }
    const parsed = completionRequestSchema.safeParse(json);
    if (!parsed.success) return fromZod(parsed.error);
    const body = parsed.data;
    const prompt = typeof body.prompt === "string" ? body.prompt : body.prompt[0]!;
    if (prompt.trim() === "") return apiError(400, "prompt is empty", {param: "prompt"});
    return {
        kind,
        body,
        systemPrompt: "",
        history: [{role: "user", text: prompt}],
        maxTokens: body.max_tokens ?? undefined,
        includeUsage: body.stream_options?.include_usage === true
    };
}

/**
 * The generation `request` asks for, in Ponder's terms: its sampling and its `ponder` extension (policy, budget, cache
 * types), the server's defaults where it says nothing; `events` are the generation's signal and callbacks.
 */
export function toCompletionRequest(
    request: OpenAiRequest,
    defaults: ReturnType<ApiBackend["defaults"]>,
    events: Pick<CompletionRequest, "signal" | "onStart" | "onChunk" | "onSample">
): CompletionRequest {
    const {body} = request;
    const budget = body.ponder?.budget;
    return {
        history: request.history,
        systemPrompt: request.systemPrompt,
        temperature: body.temperature ?? defaults.temperature,
        maxTokens: request.maxTokens ?? defaults.maxTokens,
        seed: body.seed ?? undefined,
        topP: body.top_p ?? undefined,
        topK: body.top_k ?? undefined,
        minP: body.min_p ?? undefined,
        repeatPenalty: body.repeat_penalty ?? undefined,
        stop: stopList(body.stop),
        policy: body.ponder?.policy ?? defaults.policy,
        kvType: body.ponder?.cache_type_k,
        kvTypeV: body.ponder?.cache_type_v,
        flashAttention: body.ponder?.flash_attention,
        compareFull: body.ponder?.compare_full,
        budget:
            budget == null ? defaults.budget : "cells" in budget ? {kind: "cells", cells: budget.cells} : {kind: "mib", mib: budget.mib},
        ...events
    };
}
