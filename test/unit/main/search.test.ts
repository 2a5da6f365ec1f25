import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {describe, expect, it} from "vitest";
import {migrations} from "../../../main/db/migrations.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {searchTerms} from "../../../main/services/ConversationService.js";
import {FakeEngine} from "./FakeEngine.js";

function setup() {
    const engine = new FakeEngine();
    const db = new AppDatabase(":memory:");
    const services = new AppServices(db, engine.asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x", chat: {flushIntervalMs: 0}});
    return {engine, db, services};
}

describe("full-text search over messages", () => {
    it("finds words in the text and in the thinking, by prefix, with the match marked and the conversation named", async () => {
        const {engine, services} = setup();
        const primes = services.conversations.create("Primes");
        engine.thought = ["Consider", " the", " sieve", " of", " Eratosthenes"];
        engine.answer = ["The", " primes", " below", " ten:", " 2,", " 3,", " 5,", " 7"];
        services.chat.send(primes.id, "Which numbers are prime?");
        await services.chat.idle();
        const other = services.conversations.create("Other");
        engine.thought = ["Nothing"];
        engine.answer = ["Café", " au", " lait"];
        services.chat.send(other.id, "Order a drink");
        await services.chat.idle();

        const inThinking = services.conversations.searchMessages("eratos");
        expect(inThinking).toHaveLength(1);
        expect(inThinking[0]).toMatchObject({
            conversationId: primes.id,
            conversationTitle: "Primes",
            role: "assistant",
            field: "thinking",
            terms: ["eratos"]
        });
        expect(inThinking[0]!.snippet).toContain("\u0002Eratosthenes\u0003");

        const inText = services.conversations.searchMessages("PRIMES below");
        expect(inText.map((hit) => hit.field)).toEqual(["text"]);
        expect(inText[0]!.snippet).toContain("\u0002primes\u0003 \u0002below\u0003");

        expect(services.conversations.searchMessages("prime")[0]).toMatchObject({role: "user", field: "text"});
        expect(services.conversations.searchMessages("cafe")[0]?.conversationTitle).toBe("Other");
        expect(services.conversations.searchMessages("sieve drink")).toEqual([]);
    });

    it("treats any text as words, never as query syntax", () => {
        const {services} = setup();
        expect(searchTerms(`"unbalanced AND (x OR* NEAR/2 y`)).toEqual(["unbalanced", "AND", "x", "OR", "NEAR", "2", "y"]);
        for (const query of [`"`, "*", "AND", "a:b", "(", "-x", "^", "   "])
            expect(() => services.conversations.searchMessages(query)).not.toThrow();
        expect(services.conversations.searchMessages("   ")).toEqual([]);
    });

    it("indexes an answer when it stops streaming, follows edits and deletions, and starts from the messages already stored", async () => {
        const {db, services} = setup();
        const c = services.conversations.create();
        const row = db.messages.insert({id: "m1", conversation_id: c.id, role: "assistant", text: "", status: "streaming", created_at: 1});
        db.messages.appendProgress(row.id, {
            text: "halfway there",
            thinking: "",
            thinking_tokens: 0,
            answer_tokens: 2,
            thinking_ms: 0,
            total_ms: 1
        });
        expect(services.conversations.searchMessages("halfway")).toEqual([]);
        db.messages.markInterrupted(3);
        expect(services.conversations.searchMessages("halfway")).toHaveLength(1);
        db.messages.finish(
            row.id,
            {
                text: "all the way",
                thinking: "",
                thinking_tokens: 0,
                answer_tokens: 3,
                thinking_ms: 0,
                total_ms: 1,
                status: "complete",
                prompt_tokens: 0,
                error: null,
                stats: "{}",
                cut_reason: null,
                cut_tokens: null
            },
            4
        );
        expect(services.conversations.searchMessages("halfway")).toEqual([]);
        expect(services.conversations.searchMessages("way")).toHaveLength(1);
        await services.deleteConversation(c.id);
        expect(services.conversations.searchMessages("way")).toEqual([]);
    });

    it("indexes the messages a database held before the search index existed, and makes them a path", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-search-"));
        try {
            const file = path.join(dir, "ponder.db");
            // The first migration as shipped, with a conversation written by the version before this one.
            const first = migrations.find((migration) => migration.id === 1)!;
            const seeded = {
                ...first,
                sql:
                    first.sql +
                    `
                INSERT INTO conversations (id, title, created_at, updated_at) VALUES ('c', 'Old', 1, 1);
                INSERT INTO messages (id, conversation_id, seq, role, text, status, created_at, updated_at)
                    VALUES ('m1', 'c', 1, 'user', 'an ancient question', 'complete', 1, 1),
                           ('m2', 'c', 2, 'assistant', 'an old answer', 'complete', 2, 2);`
            };
            new AppDatabase(file, [seeded]).dispose();
            const after = new AppDatabase(file);
            const services = new AppServices(after, new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: dir});
            expect(services.conversations.searchMessages("ancient")).toMatchObject([{messageId: "m1", conversationTitle: "Old"}]);
            const detail = services.conversations.get("c");
            expect(detail.messages.map((message) => message.id)).toEqual(["m1", "m2"]);
            expect(after.messages.get("m2")?.parent_id).toBe("m1");
            after.dispose();
        } finally {
            fs.rmSync(dir, {recursive: true, force: true});
        }
    });
});
