// `chat:countTokens`: the composer's count of a message against its conversation's KV budget, through the IPC wrapper
// (payload checks, no model) and across the engine process's boundary.
import {describe, expect, it} from "vitest";
import type {ModelInfo} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {EngineProxy} from "../../../main/engine/host/EngineProxy.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {maxCountChars} from "../../../main/services/TokenCountService.js";
import {FakeEngine} from "./FakeEngine.js";
import {memoryEngines} from "./memoryEngines.js";

function setup() {
    const engine = new FakeEngine();
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
        version: "t",
        modelsDir: "/tmp/ponder-test-models"
    });
    const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
    return {engine, services, dispatch};
}

describe("chat:countTokens", () => {
    it("refuses malformed payloads and a text over 4 MiB as data, in words, before the engine is asked", async () => {
        const {engine, dispatch} = setup();
        for (const payload of [
            undefined,
            {},
            {text: 42},
            {text: "hi", extra: true},
            {conversationId: "", text: "hi"},
            {conversationId: 7, text: "hi"}
        ])
            expect(await dispatch("chat:countTokens", payload)).toMatchObject({ok: false, error: {code: "BAD_REQUEST"}});
        const tooLong = await dispatch("chat:countTokens", {text: "x".repeat(maxCountChars + 1)});
        expect(tooLong).toMatchObject({ok: false, error: {code: "BAD_REQUEST", message: expect.stringContaining("at most 4 MiB")}});
        expect(await dispatch("chat:countTokens", {text: "x".repeat(maxCountChars)})).toMatchObject({ok: true});
        expect(engine.counts).toHaveLength(1);
    });

    it("answers null, not an error, while no model is loaded", async () => {
        const {engine, dispatch} = setup();
        engine.inspection = null;
        expect(await dispatch("chat:countTokens", {text: "How many primes are below 100?"})).toEqual({ok: true, value: null});
        expect(engine.counts).toHaveLength(0);
    });

    it("counts a new conversation's message against the default budget (auto: the model's context)", async () => {
        const {dispatch} = setup();
        const result = await dispatch("chat:countTokens", {text: "How many primes are below 100?"});
        // The fake engine: a token per word and 4 per turn.
        expect(result).toEqual({ok: true, value: {messageTokens: 10, promptTokens: 10, policy: "full", budgetCells: 4096}});
    });

    it("counts against the conversation's own policy and budget, with its system prompt and earlier turns in the prompt", async () => {
        const {engine, services, dispatch} = setup();
        const conversation = services.conversations.create("c");
        services.conversations.updateSettings(conversation.id, {
            systemPrompt: "Be brief",
            compression: {
                ...services.settings.get().defaultConversationSettings.compression,
                policy: "lethe",
                budget: {kind: "cells", cells: 512}
            }
        });
        services.chat.send(conversation.id, "first question here");
        await services.chat.idle();
        const result = await dispatch("chat:countTokens", {conversationId: conversation.id, text: "and a second one"});
        expect(result).toMatchObject({ok: true, value: {messageTokens: 8, policy: "lethe", budgetCells: 512}});
        const request = engine.counts.at(-1)!;
        expect(request.systemPrompt).toBe("Be brief");
        expect(request.history.map((turn) => turn.role)).toEqual(["user", "assistant", "user"]);
        expect(request.history.at(-1)).toEqual({role: "user", text: "and a second one"});
        // 2 (system) + 7 (first question) + 11 (the fake answer and thought) + 8 (this message).
        expect((result as {value: {promptTokens: number}}).value.promptTokens).toBe(28);
    });

    it("refuses an unknown conversation with NOT_FOUND", async () => {
        const {dispatch} = setup();
        expect(await dispatch("chat:countTokens", {conversationId: "missing", text: "hi"})).toMatchObject({
            ok: false,
            error: {code: "NOT_FOUND"}
        });
    });

    it("is answered by the engine process, and without starting one while no model is loaded", async () => {
        const {children, spawn} = memoryEngines();
        const proxy = new EngineProxy({spawn});
        const request = {history: [{role: "user" as const, text: "two words"}], systemPrompt: ""};
        expect(await proxy.countTokens(request)).toBeNull();
        expect(children).toHaveLength(0);
        const model: ModelInfo = {
            id: "a",
            path: "/models/a.gguf",
            name: "a",
            sizeBytes: 1,
            architecture: "llama",
            contextLength: 4096,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        };
        await proxy.loadModel(model.path, model);
        expect(await proxy.countTokens(request)).toEqual({messageTokens: 6, promptTokens: 6});
        expect(children[0]!.sent.some((message) => message.type === "call" && message.method === "countTokens")).toBe(true);
        await proxy.dispose();
    });
});
