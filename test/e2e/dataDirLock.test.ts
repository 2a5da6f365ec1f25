// Two headless servers on one data directory: the second exits with a clear error instead of marking the first one's
// live answer as interrupted (what every start does to answers left 'streaming').
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterEach, expect, test} from "vitest";
import {AppDatabase} from "../../main/db/AppDatabase.js";
import {HeadlessPonder} from "./HeadlessPonder.js";

const repoRoot = path.resolve(import.meta.dirname, "../..");
let first: HeadlessPonder | null = null;
let dataDir: string | null = null;

afterEach(async () => {
    await first?.kill();
    first = null;
    if (dataDir != null) fs.rmSync(dataDir, {recursive: true, force: true});
});

test("a second headless server on the same data directory refuses and leaves the first one's answer streaming", async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-lock-e2e-"));
    first = await HeadlessPonder.start({dataDir});

    // an answer the first server is streaming right now (written beside it, as its chat service would)
    const db = new AppDatabase(path.join(dataDir, "ponder.sqlite"));
    const now = Date.now();
    db.conversations.insert({id: "live", title: "live", settings: "{}", now});
    db.messages.insert({id: "live-q", conversation_id: "live", role: "user", text: "question", status: "complete", created_at: now});
    db.messages.insert({id: "live-a", conversation_id: "live", role: "assistant", text: "", status: "streaming", created_at: now});

    const second = spawnSync(process.execPath, [path.join(repoRoot, "out/main/headless.js"), "--data-dir", dataDir], {
        cwd: repoRoot,
        encoding: "utf8",
        timeout: 120_000
    });
    try {
        expect(second.status).toBe(1);
        expect(second.stderr.trim()).toBe(
            `Another Ponder process (pid ${first.process.pid}) is using the data directory ${dataDir}: ` +
                "stop it first, or give this one another folder (headless: --data-dir <folder>)."
        );
        expect(db.messages.get("live-a")?.status).toBe("streaming");
        expect(first.process.exitCode).toBeNull();
    } finally {
        db.dispose();
    }
});
