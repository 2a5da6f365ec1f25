import type Database from "better-sqlite3";
import {rememberShownPathSql} from "./MessageRepo.js";
import type {ConversationRow} from "./types.js";

const selectColumns = `c.id, c.title, c.settings, c.model_id, c.created_at, c.updated_at, c.leaf_id,
    (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count`;

export class ConversationRepo {
    constructor(private readonly _db: Database.Database) {}

    /** Most recently updated first; `query` filters titles case-insensitively. */
    list(query?: string): ConversationRow[] {
        if (query != null && query.trim() !== "") {
            const pattern = "%" + query.trim().replace(/[\\%_]/g, (char) => "\\" + char) + "%";
            return this._db
                .prepare(`SELECT ${selectColumns} FROM conversations c WHERE c.title LIKE ? ESCAPE '\\' ORDER BY c.updated_at DESC`)
                .all(pattern) as ConversationRow[];
        }

        return this._db.prepare(`SELECT ${selectColumns} FROM conversations c ORDER BY c.updated_at DESC`).all() as ConversationRow[];
    }

    get(id: string): ConversationRow | undefined {
        return this._db.prepare(`SELECT ${selectColumns} FROM conversations c WHERE c.id = ?`).get(id) as ConversationRow | undefined;
    }

    insert(row: {id: string; title: string; settings: string; now: number}): void {
        this._db
            .prepare("INSERT INTO conversations (id, title, settings, created_at, updated_at) VALUES (?, ?, ?, ?, ?)")
            .run(row.id, row.title, row.settings, row.now, row.now);
    }

    rename(id: string, title: string, now: number): boolean {
        return this._db.prepare("UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?").run(title, now, id).changes > 0;
    }

    updateSettings(id: string, settings: string, now: number): boolean {
        return this._db.prepare("UPDATE conversations SET settings = ?, updated_at = ? WHERE id = ?").run(settings, now, id).changes > 0;
    }

    /** Shows the path that ends at `leafId`, and remembers it as the one last viewed through each of its messages. */
    setLeaf(id: string, leafId: string | null): void {
        this._db.prepare("UPDATE conversations SET leaf_id = ? WHERE id = ?").run(leafId, id);
        if (leafId != null) this._db.prepare(rememberShownPathSql).run({leafId});
    }

    touch(id: string, now: number): void {
        this._db.prepare("UPDATE conversations SET updated_at = ? WHERE id = ?").run(now, id);
    }

    delete(id: string): boolean {
        return this._db.prepare("DELETE FROM conversations WHERE id = ?").run(id).changes > 0;
    }
}
