import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {migrations} from "../../../main/db/migrations.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {FakeEngine} from "./FakeEngine.js";

function setup() {
    const engine = new FakeEngine();
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/x",
        chat: {flushIntervalMs: 0}
    });
    return {engine, services};
}

const texts = (services: AppServices, id: string) => services.conversations.get(id).messages.map((message) => message.text);

describe("message versions and branches", () => {
    it("regenerate keeps the earlier answer as a version; switching shows either, and the next answer reads the one shown", async () => {
        const {engine, services} = setup();
        const c = services.conversations.create();
        engine.answer = ["First"];
        services.chat.send(c.id, "q");
        await services.chat.idle();
        engine.answer = ["Second"];
        const {assistantMessage} = services.chat.regenerate(c.id);
        expect(assistantMessage.siblingIds).toHaveLength(2);
        await services.chat.idle();
        const shown = services.conversations.get(c.id).messages;
        expect(shown.map((message) => message.text)).toEqual(["q", "Second"]);
        expect(shown[1]!.siblingIds.indexOf(shown[1]!.id)).toBe(1);

        const first = shown[1]!.siblingIds[0]!;
        expect(services.switchBranch(c.id, first).messages.map((message) => message.text)).toEqual(["q", "First"]);
        // The next question follows the version shown.
        engine.answer = ["Third"];
        services.chat.send(c.id, "and then?");
        await services.chat.idle();
        expect(texts(services, c.id)).toEqual(["q", "First", "and then?", "Third"]);
        expect(engine.requests.at(-1)!.history).toEqual([
            {role: "user", text: "q"},
            {role: "assistant", text: "First", thinking: "Let me think"},
            {role: "user", text: "and then?"}
        ]);
        // Switching back to the second answer shows its own (empty) continuation.
        expect(services.switchBranch(c.id, shown[1]!.id).messages.map((message) => message.text)).toEqual(["q", "Second"]);
    });

    it("editing a question sends a new version as a branch; the original branch is kept and can be shown again", async () => {
        const {engine, services} = setup();
        const c = services.conversations.create();
        engine.answer = ["A1"];
        services.chat.send(c.id, "first question");
        await services.chat.idle();
        engine.answer = ["A2"];
        services.chat.send(c.id, "second question");
        await services.chat.idle();
        const firstQuestion = services.conversations.get(c.id).messages[0]!;

        engine.answer = ["B1"];
        const edited = services.chat.edit(c.id, firstQuestion.id, "better question");
        expect(edited.userMessage.siblingIds).toEqual([firstQuestion.id, edited.userMessage.id]);
        await services.chat.idle();
        expect(texts(services, c.id)).toEqual(["better question", "B1"]);
        expect(engine.requests.at(-1)!.history).toEqual([{role: "user", text: "better question"}]);

        // The original branch, with everything after it, comes back whole.
        expect(services.switchBranch(c.id, firstQuestion.id).messages.map((message) => message.text)).toEqual([
            "first question",
            "A1",
            "second question",
            "A2"
        ]);
        expect(services.conversations.get(c.id).conversation.messageCount).toBe(6);
    });

    it("switching back to a version shows the path last viewed below it, not the newest versions there", async () => {
        const {engine, services} = setup();
        const c = services.conversations.create();
        engine.answer = ["A1"];
        services.chat.send(c.id, "q");
        await services.chat.idle();
        engine.answer = ["B1"];
        services.chat.send(c.id, "q2");
        await services.chat.idle();
        engine.answer = ["B2"];
        services.chat.regenerate(c.id);
        await services.chat.idle();
        // The first answer to q2 (not the newest) is the one viewed last under q.
        const [question, , , b2] = services.conversations.get(c.id).messages;
        expect(services.switchBranch(c.id, b2!.siblingIds[0]!).messages.map((message) => message.text)).toEqual(["q", "A1", "q2", "B1"]);
        engine.answer = ["C1"];
        const edited = services.chat.edit(c.id, question!.id, "other q").userMessage;
        await services.chat.idle();
        expect(texts(services, c.id)).toEqual(["other q", "C1"]);

        // Back to the first question: its path as last viewed, B1, where the newest answer to q2 is B2.
        expect(services.switchBranch(c.id, question!.id).messages.map((message) => message.text)).toEqual(["q", "A1", "q2", "B1"]);
        expect(services.switchBranch(c.id, edited.id).messages.map((message) => message.text)).toEqual(["other q", "C1"]);
    });

    it("remembers the path each conversation showed when the version memory arrives (migration 3)", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-shown-"));
        try {
            const file = path.join(dir, "ponder.db");
            // Migrations 1 and 2 as shipped, then a question with two answers, the older one shown.
            const [first, second] = migrations;
            const seeded = {
                ...second!,
                sql:
                    second!.sql +
                    `
                INSERT INTO conversations (id, title, created_at, updated_at) VALUES ('c', 'Old', 1, 1);
                INSERT INTO messages (id, conversation_id, seq, role, text, status, created_at, updated_at, parent_id)
                    VALUES ('q', 'c', 1, 'user', 'q', 'complete', 1, 1, NULL),
                           ('a1', 'c', 2, 'assistant', 'a1', 'complete', 2, 2, 'q'),
                           ('a2', 'c', 3, 'assistant', 'a2', 'complete', 3, 3, 'q');
                UPDATE conversations SET leaf_id = 'a1' WHERE id = 'c';`
            };
            new AppDatabase(file, [first!, seeded]).dispose();
            const db = new AppDatabase(file);
            try {
                expect(db.messages.get("q")!.shown_child_id).toBe("a1");
                expect(db.messages.shownChild(db.messages.get("q")!)!.id).toBe("a1");
                expect(db.messages.get("a2")!.shown_child_id).toBeNull();
            } finally {
                db.dispose();
            }
        } finally {
            fs.rmSync(dir, {recursive: true, force: true});
        }
    });

    it("refuses to edit an answer, an unknown message, or to switch while an answer is written", async () => {
        const {services} = setup();
        const c = services.conversations.create();
        services.chat.send(c.id, "q");
        const answer = services.conversations.get(c.id).messages[1]!;
        expect(() => services.switchBranch(c.id, answer.id)).toThrow(/Stop the answer/);
        await services.chat.idle();
        expect(() => services.chat.edit(c.id, answer.id, "x")).toThrow(/Only your own messages/);
        expect(() => services.chat.edit(c.id, "nope", "x")).toThrow(/not in this conversation/);
        expect(() => services.chat.edit(c.id, services.conversations.get(c.id).messages[0]!.id, "  ")).toThrow(/empty/);
        expect(() => services.switchBranch(c.id, "nope")).toThrow(/not in this conversation/);
        expect(texts(services, c.id)).toEqual(["q", "The answer is 4"]);
    });

    it("deletes a message with what follows it, then shows another version or the path before it", async () => {
        const {engine, services} = setup();
        const c = services.conversations.create();
        engine.answer = ["Kangaroo"];
        services.chat.send(c.id, "q1");
        await services.chat.idle();
        engine.answer = ["Wombat"];
        services.chat.send(c.id, "q2");
        await services.chat.idle();
        engine.answer = ["Platypus"];
        services.chat.regenerate(c.id);
        await services.chat.idle();
        let shown = services.conversations.get(c.id).messages;

        // The shown version goes; the other version of that answer is shown.
        expect(services.deleteMessage(c.id, shown[3]!.id).messages.map((m) => m.text)).toEqual(["q1", "Kangaroo", "q2", "Wombat"]);
        shown = services.conversations.get(c.id).messages;
        expect(shown[3]!.siblingIds).toEqual([shown[3]!.id]);
        // A question goes with its answers, from the search index too; the path before it stays.
        expect(services.deleteMessage(c.id, shown[2]!.id).messages.map((m) => m.text)).toEqual(["q1", "Kangaroo"]);
        expect(services.conversations.searchMessages("wombat")).toEqual([]);
        expect(services.conversations.searchMessages("kangaroo")).toHaveLength(1);
        expect(services.conversations.get(c.id).conversation.messageCount).toBe(2);
        expect(services.deleteMessage(c.id, shown[0]!.id).messages).toEqual([]);
        expect(() => services.deleteMessage(c.id, "nope")).toThrow(/not in this conversation/);
    });

    it("forks a conversation at a message: a copy of the path up to it, same settings, the original untouched", async () => {
        const {engine, services} = setup();
        const c = services.conversations.create("Zoo");
        services.conversations.updateSettings(c.id, {temperature: 1.3});
        engine.answer = ["A1"];
        services.chat.send(c.id, "q1");
        await services.chat.idle();
        engine.answer = ["A2"];
        services.chat.send(c.id, "q2");
        await services.chat.idle();
        const original = services.conversations.get(c.id);

        const fork = services.conversations.fork(c.id, original.messages[1]!.id);
        expect(fork).toMatchObject({title: "Zoo (fork)", messageCount: 2});
        const forked = services.conversations.get(fork.id);
        expect(forked.messages.map((m) => [m.role, m.text, m.thinking])).toEqual([
            ["user", "q1", ""],
            ["assistant", "A1", "Let me think"]
        ]);
        expect(forked.messages.every((m) => !original.messages.some((o) => o.id === m.id))).toBe(true);
        expect(forked.settings.temperature).toBe(1.3);
        // It goes on by itself.
        engine.answer = ["F2"];
        services.chat.send(fork.id, "another q2");
        await services.chat.idle();
        expect(texts(services, fork.id)).toEqual(["q1", "A1", "another q2", "F2"]);
        expect(texts(services, c.id)).toEqual(["q1", "A1", "q2", "A2"]);
        expect(() => services.conversations.fork(c.id, "nope")).toThrow(/Fork at a message/);
    });
});
