import type Database from "better-sqlite3";

/** App settings as JSON values under string keys. */
export class SettingsRepo {
    constructor(private readonly _db: Database.Database) {}

    get(key: string): unknown {
        const row = this._db.prepare("SELECT value FROM settings WHERE key = ?").get(key) as {value: string} | undefined;
        return row == null ? undefined : JSON.parse(row.value);
    }

    set(key: string, value: unknown): void {
        this._db
            .prepare("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .run(key, JSON.stringify(value));
    }
}
