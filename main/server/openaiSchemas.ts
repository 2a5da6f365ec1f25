import {z} from "zod";
import {policyIds} from "../../preload/policyCatalogue.js";
import {kvBudgetSchema} from "../kvBudgetSchema.js";
import {quantizedCacheNeedsFlashAttention} from "../kv/kvMemory.js";

// The OpenAI request bodies Ponder accepts, parsed at the edge. A field the engine honours is validated; a field it
// cannot honour is accepted only at its neutral value (what the engine does anyway) and refused otherwise, so a
// client never gets a silently different generation. Unknown fields are refused too.

const unsupported = (name: string, reason: string) =>
    z
        .unknown()
        .refine((value) => value == null, {
            error: `${name} is not supported by Ponder's engine: ${reason}`,
            params: {code: "unsupported_parameter"}
        })
        .optional();

/** A field accepted only at `neutral` (or absent). */
const neutralOnly = <T extends number | boolean>(name: string, neutral: T) =>
    z
        .unknown()
        .refine((value) => value == null || value === neutral, {
            error: `${name} is not supported by Ponder's engine yet: only ${JSON.stringify(neutral)} (its neutral value) is accepted`,
            params: {code: "unsupported_parameter"}
        })
        .optional();

const maxTokens = z.number().int().min(1).max(131_072).nullish();

const cacheType = z.enum(["f16", "q8_0", "q4_0"]);

/**
 * Ponder's extension object: the KV policy and budget for this request, and its K and V cache types (llama-server's
 * `--cache-type-k` / `--cache-type-v`) and flash attention; each unset one is the app's default.
 */
export const ponderExtensionSchema = z
    .object({
        policy: z.enum(policyIds).optional(),
        budget: z.union([kvBudgetSchema.options[1].omit({kind: true}), kvBudgetSchema.options[2].omit({kind: true})]).optional(),
        cache_type_k: cacheType.optional(),
        cache_type_v: cacheType.optional(),
        flash_attention: z.boolean().optional(),
        /** Makes the answer again under Full KV with the same seed, and says whether the texts match and what each used. */
        compare_full: z.boolean().optional()
    })
    .strict()
    .superRefine((extension, ctx) => {
        if (extension.cache_type_v != null && extension.cache_type_v !== "f16" && extension.flash_attention === false)
            ctx.addIssue({
                code: "custom",
                path: ["flash_attention"],
                message: quantizedCacheNeedsFlashAttention,
                params: {code: "unsupported_parameter"}
            });
    });

const textPart = z.object({type: z.literal("text"), text: z.string()}).strict();
const content = z.union([
    z.string(),
    z
        .array(
            z.union([
                textPart,
                z
                    .object({type: z.string()})
                    .loose()
                    .refine(() => false, {
                        error: "Only text content parts are supported: this model reads text",
                        params: {code: "unsupported_parameter"}
                    })
            ])
        )
        .max(1000)
]);

const message = z.discriminatedUnion(
    "role",
    [
        z.object({role: z.enum(["system", "developer"]), content, name: z.string().optional()}).strict(),
        z.object({role: z.literal("user"), content, name: z.string().optional()}).strict(),
        z
            .object({
                role: z.literal("assistant"),
                content: content.nullish(),
                /** A previous answer's thinking, as this server returns it. */
                reasoning_content: z.string().nullish(),
                name: z.string().optional(),
                tool_calls: unsupported("tool_calls", "this server does not call tools"),
                refusal: z.string().nullish()
            })
            .strict()
    ],
    {
        error: (issue) =>
            issue.code === "invalid_union"
                ? "role must be one of system, developer, user or assistant (tools are not supported)"
                : undefined
    }
);

const stop = z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish();
const streamOptions = z.object({include_usage: z.boolean().optional()}).strict().nullish();

/** Fields both endpoints share. */
const common = {
    model: z.string().min(1).max(400),
    stream: z.boolean().nullish(),
    stream_options: streamOptions,
    temperature: z.number().min(0).max(2).nullish(),
    seed: z
        .number()
        .int()
        .min(0)
        .max(2 ** 32 - 1)
        .nullish(),
    stop,
    user: z.string().max(200).optional(),
    top_p: z.number().gt(0, "top_p must be above 0").max(1).nullish(),
    // llama-server's sampling extensions, which tools written for it send.
    top_k: z.number().int().min(0).max(100_000).nullish(),
    min_p: z.number().min(0).max(1).nullish(),
    repeat_penalty: z.number().min(1, "repeat_penalty below 1 would favour repeats").max(10).nullish(),
    n: neutralOnly("n", 1),
    frequency_penalty: neutralOnly("frequency_penalty", 0),
    presence_penalty: neutralOnly("presence_penalty", 0),
    logit_bias: unsupported("logit_bias", "token biases are not applied"),
    ponder: ponderExtensionSchema.optional()
};

export const chatCompletionRequestSchema = z
    .object({
        ...common,
        messages: z.array(message).min(1, "messages must hold at least one message").max(10_000),
        max_tokens: maxTokens,
        max_completion_tokens: maxTokens,
        logprobs: neutralOnly("logprobs", false),
        top_logprobs: unsupported("top_logprobs", "log probabilities are not returned"),
        tools: unsupported("tools", "this server does not call tools"),
        tool_choice: unsupported("tool_choice", "this server does not call tools"),
        parallel_tool_calls: unsupported("parallel_tool_calls", "this server does not call tools"),
        functions: unsupported("functions", "this server does not call functions"),
        function_call: unsupported("function_call", "this server does not call functions"),
        response_format: z
            .unknown()
            .refine((value) => value == null || (typeof value === "object" && (value as {type?: unknown}).type === "text"), {
                error: 'response_format is not supported: structured output is not enforced (only {"type": "text"} is accepted)',
                params: {code: "unsupported_parameter"}
            })
            .optional(),
        reasoning_effort: unsupported("reasoning_effort", "the model thinks until it is done; bound it with max_tokens"),
        modalities: unsupported("modalities", "this server returns text"),
        audio: unsupported("audio", "this server returns text"),
        prediction: unsupported("prediction", "predicted outputs are not used"),
        service_tier: z.unknown().optional(),
        store: neutralOnly("store", false),
        metadata: z.record(z.string(), z.string()).optional()
    })
    .strict();

export const completionRequestSchema = z
    .object({
        ...common,
        prompt: z.union([z.string(), z.array(z.string()).length(1, "Only one prompt per request is supported")]),
        max_tokens: maxTokens,
        echo: neutralOnly("echo", false),
        best_of: neutralOnly("best_of", 1),
        logprobs: unsupported("logprobs", "log probabilities are not returned"),
        suffix: unsupported("suffix", "insertion is not supported")
    })
    .strict();

export type ChatCompletionRequestBody = z.infer<typeof chatCompletionRequestSchema>;
export type CompletionRequestBody = z.infer<typeof completionRequestSchema>;
export type PonderExtension = z.infer<typeof ponderExtensionSchema>;
