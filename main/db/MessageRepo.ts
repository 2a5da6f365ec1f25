import type Database from "better-sqlite3";
import type {MessageRow} from "./types.js";

export type MessageProgress = Pick<MessageRow, "text" | "thinking" | "thinking_tokens" | "answer_tokens" | "thinking_ms" | "total_ms"> &
    Partial<Pick<MessageRow, "first_token_ms">>;
export type MessageFinish = MessageProgress & Pick<MessageRow, "status" | "prompt_tokens" | "error" | "stats" | "cut_reason" | "cut_tokens">;

/** A message matching a full-text search, with a snippet of each column (matches between U+0002 and U+0003). */
export type MessageSearchRow = {
    message_id: string,
    conversation_id: string,
    title: string,
    role: MessageRow["role"],
    text_snippet: string,
    thinking_snippet: string
};

export class MessageRepo {
    constructor(private readonly _db: Database.Database) {}

    listByConversation(conversationId: string): MessageRow[] {
        return this._db.prepare("SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq").all(conversationId) as MessageRow[];
    }

    get(id: string): MessageRow | undefined {
        return this._db.prepare("SELECT * FROM messages WHERE id = ?").get(id) as MessageRow | undefined;
    }

    /** Appends a message at the end of its conversation. */
    insert(row: Pick<MessageRow, "id" | "conversation_id" | "role" | "text" | "status" | "created_at">): MessageRow {
        this._db.prepare(`INSERT INTO messages (id, conversation_id, seq, role, text, status, created_at, updated_at)
            VALUES (@id, @conversation_id,
                (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = @conversation_id),
                @role, @text, @status, @created_at, @created_at)`).run(row);
        return this.get(row.id)!;
    }

    /** Saves what a streaming answer has produced so far; a crash after this loses nothing before it. */
    saveProgress(id: string, progress: MessageProgress, now: number): void {
        this._db.prepare(`UPDATE messages SET text = @text, thinking = @thinking, thinking_tokens = @thinking_tokens,
            answer_tokens = @answer_tokens, thinking_ms = @thinking_ms, total_ms = @total_ms,
            first_token_ms = COALESCE(@first_token_ms, first_token_ms), updated_at = @now WHERE id = @id`)
            .run({first_token_ms: null, ...progress, id, now});
    }

    finish(id: string, finish: MessageFinish, now: number): void {
        this._db.prepare(`UPDATE messages SET text = @text, thinking = @thinking, thinking_tokens = @thinking_tokens,
            answer_tokens = @answer_tokens, thinking_ms = @thinking_ms, total_ms = @total_ms, status = @status,
            first_token_ms = COALESCE(@first_token_ms, first_token_ms),
            prompt_tokens = @prompt_tokens, error = @error, stats = @stats, cut_reason = @cut_reason, cut_tokens = @cut_tokens, updated_at = @now WHERE id = @id`)
            .run({first_token_ms: null, ...finish, id, now});
    }

    /** Marks an answer streaming again, to be continued. */
    markStreaming(id: string, now: number): void {
        this._db.prepare("UPDATE messages SET status = 'streaming', error = NULL, updated_at = ? WHERE id = ?").run(now, id);
    }

    delete(id: string): void {
        this._db.prepare("DELETE FROM messages WHERE id = ?").run(id);
    }

    /**
     * Messages whose text or thinking match an FTS5 `match` expression, best first (bm25, the text weighted above the
     * thinking), newest first among equals.
     */
    search(match: string, limit: number): MessageSearchRow[] {
        return this._db.prepare(`SELECT f.message_id, m.conversation_id, c.title, m.role,
                snippet(messages_fts, 1, char(2), char(3), '…', 16) AS text_snippet,
                snippet(messages_fts, 2, char(2), char(3), '…', 16) AS thinking_snippet
            FROM messages_fts f
            JOIN messages m ON m.id = f.message_id
            JOIN conversations c ON c.id = m.conversation_id
            WHERE messages_fts MATCH ?
            ORDER BY bm25(messages_fts, 0, 2, 1), m.created_at DESC
            LIMIT ?`).all(match, limit) as MessageSearchRow[];
    }

    /** Marks answers left streaming by a process that died as interrupted. Returns how many. */
    markInterrupted(now: number): number {
        return this._db.prepare("UPDATE messages SET status = 'interrupted', updated_at = ? WHERE status = 'streaming'").run(now).changes;
    }
}
