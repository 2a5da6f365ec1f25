import type Database from "better-sqlite3";
import type {MessageRow} from "./types.js";

export type MessageProgress = Pick<MessageRow, "text" | "thinking" | "thinking_tokens" | "answer_tokens" | "thinking_ms" | "total_ms"> &
    Partial<Pick<MessageRow, "first_token_ms">>;
export type MessageFinish = MessageProgress &
    Pick<MessageRow, "status" | "prompt_tokens" | "error" | "stats" | "cut_reason" | "cut_tokens">;
/** What a streaming answer produced since its last save (the new text and thinking), with its counters now. */
export type MessageAppend = Omit<MessageProgress, "text" | "thinking"> & {text: string; thinking: string};

type PartRow = Omit<MessageAppend, "first_token_ms"> & {first_token_ms: number | null};

/** A message matching a full-text search, with a snippet of each column (matches between U+0002 and U+0003). */
export type MessageSearchRow = {
    message_id: string;
    conversation_id: string;
    title: string;
    role: MessageRow["role"];
    text_snippet: string;
    thinking_snippet: string;
};

/** Records, on every message of the path that ends at `@leafId`, which child the path goes through. */
export const rememberShownPathSql = `WITH RECURSIVE path(id, parent_id) AS (
        SELECT id, parent_id FROM messages WHERE id = @leafId
        UNION ALL
        SELECT m.id, m.parent_id FROM messages m JOIN path ON m.id = path.parent_id
    )
    UPDATE messages SET shown_child_id = (SELECT path.id FROM path WHERE path.parent_id = messages.id)
    WHERE id IN (SELECT parent_id FROM path WHERE parent_id IS NOT NULL)`;

export class MessageRepo {
    constructor(private readonly _db: Database.Database) {}

    /**
     * The messages the conversation shows: the path from its first message to its leaf (or, without a leaf, to its
     * newest message).
     */
    listByConversation(conversationId: string): MessageRow[] {
        return (
            this._db
                .prepare(
                    `WITH RECURSIVE path(id, depth) AS (
                SELECT COALESCE(
                    (SELECT leaf_id FROM conversations WHERE id = @conversationId),
                    (SELECT id FROM messages WHERE conversation_id = @conversationId ORDER BY seq DESC LIMIT 1)), 0
                UNION ALL
                SELECT m.parent_id, path.depth + 1 FROM messages m JOIN path ON m.id = path.id WHERE m.parent_id IS NOT NULL
            )
            SELECT m.* FROM path JOIN messages m ON m.id = path.id ORDER BY path.depth DESC`
                )
                .all({conversationId}) as MessageRow[]
        ).map((row) => this._withParts(row));
    }

    /** The versions of a message: the messages with its parent, oldest first (itself included). */
    siblingIds(row: Pick<MessageRow, "conversation_id" | "parent_id">): string[] {
        return (
            this._db
                .prepare("SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY seq")
                .all(row.conversation_id, row.parent_id) as Array<{id: string}>
        ).map((sibling) => sibling.id);
    }

    /**
     * The child of a message a path entering it continues with: the one shown last below it, else the newest.
     */
    shownChild(row: Pick<MessageRow, "conversation_id" | "id" | "shown_child_id">): MessageRow | undefined {
        return this._withParts(
            this._db
                .prepare("SELECT * FROM messages WHERE conversation_id = ? AND parent_id = ? ORDER BY id IS ? DESC, seq DESC LIMIT 1")
                .get(row.conversation_id, row.id, row.shown_child_id) as MessageRow | undefined
        );
    }

    get(id: string): MessageRow | undefined {
        return this._withParts(this._db.prepare("SELECT * FROM messages WHERE id = ?").get(id) as MessageRow | undefined);
    }

    /**
     * Adds a message after `parent_id` (`null`: a first message; absent: the end of the path the conversation shows),
     * and shows the path that ends with it.
     */
    insert(
        row: Pick<MessageRow, "id" | "conversation_id" | "role" | "text" | "status" | "created_at"> &
            Partial<Pick<MessageRow, "parent_id" | "model_path">>
    ): MessageRow {
        const parentId = row.parent_id !== undefined ? row.parent_id : (this.listByConversation(row.conversation_id).at(-1)?.id ?? null);
        this._db
            .prepare(
                `INSERT INTO messages (id, conversation_id, seq, role, text, status, created_at, updated_at, parent_id, model_path)
            VALUES (@id, @conversation_id,
                (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = @conversation_id),
                @role, @text, @status, @created_at, @created_at, @parent_id, @model_path)`
            )
            .run({...row, parent_id: parentId, model_path: row.model_path ?? null});
        this._db.prepare("UPDATE conversations SET leaf_id = ? WHERE id = ?").run(row.id, row.conversation_id);
        this._db.prepare(rememberShownPathSql).run({leafId: row.id});
        return this.get(row.id)!;
    }

    /**
     * Saves what a streaming answer produced since its last save, as a part after the others: the message row and the
     * parts before are not written again. A crash after this loses nothing before it.
     */
    appendProgress(id: string, append: MessageAppend): void {
        this._db
            .prepare(
                `INSERT INTO message_parts (message_id, seq, text, thinking, thinking_tokens, answer_tokens, thinking_ms, total_ms, first_token_ms)
            VALUES (@id, (SELECT COALESCE(MAX(seq), 0) + 1 FROM message_parts WHERE message_id = @id), @text, @thinking, @thinking_tokens,
                @answer_tokens, @thinking_ms, @total_ms, @first_token_ms)`
            )
            .run({first_token_ms: null, ...append, id});
    }

    /** Writes the whole answer into its row and drops its parts. */
    finish(id: string, finish: MessageFinish, now: number): void {
        this._db.prepare("DELETE FROM message_parts WHERE message_id = ?").run(id);
        this._db
            .prepare(
                `UPDATE messages SET text = @text, thinking = @thinking, thinking_tokens = @thinking_tokens,
            answer_tokens = @answer_tokens, thinking_ms = @thinking_ms, total_ms = @total_ms, status = @status,
            first_token_ms = COALESCE(@first_token_ms, first_token_ms),
            prompt_tokens = @prompt_tokens, error = @error, stats = @stats, cut_reason = @cut_reason, cut_tokens = @cut_tokens, updated_at = @now WHERE id = @id`
            )
            .run({first_token_ms: null, ...finish, id, now});
    }

    /** Copies a path of messages into another conversation, in order, each after the one before. */
    copyPath(rows: MessageRow[], conversationId: string, newId: () => string, now: number): MessageRow[] {
        const copies: MessageRow[] = [];
        for (const row of rows) {
            const id = newId();
            this._db
                .prepare(
                    `INSERT INTO messages (id, conversation_id, seq, role, text, thinking, status, prompt_tokens, thinking_tokens,
                    answer_tokens, thinking_ms, total_ms, error, stats, cut_reason, cut_tokens, first_token_ms, compression, model_path, parent_id, created_at, updated_at)
                VALUES (@id, @conversation_id, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = @conversation_id),
                    @role, @text, @thinking, @status, @prompt_tokens, @thinking_tokens, @answer_tokens, @thinking_ms, @total_ms, @error, @stats,
                    @cut_reason, @cut_tokens, @first_token_ms, @compression, @model_path, @parent_id, @created_at, @now)`
                )
                .run({
                    ...row,
                    compression: row.compression ?? null,
                    model_path: row.model_path ?? null,
                    id,
                    conversation_id: conversationId,
                    parent_id: copies.at(-1)?.id ?? null,
                    now
                });
            copies.push(this.get(id)!);
        }
        this._db.prepare("UPDATE conversations SET leaf_id = ? WHERE id = ?").run(copies.at(-1)?.id ?? null, conversationId);
        if (copies.length > 0) this._db.prepare(rememberShownPathSql).run({leafId: copies.at(-1)!.id});
        return copies;
    }

    /** Records the compression an answer runs under (`MessageCompression` as JSON). */
    setCompression(id: string, compression: string): void {
        this._db.prepare("UPDATE messages SET compression = ? WHERE id = ?").run(compression, id);
    }

    /** Replaces a message's statistics (a KV state's figures, written after the answer ended). */
    setStats(id: string, stats: string): void {
        this._db.prepare("UPDATE messages SET stats = ? WHERE id = ?").run(stats, id);
    }

    /** Marks an answer streaming again, to be continued. */
    markStreaming(id: string, now: number): void {
        this._db.prepare("UPDATE messages SET status = 'streaming', error = NULL, updated_at = ? WHERE id = ?").run(now, id);
    }

    delete(id: string): void {
        this._db.prepare("DELETE FROM message_parts WHERE message_id = ?").run(id);
        this._db.prepare("DELETE FROM messages WHERE id = ?").run(id);
    }

    /**
     * Messages whose text or thinking match an FTS5 `match` expression, best first (bm25, the text weighted above the
     * thinking), newest first among equals.
     */
    search(match: string, limit: number): MessageSearchRow[] {
        return this._db
            .prepare(
                `SELECT f.message_id, m.conversation_id, c.title, m.role,
                snippet(messages_fts, 1, char(2), char(3), '…', 16) AS text_snippet,
                snippet(messages_fts, 2, char(2), char(3), '…', 16) AS thinking_snippet
            FROM messages_fts f
            JOIN messages m ON m.id = f.message_id
            JOIN conversations c ON c.id = m.conversation_id
            WHERE messages_fts MATCH ?
            ORDER BY bm25(messages_fts, 0, 2, 1), m.created_at DESC
            LIMIT ?`
            )
            .all(match, limit) as MessageSearchRow[];
    }

    /** Marks answers left streaming by a process that died as interrupted, their saved parts joined in. Returns how many. */
    markInterrupted(now: number): number {
        const rows = (this._db.prepare("SELECT * FROM messages WHERE status = 'streaming'").all() as MessageRow[]).map((row) =>
            this._withParts(row)
        );
        for (const row of rows) {
            this._db
                .prepare(
                    `UPDATE messages SET text = @text, thinking = @thinking, thinking_tokens = @thinking_tokens, answer_tokens = @answer_tokens,
                thinking_ms = @thinking_ms, total_ms = @total_ms, first_token_ms = @first_token_ms, status = 'interrupted', updated_at = @now WHERE id = @id`
                )
                .run({...row, now});
            this._db.prepare("DELETE FROM message_parts WHERE message_id = ?").run(row.id);
        }
        return rows.length;
    }

    /** A streaming answer as saved so far: its row (what it held when it started) followed by its parts. */
    private _withParts<Row extends MessageRow | undefined>(row: Row): Row {
        if (row == null || row.status !== "streaming") return row;
        const parts = this._db
            .prepare(
                `SELECT text, thinking, thinking_tokens, answer_tokens, thinking_ms, total_ms, first_token_ms
            FROM message_parts WHERE message_id = ? ORDER BY seq`
            )
            .all(row.id) as PartRow[];
        const last = parts.at(-1);
        if (last == null) return row;
        return {
            ...row!,
            text: row.text + parts.map((part) => part.text).join(""),
            thinking: row.thinking + parts.map((part) => part.thinking).join(""),
            thinking_tokens: last.thinking_tokens,
            answer_tokens: last.answer_tokens,
            thinking_ms: last.thinking_ms,
            total_ms: last.total_ms,
            first_token_ms: last.first_token_ms ?? row.first_token_ms
        } as Row;
    }
}
