import {z} from "zod";
import {
    generationSettingKeys,
    type AppSettings,
    type CompressionSettings,
    type ConversationSettings,
    type GpuLayers,
    type SamplingPreset
} from "../../preload/contract.js";
import {kvBounds} from "../../preload/kvBounds.js";
import {quantizedCacheNeedsFlashAttention, quantizedWithoutFlashAttention} from "../kv/kvMemory.js";
import {kvBudgetSchema} from "../kvBudgetSchema.js";
import {
    defaultPolicyParams,
    isNumberParam,
    policyEntry,
    policyIds,
    tunablePolicyIds,
    type NumberParam,
    type PolicyParam,
    type PolicyParams,
    type TunablePolicyId
} from "../../preload/policyCatalogue.js";

/** A number parameter's checks, in the order zod reports them: whole, low bound, high bound, odd. */
function numberSchema(param: NumberParam): z.ZodNumber {
    let schema = z.number();
    if (param.integer) schema = schema.int();
    schema = param.minExclusive ? schema.gt(param.min, param.messages?.min) : schema.min(param.min, param.messages?.min);
    schema = param.maxExclusive ? schema.lt(param.max, param.messages?.max) : schema.max(param.max, param.messages?.max);
    return param.odd ? schema.refine((value) => value % 2 === 1, param.messages?.odd) : schema;
}

function paramSchema(param: PolicyParam): z.ZodType {
    return isNumberParam(param) ? numberSchema(param) : z.enum(param.options.map((option) => option.id) as [string, ...string[]]);
}

/** Each tunable policy's parameters as the catalogue declares them (preload/policyCatalogue.ts). */
const paramsSchema = z
    .object(
        Object.fromEntries(
            tunablePolicyIds.map((id) => [
                id,
                z.object(Object.fromEntries(policyEntry(id).params.map((param) => [param.key, paramSchema(param)]))).strict()
            ])
        )
    )
    .strict() as unknown as z.ZodObject<{[Id in TunablePolicyId]: z.ZodType<PolicyParams[Id]>}>;

export const kvCacheTypeSchema = z.enum(["f16", "q8_0", "q4_0"]);

/** The compression settings field by field, without the checks across fields (for partial updates). */
export const compressionSettingsFields = z
    .object({
        policy: z.enum(policyIds),
        budget: kvBudgetSchema,
        kvType: kvCacheTypeSchema,
        kvTypeV: kvCacheTypeSchema,
        flashAttention: z.boolean(),
        combine: z.enum(["auto", "quota", "union", "aggregate", "heads"]),
        pruneEvery: z.number().int().min(kvBounds.minPruneEvery).max(kvBounds.maxPruneEvery),
        params: paramsSchema
    })
    .strict();

/** Why per-head cells are refused for a policy without them. */
export const perHeadCellsNeedHeadRanking =
    "Per-head cells are for TRIM-KV, H2O and Lethe: they rank each KV head's or layer's own tokens (gates, attention received)";

export const compressionSettingsSchema = compressionSettingsFields.superRefine((compression, ctx) => {
    if (quantizedWithoutFlashAttention(compression))
        ctx.addIssue({code: "custom", path: ["flashAttention"], message: quantizedCacheNeedsFlashAttention});
    const entry = policyEntry(compression.policy);
    if (compression.combine === "heads" && !entry.headCells && !entry.keepsEveryToken)
        ctx.addIssue({code: "custom", path: ["combine"], message: perHeadCellsNeedHeadRanking});
}) satisfies z.ZodType<CompressionSettings>;

export const defaultCompressionSettings: CompressionSettings = {
    policy: "full",
    budget: {kind: "auto"},
    kvType: "f16",
    kvTypeV: "f16",
    flashAttention: false,
    combine: "auto",
    pruneEvery: 16,
    params: defaultPolicyParams()
};

/** Most GPU layers accepted before the model is known; the model's own count is checked when it is set. */
export const maxGpuLayers = 1024;

export const gpuLayersSchema = z.union([
    z.literal("auto"),
    z.literal("max"),
    z
        .number()
        .int("GPU layers must be a whole number")
        .min(0, "GPU layers must be 0 or more")
        .max(maxGpuLayers, `GPU layers must be at most ${maxGpuLayers}`)
]) satisfies z.ZodType<GpuLayers>;

export const samplingFields = {
    temperature: z.number().min(0, "Temperature must be between 0 and 2").max(2, "Temperature must be between 0 and 2"),
    topP: z.number().gt(0, "Top-p must be above 0 and at most 1").max(1, "Top-p must be above 0 and at most 1"),
    topK: z
        .number()
        .int("Top-k must be a whole number")
        .min(0, "Top-k must be from 0 (off) to 1,000")
        .max(1000, "Top-k must be from 0 (off) to 1,000"),
    minP: z.number().min(0, "Min-p must be between 0 (off) and 1").max(1, "Min-p must be between 0 (off) and 1"),
    repeatPenalty: z.number().min(1, "Repeat penalty must be between 1 (off) and 2").max(2, "Repeat penalty must be between 1 (off) and 2")
};

export const samplingPresetSchema = z
    .object({
        name: z.string().trim().min(1, "A preset needs a name").max(60, "A preset name is at most 60 characters"),
        ...samplingFields
    })
    .strict() satisfies z.ZodType<SamplingPreset>;

export const conversationSettingsSchema = z
    .object({
        systemPrompt: z.string().max(20_000),
        ...samplingFields,
        maxTokens: z.number().int().min(1).max(131_072),
        seed: z
            .number()
            .int("The seed must be a whole number")
            .min(0, "The seed must be from 0 to 4,294,967,295")
            .max(4_294_967_295, "The seed must be from 0 to 4,294,967,295")
            .nullable(),
        thinking: z.boolean(),
        thinkingBudget: z
            .number()
            .int("The thinking budget must be a whole number of tokens")
            .min(1, "The thinking budget must be at least 1 token")
            .max(131_072, "The thinking budget is at most 131,072 tokens")
            .nullable(),
        compression: compressionSettingsSchema
    })
    .strict() satisfies z.ZodType<ConversationSettings>;

export const defaultConversationSettings: ConversationSettings = {
    systemPrompt: "",
    temperature: 0.6,
    // Qwen3's and R1's recommendation for thinking; greedy decoding makes reasoning models loop.
    topP: 0.95,
    topK: 20,
    minP: 0,
    repeatPenalty: 1,
    seed: null,
    thinking: true,
    thinkingBudget: null,
    // Reasoning models think for thousands of tokens (R1-class model cards evaluate at 32k): a limit that rarely cuts.
    maxTokens: 32_768,
    compression: defaultCompressionSettings
};

/** The saved states' disk budget in whole MiB: 0 (save none) up to 1 TiB. */
export const stateDiskBudgetMibSchema = z
    .number({error: "The disk budget must be a number of MiB"})
    .int("The disk budget is a whole number of MiB")
    .min(0, "The disk budget cannot be negative")
    .max(1024 * 1024, "The disk budget is at most 1 TiB");

export const appSettingsSchema = z
    .object({
        theme: z.enum(["system", "light", "dark"]),
        defaultModelId: z.string().max(200).nullable(),
        defaultConversationSettings: conversationSettingsSchema,
        samplingPresets: z
            .array(samplingPresetSchema)
            .max(50, "At most 50 presets")
            .refine(
                (presets) => new Set(presets.map((preset) => preset.name.trim().toLowerCase())).size === presets.length,
                "Two presets have the same name"
            ),
        stateDiskBudgetMib: stateDiskBudgetMibSchema
    })
    .strict() satisfies z.ZodType<AppSettings>;

export const defaultAppSettings: AppSettings = {
    theme: "system",
    defaultModelId: null,
    defaultConversationSettings,
    samplingPresets: [],
    stateDiskBudgetMib: 4096
};

/**
 * Compression settings stored before keys and values had their own types: the one `kvType` covered both, so it is the
 * values' type too. Anything else is returned as it is.
 */
export function withValueType(stored: unknown): unknown {
    if (stored == null || typeof stored !== "object" || "kvTypeV" in stored) return stored;
    const kvType = (stored as {kvType?: unknown}).kvType;
    return kvCacheTypeSchema.safeParse(kvType).success ? {...stored, kvTypeV: kvType} : stored;
}

/**
 * Stored settings over the defaults, field by field: a field that no longer validates (an older or damaged
 * row) falls back to its default instead of making the conversation unreadable.
 */
export function mergeConversationSettings(defaults: ConversationSettings, stored: unknown): ConversationSettings {
    const source = typeof stored === "object" && stored != null ? (stored as Record<string, unknown>) : {};
    const merged: Record<string, unknown> = {...defaults};
    for (const key of generationSettingKeys) {
        const field = conversationSettingsSchema.shape[key].safeParse(source[key]);
        if (field.success) merged[key] = field.data;
    }
    const compression =
        typeof source.compression === "object" && source.compression != null
            ? (withValueType(source.compression) as Record<string, unknown>)
            : {};
    const mergedCompression: Record<string, unknown> = {...defaults.compression};
    for (const key of ["policy", "budget", "kvType", "kvTypeV", "flashAttention", "combine", "pruneEvery"] as const) {
        const field = compressionSettingsFields.shape[key].safeParse(compression[key]);
        if (field.success) mergedCompression[key] = field.data;
    }
    // A pair llama.cpp cannot run (stored before it was refused): the flash attention setting stays, the cache is F16.
    if (quantizedWithoutFlashAttention(mergedCompression as CompressionSettings)) {
        mergedCompression.kvType = "f16";
        mergedCompression.kvTypeV = "f16";
    }
    const params =
        typeof compression.params === "object" && compression.params != null ? (compression.params as Record<string, unknown>) : {};
    const mergedParams: Record<string, unknown> = {...defaults.compression.params};
    for (const key of tunablePolicyIds) {
        const field = paramsSchema.shape[key].safeParse({...defaults.compression.params[key], ...(params[key] as object | undefined)});
        if (field.success) mergedParams[key] = field.data;
    }
    mergedCompression.params = mergedParams;
    merged.compression = mergedCompression;
    return merged as ConversationSettings;
}
