import type Database from "better-sqlite3";
import type {ModelRow} from "./types.js";

export class ModelRepo {
    constructor(private readonly _db: Database.Database) {}

    list(): ModelRow[] {
        return this._db.prepare("SELECT * FROM models ORDER BY COALESCE(last_used_at, added_at) DESC").all() as ModelRow[];
    }

    get(id: string): ModelRow | undefined {
        return this._db.prepare("SELECT * FROM models WHERE id = ?").get(id) as ModelRow | undefined;
    }

    getByPath(path: string): ModelRow | undefined {
        return this._db.prepare("SELECT * FROM models WHERE path = ?").get(path) as ModelRow | undefined;
    }

    /** Adds a model, or refreshes what its file says; its GPU layers setting is kept (a new one has `auto`). */
    upsert(row: Omit<ModelRow, "gpu_layers">): void {
        this._db
            .prepare(
                `INSERT INTO models (id, path, name, size_bytes, architecture, context_length, metadata, added_at, last_used_at)
            VALUES (@id, @path, @name, @size_bytes, @architecture, @context_length, @metadata, @added_at, @last_used_at)
            ON CONFLICT(path) DO UPDATE SET name = excluded.name, size_bytes = excluded.size_bytes,
                architecture = excluded.architecture, context_length = excluded.context_length, metadata = excluded.metadata`
            )
            .run(row);
    }

    setGpuLayers(id: string, gpuLayers: string): boolean {
        return this._db.prepare("UPDATE models SET gpu_layers = ? WHERE id = ?").run(gpuLayers, id).changes > 0;
    }

    markUsed(id: string, now: number): void {
        this._db.prepare("UPDATE models SET last_used_at = ?, crashed_at = NULL WHERE id = ?").run(now, id);
    }

    /** Loading it stopped the engine. */
    markCrashed(id: string, now: number): void {
        this._db.prepare("UPDATE models SET crashed_at = ? WHERE id = ?").run(now, id);
    }

    delete(id: string): boolean {
        return this._db.prepare("DELETE FROM models WHERE id = ?").run(id).changes > 0;
    }
}
