import type {
    CompressionSettings,
    ConversationSummary,
    GpuLayers,
    MessageCompression,
    MessageDto,
    MessageStats,
    ModelInfo,
    PolicyId,
    VersionComparison
} from "../../preload/contract.js";
import {policyEntry, policyIds} from "../../preload/policyCatalogue.js";
import type {ConversationRow, MessageRow, ModelRow} from "../db/types.js";
import {compressionSettingsSchema, withValueType} from "./schemas.js";

/** `policy`: the conversation's compression policy (its settings over the defaults). */
export function toConversationSummary(row: ConversationRow, policy: PolicyId): ConversationSummary {
    return {id: row.id, title: row.title, createdAt: row.created_at, updatedAt: row.updated_at, messageCount: row.message_count, policy};
}

export function toMessageDto(row: MessageRow): MessageDto {
    return {
        id: row.id,
        conversationId: row.conversation_id,
        role: row.role,
        text: row.text,
        thinking: row.thinking,
        status: row.status,
        promptTokens: row.prompt_tokens,
        thinkingTokens: row.thinking_tokens,
        answerTokens: row.answer_tokens,
        thinkingMs: row.thinking_ms,
        totalMs: row.total_ms,
        error: row.error,
        stats: parseStats(row.stats),
        firstTokenMs: row.first_token_ms,
        siblingIds: [row.id],
        cut:
            row.cut_reason === "max_tokens"
                ? {reason: "maxTokens", tokens: row.cut_tokens ?? row.thinking_tokens + row.answer_tokens}
                : null,
        compression: parseCompression(row.compression),
        createdAt: row.created_at
    };
}

export function toModelInfo(row: ModelRow): ModelInfo {
    return {
        id: row.id,
        path: row.path,
        name: row.name,
        sizeBytes: row.size_bytes,
        architecture: row.architecture,
        contextLength: row.context_length,
        gpuLayers: parseGpuLayers(row.gpu_layers),
        addedAt: row.added_at,
        lastUsedAt: row.last_used_at,
        crashedAt: row.crashed_at ?? null
    };
}

function parseStats(json: string): MessageStats | null {
    try {
        const stats = JSON.parse(json) as Partial<MessageStats>;
        return Array.isArray(stats.samples) ? (stats as MessageStats) : null;
    } catch {
        return null;
    }
}

/**
 * A stored (or imported) record of the compression an answer ran under; `null` when there is none or it is unreadable.
 * Settings that no longer validate (recorded by another version) are dropped; the policy and cells stay.
 */
export function parseCompression(value: unknown): MessageCompression | null {
    let record: unknown = value;
    if (typeof value === "string") {
        try {
            record = JSON.parse(value);
        } catch {
            return null;
        }
    }
    if (record == null || typeof record !== "object") return null;
    const {policy, budgetCells, settings, budgetFull, seed, comparison} = record as Record<string, unknown>;
    if (!policyIds.includes(policy as PolicyId)) return null;
    const cells = typeof budgetCells === "number" && Number.isSafeInteger(budgetCells) && budgetCells > 0 ? budgetCells : null;
    const parsed = settings == null ? null : compressionSettingsSchema.safeParse(withValueType(settings));
    return {
        policy: policy as PolicyId,
        budgetCells: cells,
        settings: parsed?.success === true && parsed.data.policy === policy ? parsed.data : null,
        ...(budgetFull === true ? {budgetFull: true} : {}),
        ...(typeof seed === "number" && Number.isSafeInteger(seed) ? {seed} : {}),
        ...(isComparison(comparison) ? {comparison} : {})
    };
}

/** A stored GPU layers setting; anything unreadable is `auto`. */
function parseGpuLayers(text: string | null | undefined): GpuLayers {
    if (text === "max") return "max";
    if (text != null && /^\d{1,4}$/.test(text)) return Number(text);
    return "auto";
}

/**
 * Why Continue cannot go on from an answer Full KV stopped at its budget while the conversation still asks for the
 * same (Full KV, the same budget), or `null` when it can (a larger budget or a policy is then the engine's to check).
 */
export function continueBlockedByBudget(record: MessageCompression | null, current: CompressionSettings): string | null {
    if (
        record?.budgetFull !== true ||
        !policyEntry(current.policy).keepsEveryToken ||
        JSON.stringify(current.budget) !== JSON.stringify(record.settings?.budget ?? current.budget)
    )
        return null;
    const cells = record.budgetCells != null ? `${record.budgetCells.toLocaleString("en-US")} cells` : "its budget";
    return `This answer stopped because Full KV filled ${cells}: raise the KV budget or choose a compression policy, then Continue.`;
}

/** A stored comparison as Compare with Full KV wrote it (its own record, read back whole); anything else is dropped. */
function isComparison(value: unknown): value is VersionComparison {
    if (value == null || typeof value !== "object") return false;
    const record = value as Record<string, unknown>;
    return (
        typeof record.messageId === "string" &&
        policyIds.includes(record.policy as PolicyId) &&
        typeof record.sameAnswer === "boolean" &&
        typeof record.sameThought === "boolean" &&
        (record.parting === null || typeof record.parting === "object")
    );
}
