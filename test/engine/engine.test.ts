import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {AppError} from "../../main/AppError.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {ChatTurn, GenerateRequest, GenerationChunk} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";

const fullKv = {compression: defaultCompressionSettings, cells: 2048};
import {writeCorruptModels} from "../fixtures/gguf/corruptModels.js";
import {getFixtureModel, writeCorruptFixtures} from "../fixtures/gguf/fixtures.js";

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

type CollectOptions = {seed?: number; maxTokens?: number; abortAfter?: number; continueLast?: boolean} & Partial<
    Pick<GenerateRequest, "topK" | "topP" | "minP" | "repeatPenalty" | "thinking" | "temperature">
>;

async function collect(engine: Engine, history: ChatTurn[], options: CollectOptions = {}) {
    const chunks: GenerationChunk[] = [];
    const abort = new AbortController();
    const result = await engine.generate({
        history,
        systemPrompt: "",
        temperature: options.temperature ?? 0.8,
        topK: options.topK,
        topP: options.topP,
        minP: options.minP,
        repeatPenalty: options.repeatPenalty,
        thinking: options.thinking,
        maxTokens: options.maxTokens ?? 400,
        seed: options.seed ?? 1,
        continueLast: options.continueLast,
        signal: abort.signal,
        kv: fullKv,
        onChunk(chunk) {
            chunks.push(chunk);
            if (options.abortAfter != null && chunks.length >= options.abortAfter) abort.abort();
        }
    });
    const text = (segment: GenerationChunk["segment"]) =>
        chunks
            .filter((c) => c.segment === segment)
            .map((c) => c.text)
            .join("");
    const tokens = (segment: GenerationChunk["segment"]) =>
        chunks.filter((c) => c.segment === segment).reduce((sum, c) => sum + c.tokens, 0);
    return {
        result,
        chunks,
        thought: text("thought"),
        answer: text("answer"),
        thoughtTokens: tokens("thought"),
        answerTokens: tokens("answer")
    };
}

describe("Engine on generated models", () => {
    const engine = new Engine({loadLlama: loadRuntime, threads: 1});
    let dir: string;

    beforeAll(() => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-engine-"));
    });
    afterAll(async () => {
        await engine.dispose();
        fs.rmSync(dir, {recursive: true, force: true});
    });

    it("says which llama.cpp build it runs", async () => {
        const {build} = await engine.runtime();
        expect(build.llamaCppRelease).toMatch(/\w/);
        expect(["local", "prebuilt"]).toContain(build.kind);
        expect(engine.status.build).toEqual(build);
    });

    it("loads GQA (qwen2) and MQA (llama) shapes and reads their metadata", async () => {
        for (const name of ["tiny-mqa", "tiny-qwen2"] as const) {
            const file = await getFixtureModel(name);
            const inspection = await engine.loadModel(file, modelInfo(file));
            expect(inspection.layers).toBeGreaterThan(0);
            expect(inspection.headCountKv).toBeLessThan(inspection.headCount!);
            expect(engine.status.state).toBe("ready");
        }
    });

    it("streams the thinking and then the answer as separate segments", async () => {
        const run = await collect(engine, [{role: "user", text: "What is 12 times 7?"}], {seed: 3});
        expect(run.thoughtTokens).toBeGreaterThan(0);
        expect(run.answerTokens).toBeGreaterThan(0);
        const firstAnswer = run.chunks.findIndex((c) => c.segment === "answer");
        expect(run.chunks.slice(firstAnswer).every((c) => c.segment === "answer")).toBe(true);
        expect(run.thought).not.toContain("<think>");
        expect(run.answer).not.toContain("</think>");
        expect(run.result.promptTokens).toBeGreaterThan(5);
    });

    it("is repeatable with a fixed seed", async () => {
        const a = await collect(engine, [{role: "user", text: "Count to five"}], {seed: 11, maxTokens: 60});
        const b = await collect(engine, [{role: "user", text: "Count to five"}], {seed: 11, maxTokens: 60});
        expect(b.thought + b.answer).toBe(a.thought + a.answer);
    });

    it("stops when aborted and keeps what it produced", async () => {
        const run = await collect(engine, [{role: "user", text: "Think at length"}], {abortAfter: 5, maxTokens: 1000});
        expect(run.result.stopReason).toBe("abort");
        expect(run.chunks.length).toBeGreaterThanOrEqual(5);
        expect(run.chunks.length).toBeLessThan(20);
    });

    it("continues a conversation across turns", async () => {
        const first = await collect(engine, [{role: "user", text: "Remember the number 42."}], {seed: 4});
        const second = await collect(
            engine,
            [
                {role: "user", text: "Remember the number 42."},
                {role: "assistant", text: first.answer, thinking: first.thought},
                {role: "user", text: "Which number?"}
            ],
            {seed: 4}
        );
        expect(second.thoughtTokens + second.answerTokens).toBeGreaterThan(0);
    });

    it("continues an answer cut by max tokens inside its thought: the thought goes on, then closes and the answer comes", async () => {
        const question: ChatTurn = {role: "user", text: "What is 12 times 7?"};
        const cut = await collect(engine, [question], {seed: 3, maxTokens: 3});
        expect(cut.result.stopReason).toBe("maxTokens");
        expect(cut.thoughtTokens).toBeGreaterThan(0);
        expect(cut.thoughtTokens).toBeLessThanOrEqual(3);
        expect(cut.answerTokens).toBe(0);

        const rest = await collect(engine, [question, {role: "assistant", thinking: cut.thought, text: ""}], {seed: 3, continueLast: true});
        expect(rest.result.stopReason).toBe("eogToken");
        expect(rest.chunks[0]?.segment).toBe("thought");
        expect(rest.thoughtTokens).toBeGreaterThan(0);
        expect(rest.answerTokens).toBeGreaterThan(0);
        expect(rest.thought).not.toContain("<think>");
        // The question is not read again: its tokens are still in the context.
        expect(rest.result.promptTokens).toBeLessThan(cut.result.promptTokens);

        // A cut inside the answer goes on as answer.
        const answerCut = await collect(engine, [question], {seed: 5, maxTokens: 400});
        const inAnswer = await collect(
            engine,
            [question, {role: "assistant", thinking: answerCut.thought, text: answerCut.answer.slice(0, 3)}],
            {seed: 5, continueLast: true}
        );
        expect(inAnswer.thoughtTokens).toBe(0);
        expect(inAnswer.answerTokens).toBeGreaterThan(0);

        await expect(collect(engine, [question], {continueLast: true})).rejects.toMatchObject({code: "BAD_REQUEST"});
    });

    it("passes the sampler settings: top-k 1 answers the same whatever the seed, a wide top-k does not", async () => {
        const question: ChatTurn = {role: "user", text: "Name a colour"};
        const a = await collect(engine, [question], {seed: 1, topK: 1, maxTokens: 40});
        const b = await collect(engine, [question], {seed: 2, topK: 1, maxTokens: 40});
        expect(b.thought + b.answer).toBe(a.thought + a.answer);
        const c = await collect(engine, [question], {seed: 1, topK: 200, topP: 1, minP: 0, maxTokens: 40});
        const d = await collect(engine, [question], {seed: 2, topK: 200, topP: 1, minP: 0, maxTokens: 40});
        expect(d.thought + d.answer).not.toBe(c.thought + c.answer);
    });

    it("leaves the thought out with thinking off, on a template with thought segments", async () => {
        const run = await collect(engine, [{role: "user", text: "What is 12 times 7?"}], {
            seed: 3,
            thinking: {enabled: false, budget: null}
        });
        expect(run.result.stopReason).toBe("eogToken");
        expect(run.thoughtTokens).toBe(0);
        expect(run.chunks.every((chunk) => chunk.segment === "answer")).toBe(true);
        expect(run.answerTokens).toBeGreaterThan(0);
        expect(run.answer).not.toContain("</think>");
    });

    it("closes the thought at the thinking budget, then answers", async () => {
        const endless = await getFixtureModel("endless");
        await engine.loadModel(endless, modelInfo(endless));
        try {
            const free = await collect(engine, [{role: "user", text: "Think"}], {seed: 5, maxTokens: 120});
            expect(free.result.stopReason).toBe("maxTokens");
            expect(free.answerTokens).toBe(0);
            const run = await collect(engine, [{role: "user", text: "Think"}], {
                seed: 5,
                maxTokens: 300,
                thinking: {enabled: true, budget: 30}
            });
            expect(run.thoughtTokens).toBeGreaterThan(20);
            expect(run.thoughtTokens).toBeLessThanOrEqual(30);
            expect(run.answerTokens).toBeGreaterThan(0);
        } finally {
            const qwen = await getFixtureModel("tiny-qwen2");
            await engine.loadModel(qwen, modelInfo(qwen));
        }
    });

    // node-llama-cpp closes the thought by erasing the tokens after the thought's end and writing them again; when the
    // cells just before them were evicted, the batch starts after a gap in the positions (native/patches/0011)
    it.each(["lethe", "streamingllm", "h2o"] as const)(
        "closes the thought at the thinking budget while %s prunes, then answers",
        async (policy) => {
            const endless = await getFixtureModel("endless");
            await engine.loadModel(endless, modelInfo(endless));
            try {
                let thoughtTokens = 0;
                let answerTokens = 0;
                let evicted = 0;
                const result = await engine.generate({
                    history: [{role: "user", text: "Think"}],
                    systemPrompt: "",
                    temperature: 0.8,
                    maxTokens: 300,
                    seed: 5,
                    thinking: {enabled: true, budget: 120},
                    signal: new AbortController().signal,
                    kv: {compression: {...defaultCompressionSettings, policy, pruneEvery: 16}, cells: 64},
                    onChunk(chunk) {
                        if (chunk.segment === "thought") thoughtTokens += chunk.tokens;
                        else answerTokens += chunk.tokens;
                    },
                    onSample(sample) {
                        evicted = Math.max(evicted, sample.tokensEvicted);
                    }
                });
                expect(["eogToken", "maxTokens"]).toContain(result.stopReason);
                expect(thoughtTokens).toBeGreaterThan(100);
                expect(thoughtTokens).toBeLessThanOrEqual(120);
                expect(answerTokens).toBeGreaterThan(0);
                expect(evicted).toBeGreaterThan(100);
            } finally {
                const qwen = await getFixtureModel("tiny-qwen2");
                await engine.loadModel(qwen, modelInfo(qwen));
            }
        }
    );

    it("refuses a cache type llama.cpp cannot make for the model in words, before llama.cpp fails, and still answers", async () => {
        const ask = (kvType: "q8_0" | "q4_0", flashAttention: boolean) =>
            engine.generate({
                history: [{role: "user", text: "a"}],
                systemPrompt: "",
                temperature: 0.8,
                maxTokens: 5,
                signal: new AbortController().signal,
                kv: {...fullKv, compression: {...fullKv.compression, kvType, kvTypeV: kvType, flashAttention}},
                onChunk() {}
            });
        // tiny-qwen2 is loaded: 16-value heads, not whole 32-value blocks.
        for (const kvType of ["q8_0", "q4_0"] as const) {
            await expect(ask(kvType, false)).rejects.toMatchObject({
                code: "BAD_REQUEST",
                message: expect.stringMatching(/needs flash attention/)
            });
            await expect(ask(kvType, true)).rejects.toMatchObject({
                code: "BAD_REQUEST",
                message: expect.stringMatching(/heads are 16 values wide.*blocks of 32/)
            });
        }
        const wide = await getFixtureModel("tiny-qwen3");
        const previous = engine.status.model!;
        await engine.loadModel(wide, modelInfo(wide));
        try {
            const quantized = await ask("q8_0", true);
            expect(quantized.stopReason).toBeDefined();
        } finally {
            await engine.loadModel(previous.path, previous);
        }
        const f16 = await collect(engine, [{role: "user", text: "a"}], {maxTokens: 5});
        expect(f16.chunks.length).toBeGreaterThan(0);
    });

    it("refuses a second generation while one runs", async () => {
        const abort = new AbortController();
        const running = engine.generate({
            history: [{role: "user", text: "a"}],
            systemPrompt: "",
            temperature: 0.8,
            maxTokens: 50,
            signal: abort.signal,
            kv: fullKv,
            onChunk() {}
        });
        await expect(
            engine.generate({
                history: [{role: "user", text: "b"}],
                systemPrompt: "",
                temperature: 0.8,
                maxTokens: 5,
                signal: abort.signal,
                kv: fullKv,
                onChunk() {}
            })
        ).rejects.toMatchObject({code: "BUSY"});
        abort.abort();
        await running;
    });

    it("gives a clear error for a missing, empty, non-GGUF or truncated file", async () => {
        const corrupt = await writeCorruptFixtures(dir);
        const cases: [string, RegExp][] = [
            [path.join(dir, "missing.gguf"), /No model file/],
            [corrupt.empty, /not a GGUF/],
            [corrupt.notGguf, /not a GGUF/],
            [corrupt.truncated, /truncated/]
        ];
        for (const [file, message] of cases) {
            const error = await engine.loadModel(file, modelInfo(file)).catch((err: unknown) => err);
            expect(error).toBeInstanceOf(AppError);
            expect((error as AppError).code).toBe("MODEL_INVALID");
            expect((error as AppError).message).toMatch(message);
        }
        // A failed load leaves the loaded model in place.
        expect(engine.status.state).toBe("ready");
    });

    it("refuses every model of the corrupt-model suite with MODEL_INVALID, and the loaded model still answers", async () => {
        const corrupt = await writeCorruptModels(path.join(dir, "suite"), await getFixtureModel("tiny-qwen2"));
        expect(corrupt.length).toBeGreaterThanOrEqual(25);
        const loaded = engine.status.model;
        for (const model of corrupt) {
            const error = await engine.loadModel(model.path, modelInfo(model.path)).catch((err: unknown) => err);
            expect(error, model.name).toBeInstanceOf(AppError);
            expect((error as AppError).code, model.name).toBe("MODEL_INVALID");
            expect((error as AppError).message, model.name).toMatch(model.error);
        }
        expect(engine.status.state).toBe("ready");
        expect(engine.status.model).toEqual(loaded);
        const {answer, thought} = await collect(engine, [{role: "user", text: "still there?"}], {maxTokens: 40});
        expect(answer.length + thought.length).toBeGreaterThan(0);
    });
});
