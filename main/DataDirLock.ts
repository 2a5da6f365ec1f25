import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export const DATA_DIR_LOCK_FILE = "ponder.lock";

/** Another live process holds the data directory. */
export class DataDirLockedError extends Error {
    override name = "DataDirLockedError";

    constructor(
        readonly dataDir: string,
        readonly pid: number | null
    ) {
        super(
            `Another Ponder process${pid != null ? ` (pid ${pid})` : ""} is using the data directory ${dataDir}: ` +
                "stop it first, or give this one another folder (headless: --data-dir <folder>)."
        );
    }
}

type LockContent = {pid: number; hostname: string};

function isAlive(pid: number): boolean {
    try {
        process.kill(pid, 0);
        return true;
    } catch (err) {
        // EPERM: the process exists but belongs to someone else
        return (err as NodeJS.ErrnoException).code === "EPERM";
    }
}

function readLock(file: string): LockContent | null {
    try {
        const content = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<LockContent>;
        return typeof content.pid === "number" && typeof content.hostname === "string"
            ? {pid: content.pid, hostname: content.hostname}
            : null;
    } catch {
        return null;
    }
}

/**
 * An exclusive claim on a data directory (its database, models and settings), so two processes never share one: the
 * second would, at start-up, mark the first one's live answer as interrupted. The claim is a `ponder.lock` file holding
 * the owner's pid and host, created exclusively; a lock left by a process that has died (same host, pid not running) is
 * taken over. Release it with `dispose()`.
 */
export class DataDirLock {
    private _released = false;

    private constructor(readonly file: string) {}

    /** Claims `dataDir` (creating it); throws {@link DataDirLockedError} when a live process holds it. */
    static acquire(dataDir: string): DataDirLock {
        fs.mkdirSync(dataDir, {recursive: true});
        const file = path.join(dataDir, DATA_DIR_LOCK_FILE);
        const content = JSON.stringify({pid: process.pid, hostname: os.hostname()} satisfies LockContent);
        for (let attempt = 0; attempt < 2; attempt++) {
            try {
                fs.writeFileSync(file, content, {flag: "wx"});
                return new DataDirLock(file);
            } catch (err) {
                if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
            }
            const holder = readLock(file);
            // our own pid in the file: left by an earlier process that had it (pids repeat across container restarts)
            if (holder != null && holder.pid !== process.pid && (holder.hostname !== os.hostname() || isAlive(holder.pid)))
                throw new DataDirLockedError(dataDir, holder.pid);
            if (holder == null) {
                // being written by a process that started this very moment, or garbage: an empty or torn file older
                // than a second is garbage
                const age = Date.now() - fs.statSync(file).mtimeMs;
                if (age < 1000) throw new DataDirLockedError(dataDir, null);
            }
            // stale (its owner died) or ours from before: remove it and try again; a process that wins the race in
            // between holds the directory, and the second attempt says so
            fs.rmSync(file, {force: true});
        }
        const holder = readLock(file);
        throw new DataDirLockedError(dataDir, holder?.pid ?? null);
    }

    /** Releases the claim (only if the file is still ours). */
    dispose(): void {
        if (this._released) return;
        this._released = true;
        if (readLock(this.file)?.pid === process.pid) fs.rmSync(this.file, {force: true});
    }
}
