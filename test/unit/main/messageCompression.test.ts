// Each answer keeps the compression it ran under (policy, cells, every setting), apart from what the conversation is
// set to now: versions made under different policies can be compared, and the record travels with exports and forks.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {migrations} from "../../../main/db/migrations.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {exportConversation} from "../../../main/services/exportConversation.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import {FakeEngine} from "./FakeEngine.js";

function setup(db = new AppDatabase(":memory:")) {
    const engine = new FakeEngine();
    const services = new AppServices(db, engine.asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x", chat: {flushIntervalMs: 0}});
    return {engine, services, db};
}

const lethe = {...defaultCompressionSettings, policy: "lethe" as const, budget: {kind: "cells" as const, cells: 512}};

describe("the compression an answer ran under", () => {
    it("is recorded on each answer as it starts, and stays when the conversation's setting changes", async () => {
        const {services} = setup();
        const c = services.conversations.create();
        services.conversations.updateSettings(c.id, {compression: lethe});
        const sent = services.chat.send(c.id, "2+2?");
        // Known while it streams: the policy and every setting; the cells once the budget is resolved.
        expect(sent.assistantMessage.compression).toEqual({policy: "lethe", budgetCells: null, settings: lethe});
        expect(sent.userMessage.compression).toBeNull();
        await services.chat.idle();

        // The conversation moves on to Full KV: the answer keeps Lethe, the new version says Full.
        services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, policy: "full"}});
        services.chat.regenerate(c.id);
        await services.chat.idle();
        const detail = services.conversations.get(c.id);
        const [first, second] = detail.messages[1]!.siblingIds.map((id) => services.switchBranch(c.id, id).messages[1]!);
        expect(first!.compression).toEqual({policy: "lethe", budgetCells: 512, settings: lethe, seed: expect.any(Number)});
        expect(second!.compression).toMatchObject({policy: "full", budgetCells: 4096, settings: {policy: "full", budget: {kind: "auto"}}});
        expect(services.conversations.list()[0]!.policy).toBe("full");
    });

    it("Compare with Full KV makes the answer again under Full KV with its seed and cache types, and records how the two compare", async () => {
        const {services, engine} = setup();
        const c = services.conversations.create();
        services.conversations.updateSettings(c.id, {compression: {...lethe, kvType: "q8_0", kvTypeV: "q8_0", flashAttention: true}});
        services.chat.send(c.id, "2+2?");
        await services.chat.idle();
        const checked = services.conversations.get(c.id).messages[1]!;
        const seed = checked.compression!.seed!;
        expect(engine.requests.at(-1)?.seed).toBe(seed);

        services.chat.regenerate(c.id, {compareFull: true});
        await services.chat.idle();
        const full = services.conversations.get(c.id).messages[1]!;
        expect(full.id).not.toBe(checked.id);
        expect(full.siblingIds).toEqual([checked.id, full.id]);
        expect(engine.requests.at(-1)).toMatchObject({
            seed,
            kv: {compression: {policy: "full", budget: {kind: "auto"}, kvType: "q8_0", kvTypeV: "q8_0"}}
        });
        expect(full.compression).toMatchObject({policy: "full", seed, comparison: {messageId: checked.id, policy: "lethe"}});
        const comparison = full.compression!.comparison!;
        expect(comparison.sameAnswer).toBe(full.text === checked.text);
        expect(comparison.sameThought).toBe(full.thinking === checked.thinking);
        expect(comparison.parting === null).toBe(comparison.sameAnswer && comparison.sameThought);
        expect(comparison.prunedLiveBytes).toBe(checked.stats?.samples.at(-1)?.liveBytes ?? null);
        expect(comparison.fullLiveBytes).toBe(full.stats?.samples.at(-1)?.liveBytes ?? null);
        // The conversation keeps its own policy; a Full KV answer has nothing to compare with.
        expect(services.conversations.get(c.id).settings.compression.policy).toBe("lethe");
        expect(() => services.chat.regenerate(c.id, {compareFull: true})).toThrow(/needs an answer made under a pruning policy/);
    });

    it("travels with the JSON export, the Markdown export and a fork", async () => {
        const {services} = setup();
        const c = services.conversations.create("Compared");
        services.conversations.updateSettings(c.id, {compression: lethe});
        services.chat.send(c.id, "2+2?");
        await services.chat.idle();
        const original = services.conversations.get(c.id);
        const recorded = original.messages[1]!.compression;
        expect(recorded).toEqual({policy: "lethe", budgetCells: 512, settings: lethe, seed: expect.any(Number)});

        const copy = services.conversations.get(services.conversations.importFile(exportConversation(original, "json").content).id);
        expect(copy.messages[1]!.compression).toEqual(recorded);
        const fork = services.conversations.get(services.conversations.fork(c.id, original.messages[1]!.id).id);
        expect(fork.messages[1]!.compression).toEqual(recorded);
        expect(exportConversation(original, "markdown").content).toContain(
            "Ran under lethe · 512 cells (budget 512 cells) · KV K f16, V f16."
        );

        // A damaged record in a file is dropped, not refused (its stats' policy and cells stand in); one on a question is ignored.
        const file = JSON.parse(exportConversation(original, "json").content) as {messages: Array<Record<string, unknown>>};
        file.messages[0]!.compression = recorded;
        file.messages[1]!.compression = {policy: "magic", budgetCells: 1};
        const damaged = services.conversations.get(services.conversations.importFile(JSON.stringify(file)).id);
        expect(damaged.messages.map((message) => message.compression)).toEqual([null, {policy: "lethe", budgetCells: 512, settings: null}]);
        // A file from before answers recorded it: what the stats knew, as for answers stored before.
        delete file.messages[1]!.compression;
        const older = services.conversations.get(services.conversations.importFile(JSON.stringify(file)).id);
        expect(older.messages[1]!.compression).toEqual({policy: "lethe", budgetCells: 512, settings: null});
        file.messages[1]!.stats = null;
        const bare = services.conversations.get(services.conversations.importFile(JSON.stringify(file)).id);
        expect(bare.messages[1]!.compression).toBeNull();
    });

    it("is filled in from the stats of answers made before it was recorded", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-compression-"));
        try {
            const file = path.join(dir, "db.sqlite");
            const before = new AppDatabase(
                file,
                migrations.filter((migration) => migration.id < 7)
            );
            before.conversations.insert({id: "c1", title: "Old", settings: "{}", now: 1});
            before.dispose();
            const raw = new Database(file);
            const insert =
                raw.prepare(`INSERT INTO messages (id, conversation_id, seq, role, text, status, stats, parent_id, created_at, updated_at)
                VALUES (?, 'c1', ?, ?, 'x', 'complete', ?, ?, 1, 1)`);
            insert.run("m1", 1, "user", "{}", null);
            insert.run("m2", 2, "assistant", JSON.stringify({policy: "h2o", budgetCells: 256, samples: []}), "m1");
            insert.run("m3", 3, "assistant", "junk", "m1");
            raw.prepare("UPDATE conversations SET leaf_id = 'm2'").run();
            raw.close();

            const after = setup(new AppDatabase(file));
            expect(after.services.conversations.get("c1").messages.map((message) => message.compression)).toEqual([
                null,
                {policy: "h2o", budgetCells: 256, settings: null}
            ]);
            expect(after.services.switchBranch("c1", "m3").messages[1]!.compression).toBeNull();
            after.db.dispose();
        } finally {
            fs.rmSync(dir, {recursive: true, force: true});
        }
    });
});
