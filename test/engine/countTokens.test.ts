// The composer's count (`Engine.countTokens`) on a real tokenizer: the prompt is counted as the engine counts it before
// Full KV refuses a conversation, so the composer blocks exactly the messages the engine would refuse.
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {AppError} from "../../main/AppError.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {ChatTurn, GenerateRequest} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

const modelInfo = (p: string) => ({
    id: "m",
    path: p,
    name: "fixture",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});

describe("counting a message before it is sent", () => {
    const engine = new Engine({threads: 1, loadLlama: loadRuntime});
    const question = "How many of the numbers below one hundred are prime, and which is the largest of them? ".repeat(8);

    beforeAll(async () => {
        const file = await getFixtureModel("tiny-qwen3");
        // Nothing to count with before a model is loaded: null, not an error.
        expect(await engine.countTokens({history: [{role: "user", text: "hi"}], systemPrompt: ""})).toBeNull();
        await engine.loadModel(file, modelInfo(file));
    });
    afterAll(async () => {
        await engine.dispose();
    });

    function request(history: ChatTurn[], cells: number): GenerateRequest {
        return {
            history,
            systemPrompt: "",
            temperature: 0,
            maxTokens: 1,
            seed: 1,
            signal: new AbortController().signal,
            kv: {compression: defaultCompressionSettings, cells},
            onChunk() {}
        };
    }

    it("counts the whole prompt as Full KV's refusal does: refused one cell short of it, read at the budget it names", async () => {
        const history: ChatTurn[] = [{role: "user", text: question}];
        // A first answer teaches the engine the opening the chat wrapper adds; the count includes it from then on.
        await engine.generate(request([{role: "user", text: "hi"}], 1024));
        const counted = (await engine.countTokens({history, systemPrompt: ""}))!;
        expect(counted.promptTokens).toBeGreaterThan(100);
        const refused = engine.generate(request(history, counted.promptTokens + 15));
        await expect(refused).rejects.toBeInstanceOf(AppError);
        await expect(refused).rejects.toMatchObject({
            code: "KV_BUDGET_EXCEEDED",
            message: expect.stringContaining(`This conversation is ${counted.promptTokens.toLocaleString("en-US")} tokens long`)
        });
        const answered = await engine.generate(request(history, counted.promptTokens + 16));
        expect(answered.promptLength).toBe(counted.promptTokens);
    });

    it("gives the message's own share of a longer conversation: its turn, at least its text, less than the whole prompt", async () => {
        const alone = (await engine.countTokens({history: [{role: "user", text: question}], systemPrompt: ""}))!;
        const history: ChatTurn[] = [
            {role: "user", text: "What is 2 + 2?"},
            {role: "assistant", text: "4", thinking: "Two and two make four."},
            {role: "user", text: question}
        ];
        const later = (await engine.countTokens({history, systemPrompt: "You are terse."}))!;
        expect(later.promptTokens).toBeGreaterThan(alone.promptTokens);
        expect(later.messageTokens).toBeLessThan(later.promptTokens);
        // The same message's turn, within a few tokens of its count alone (which also holds the prompt's start).
        expect(Math.abs(later.messageTokens - alone.messageTokens)).toBeLessThanOrEqual(4);
        // A longer message counts more.
        const longer = (await engine.countTokens({
            history: [...history.slice(0, -1), {role: "user", text: question.repeat(2)}],
            systemPrompt: "You are terse."
        }))!;
        expect(longer.messageTokens - later.messageTokens).toBeGreaterThan(later.messageTokens / 2);
    });

    it("refuses a count of a conversation that does not end with a user message", async () => {
        await expect(engine.countTokens({history: [{role: "assistant", text: "4", thinking: ""}], systemPrompt: ""})).rejects.toMatchObject(
            {code: "BAD_REQUEST"}
        );
    });
});
