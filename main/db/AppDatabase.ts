import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import {migrations as shippedMigrations} from "./migrations.js";
import {ConversationRepo} from "./ConversationRepo.js";
import {MessageRepo} from "./MessageRepo.js";
import {ModelRepo} from "./ModelRepo.js";
import {SettingsRepo} from "./SettingsRepo.js";
import type {Migration} from "./types.js";

export class StorageError extends Error {
    override name = "StorageError";
}

/**
 * The app's SQLite database: WAL journal, foreign keys on, forward-only migrations applied in a
 * transaction each and recorded. The only place better-sqlite3 is opened.
 */
export class AppDatabase {
    readonly conversations: ConversationRepo;
    readonly messages: MessageRepo;
    readonly models: ModelRepo;
    readonly settings: SettingsRepo;
    private readonly _db: Database.Database;

    /** @param file path of the database file, or `":memory:"` */
    constructor(file: string, migrations: Migration[] = shippedMigrations) {
        if (file !== ":memory:") fs.mkdirSync(path.dirname(file), {recursive: true});

        try {
            this._db = new Database(file);
        } catch (err) {
            throw new StorageError(`Cannot open the database at ${file}: ${(err as Error).message}`);
        }

        this._db.pragma("journal_mode = WAL");
        this._db.pragma("synchronous = NORMAL");
        this._db.pragma("foreign_keys = ON");
        this._db.pragma("busy_timeout = 5000");
        applyMigrations(this._db, migrations);

        this.conversations = new ConversationRepo(this._db);
        this.messages = new MessageRepo(this._db);
        this.models = new ModelRepo(this._db);
        this.settings = new SettingsRepo(this._db);
    }

    get journalMode(): string {
        return String(this._db.pragma("journal_mode", {simple: true}));
    }

    appliedMigrations(): {id: number; name: string}[] {
        return this._db.prepare("SELECT id, name FROM schema_migrations ORDER BY id").all() as {id: number; name: string}[];
    }

    transaction<T>(fn: () => T): T {
        return this._db.transaction(fn)();
    }

    dispose(): void {
        if (this._db.open) this._db.close();
    }
}

/** Applies the migrations not yet recorded; the recorded list must be a prefix of the shipped one. */
function applyMigrations(db: Database.Database, migrations: Migration[]): void {
    db.exec("CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)");
    const applied = db.prepare("SELECT id, name FROM schema_migrations ORDER BY id").all() as {id: number; name: string}[];

    for (const [index, row] of applied.entries()) {
        const shipped = migrations[index];
        if (shipped == null)
            throw new StorageError(
                `The database has migration ${row.id} (${row.name}) that this version of Ponder does not know: it was written by a newer version.`
            );
        if (shipped.id !== row.id || shipped.name !== row.name)
            throw new StorageError(
                `Migration mismatch at ${row.id}: the database recorded "${row.name}", this version ships ${shipped.id} "${shipped.name}".`
            );
    }

    for (let index = 1; index < migrations.length; index++) {
        if (migrations[index]!.id <= migrations[index - 1]!.id)
            throw new StorageError(`Migrations are not strictly increasing at ${migrations[index]!.id}`);
    }

    const record = db.prepare("INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)");
    for (const migration of migrations.slice(applied.length)) {
        db.transaction(() => {
            db.exec(migration.sql);
            record.run(migration.id, migration.name, Date.now());
        })();
    }
}
