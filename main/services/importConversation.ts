import {z} from "zod";
import type {MessageRow} from "../db/types.js";
import {parseCompression} from "./dto.js";

/** The largest conversation file read (the JSON export of a long chat with its memory statistics). */
export const maxImportBytes = 64 * 1024 * 1024;

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const importedMessage = z.object({
    role: z.enum(["user", "assistant"]),
    text: z.string(),
    thinking: z.string().default(""),
    status: z.enum(["complete", "streaming", "interrupted", "stopped", "error"]).default("complete"),
    promptTokens: count.default(0),
    thinkingTokens: count.default(0),
    answerTokens: count.default(0),
    thinkingMs: count.default(0),
    totalMs: count.default(0),
    firstTokenMs: count.nullable().default(null),
    error: z.string().nullable().default(null),
    stats: z.unknown().optional(),
    cut: z
        .object({reason: z.literal("maxTokens"), tokens: count})
        .nullable()
        .default(null),
    /** The compression the answer ran under; read by `parseCompression` (an unreadable one is dropped, not refused). */
    compression: z.unknown().optional(),
    createdAt: count.optional()
});

/** An answer's token records (`MessageStats.tokens`): parallel arrays of one length, which the memory panel reads as they are. */
const tokenScoresSchema = z
    .object({
        kind: z.enum(["retention", "attention", "none"]),
        layers: count.max(4096),
        positions: z.array(count),
        scores: z.array(z.number().nullable()),
        rounds: z.array(count),
        keptBy: z.array(z.string().regex(/^[0-9a-f]*$/))
    })
    .refine((record) => [record.scores, record.rounds, record.keptBy].every((list) => list.length === record.positions.length));
const pruneRoundsSchema = z.array(z.object({first: count, last: count, step: count, tokensSeen: count, evicted: z.array(count)}));

/** `stats` without the token records and prune rounds it holds in another shape than the app reads (a damaged or foreign file). */
function readableRecords(stats: Record<string, unknown>): Record<string, unknown> {
    const {tokens, rounds, ...rest} = stats;
    return {
        ...rest,
        ...(tokens != null && tokenScoresSchema.safeParse(tokens).success ? {tokens} : {}),
        ...(rounds != null && pruneRoundsSchema.safeParse(rounds).success ? {rounds} : {})
    };
}

/** Ponder's JSON export (`exportConversation`, format `ponder-conversation` version 1). */
export const conversationFileSchema = z.object({
    format: z.literal("ponder-conversation", {error: "This is not a Ponder conversation file (its format is not ponder-conversation)"}),
    version: z.literal(1, {error: "This conversation file is from a newer Ponder (version is not 1)"}),
    conversation: z.object({title: z.string()}),
    settings: z.record(z.string(), z.unknown()).default({}),
    messages: z.array(importedMessage).max(100_000)
});

export type ConversationFile = z.infer<typeof conversationFileSchema>;

/** Reads a conversation file; a clear sentence for each way it can be wrong. */
export function parseConversationFile(content: string): {file: ConversationFile} | {error: string} {
    let json: unknown;
    try {
        json = JSON.parse(content);
    } catch (err) {
        return {error: `The file is not JSON: ${(err as Error).message}`};
    }
    const parsed = conversationFileSchema.safeParse(json);
    if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        const where = issue.path.length > 0 ? ` (at ${issue.path.join(".")})` : "";
        return {error: `The conversation file is not valid${where}: ${issue.message}`};
    }
    return {file: parsed.data};
}

/**
 * The file's messages as rows to store, in order: an answer that was streaming when exported counts as interrupted,
 * and memory statistics and the compression an answer ran under are kept when they have the shape the app reads.
 */
export function importedRows(file: ConversationFile, now: number): MessageRow[] {
    return file.messages.map((message, index): MessageRow => {
        const stats = message.stats as {samples?: unknown} | null | undefined;
        // A file from before answers recorded it: what its stats knew, as migration 0007 fills in stored answers.
        const fromStats = stats != null && typeof stats === "object" ? {...stats, settings: null} : null;
        const compression = message.role !== "assistant" ? null : (parseCompression(message.compression) ?? parseCompression(fromStats));
        return {
            id: "",
            conversation_id: "",
            seq: index + 1,
            parent_id: null,
            shown_child_id: null,
            // an imported answer's model is not known here: a calibration never reads it as this app's model's
            model_path: null,
            role: message.role,
            text: message.text,
            thinking: message.role === "assistant" ? message.thinking : "",
            status: message.status === "streaming" ? "interrupted" : message.status,
            prompt_tokens: message.promptTokens,
            thinking_tokens: message.thinkingTokens,
            answer_tokens: message.answerTokens,
            thinking_ms: message.thinkingMs,
            total_ms: message.totalMs,
            first_token_ms: message.firstTokenMs,
            error: message.error,
            stats:
                stats != null && typeof stats === "object" && Array.isArray(stats.samples) ? JSON.stringify(readableRecords(stats)) : "{}",
            cut_reason: message.cut != null ? "max_tokens" : null,
            cut_tokens: message.cut?.tokens ?? null,
            compression: compression == null ? null : JSON.stringify(compression),
            created_at: message.createdAt ?? now,
            updated_at: now
        };
    });
}
