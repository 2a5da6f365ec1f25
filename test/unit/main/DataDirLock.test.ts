// One process per data directory: a second one is refused with a clear error (test/e2e/dataDirLock.test.ts runs two
// headless servers); a lock left by a dead process is taken over.
import {spawn, type ChildProcess} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterEach, beforeEach, expect, test} from "vitest";
import {DATA_DIR_LOCK_FILE, DataDirLock, DataDirLockedError} from "../../../main/DataDirLock.js";

let dataDir: string;
let holder: ChildProcess | null = null;

beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-lock-"));
});

afterEach(() => {
    holder?.kill("SIGKILL");
    holder = null;
    fs.rmSync(dataDir, {recursive: true, force: true});
});

/** Starts a process that holds `dataDir` with an answer streaming; resolves once it is ready. */
async function startHolder(): Promise<ChildProcess> {
    // node itself (not the tsx launcher, which would be a parent with another pid)
    const child = spawn(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "dataDirHolder.ts"), dataDir], {
        stdio: ["ignore", "pipe", "inherit"]
    });
    holder = child;
    await new Promise<void>((resolve, reject) => {
        child.stdout!.on("data", (chunk: Buffer) => {
            if (chunk.toString().includes("ready")) resolve();
        });
        child.on("exit", (code) => reject(new Error(`the holder exited with code ${code}`)));
    });
    return child;
}

test("a directory held by a live process is refused, with its pid and what to do", async () => {
    const child = await startHolder();
    const error = (() => {
        try {
            DataDirLock.acquire(dataDir);
        } catch (err) {
            return err;
        }
        return null;
    })();
    expect(error).toBeInstanceOf(DataDirLockedError);
    expect((error as DataDirLockedError).pid).toBe(child.pid);
    expect((error as Error).message).toBe(
        `Another Ponder process (pid ${child.pid}) is using the data directory ${dataDir}: stop it first, or give this one another folder (headless: --data-dir <folder>).`
    );
});

test("a lock left by a process that died is taken over", async () => {
    const child = await startHolder();
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    expect(fs.existsSync(path.join(dataDir, DATA_DIR_LOCK_FILE))).toBe(true);
    const lock = DataDirLock.acquire(dataDir);
    expect(JSON.parse(fs.readFileSync(path.join(dataDir, DATA_DIR_LOCK_FILE), "utf8")).pid).toBe(process.pid);
    lock.dispose();
    expect(fs.existsSync(path.join(dataDir, DATA_DIR_LOCK_FILE))).toBe(false);
});

test("dispose releases the directory for the next process", () => {
    const lock = DataDirLock.acquire(dataDir);
    lock.dispose();
    DataDirLock.acquire(dataDir).dispose();
});
