// A calibration that reads a model's own conversations: every answer records the model file that wrote it; the texts
// are each conversation's shown path up to the first answer another model (or no known model) wrote; the app says how
// much there is, refuses too little in words, and hands the texts to the engine's job under the "conversations" set.
import os from "node:os";
import path from "node:path";
import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {conversationTexts, minimumConversations} from "../../../main/services/conversationTexts.js";
import {getFixtureModel} from "../../fixtures/gguf/fixtures.js";
import {FakeEngine} from "./FakeEngine.js";
import {until} from "./memoryEngines.js";

async function setup() {
    const engine = new FakeEngine();
    const db = new AppDatabase(":memory:");
    const services = new AppServices(db, engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/x",
        chat: {flushIntervalMs: 0},
        calibration: {workDir: path.join(os.tmpdir(), "ponder-calibration-conversations"), progressMs: 0}
    });
    const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
    const model = await services.models.add(await getFixtureModel("tiny-qwen3"));
    // the engine has this model loaded: answers record its path
    engine.inspection = {...engine.inspection!, path: model.path};
    return {engine, db, services, dispatch, model};
}

async function converse(services: AppServices, questions: string[], systemPrompt = ""): Promise<string> {
    const c = services.conversations.create("c");
    if (systemPrompt !== "") services.conversations.updateSettings(c.id, {systemPrompt});
    for (const question of questions) {
        services.chat.send(c.id, question);
        await services.chat.idle();
    }
    return c.id;
}

describe("calibration from a model's conversations", () => {
    it("records the model on every answer and reads each conversation's exchanges as one text", async () => {
        const {engine, db, services, model} = await setup();
        const id = await converse(services, ["first", "second"], "Be brief.");
        const rows = db.messages.listByConversation(id);
        expect(rows.map((row) => [row.role, row.model_path])).toEqual([
            ["user", null],
            ["assistant", model.path],
            ["user", null],
            ["assistant", model.path]
        ]);
        const found = conversationTexts(db, model.path);
        expect(found.conversations).toBe(1);
        expect(found.exchanges).toBe(2);
        expect(found.texts[0]!.system).toBe("Be brief.");
        expect(found.texts[0]!.turns.map((turn) => turn.user)).toEqual(["first", "second"]);
        const answer = rows[1]!;
        expect(found.texts[0]!.turns[0]).toEqual({user: "first", thought: answer.thinking, answer: answer.text});
        expect(answer.thinking.length + answer.text.length).toBeGreaterThan(0);
        expect(found.tokens).toBe(
            rows[1]!.thinking_tokens + rows[1]!.answer_tokens + rows[3]!.thinking_tokens + rows[3]!.answer_tokens + 4
        );
        // another model's conversations are not this model's
        expect(conversationTexts(db, "/other.gguf").conversations).toBe(0);
        void engine;
    });

    it("stops a text at the first answer another model wrote: what follows was written after another's text", async () => {
        const {engine, db, services, model} = await setup();
        const c = services.conversations.create("mixed");
        services.chat.send(c.id, "mine");
        await services.chat.idle();
        engine.inspection = {...engine.inspection!, path: "/other.gguf"};
        services.chat.send(c.id, "theirs");
        await services.chat.idle();
        engine.inspection = {...engine.inspection!, path: model.path};
        services.chat.send(c.id, "mine again");
        await services.chat.idle();
        const found = conversationTexts(db, model.path);
        expect(found.texts.map((text) => text.turns.map((turn) => turn.user))).toEqual([["mine"]]);
        // a conversation that starts with another model's answer gives nothing
        expect(conversationTexts(db, "/other.gguf").conversations).toBe(0);
    });

    it("says how much there is, refuses too little in words, and hands the texts to the engine's job", async () => {
        const {engine, services, dispatch, model} = await setup();
        for (let i = 0; i < minimumConversations - 1; i++) await converse(services, [`question ${i}`]);
        const few = await dispatch("models:calibrationConversations", {id: model.id});
        expect(few).toMatchObject({ok: true, value: {conversations: minimumConversations - 1, exchanges: minimumConversations - 1}});
        expect(few.ok && (few.value as {minimum: number}).minimum).toBe(minimumConversations);
        const refused = await dispatch("models:calibrate", {id: model.id, source: "conversations"});
        expect(refused).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        expect(!refused.ok && refused.error.message).toMatch(/3 conversations of its own to read, at least 4 are needed/);
        expect(engine.calibrations).toHaveLength(0);

        await converse(services, ["the last"]);
        const started = await dispatch("models:calibrate", {id: model.id, source: "conversations"});
        expect(started).toMatchObject({ok: true, value: {state: "running"}});
        await until(() => services.calibration.status?.state !== "running");
        expect(engine.calibrations).toHaveLength(1);
        expect(engine.calibrations[0]!.promptSet).toBe("conversations");
        expect(engine.calibrations[0]!.texts?.map((text) => text.turns[0]!.user).sort()).toEqual(
            ["question 0", "question 1", "question 2", "the last"].sort()
        );
        // a bad source is refused at the boundary
        expect(await dispatch("models:calibrate", {id: model.id, source: "elsewhere"} as never)).toMatchObject({ok: false});
    });
});
