// A pruned greedy generation is a function of its inputs: the same model, prompt, settings and thread count give the
// same tokens whatever ran before in the context and however busy the machine is.
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings, KvSample, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {ChatTurn, GenerationChunk} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {underLoad} from "./underLoad.js";

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

/** A question longer than the budget: it is pruned while it is read. */
const question: ChatTurn[] = [
    {role: "user", text: "Think about the numbers one two three four five six seven eight nine ten. ".repeat(12)}
];
const other: ChatTurn[] = [{role: "user", text: "Something else entirely, to leave another context behind. ".repeat(4)}];
const short: ChatTurn[] = [{role: "user", text: "Hello there."}];

type Run = {chunks: string[]; tokens: number; promptTokens: number; last: KvSample};

async function run(engine: Engine, policy: PolicyId, history: ChatTurn[], cells: number, maxTokens = 200): Promise<Run> {
    const compression: CompressionSettings = {...defaultCompressionSettings, policy, pruneEvery: 16};
    const chunks: string[] = [];
    const samples: KvSample[] = [];
    let tokens = 0;
    const result = await engine.generate({
        history,
        systemPrompt: "",
        temperature: 0,
        seed: 1,
        maxTokens,
        signal: new AbortController().signal,
        kv: {compression, cells},
        onChunk(chunk: GenerationChunk) {
            chunks.push(`${chunk.segment}:${chunk.text}`);
            tokens += chunk.tokens;
        },
        onSample: (sample) => void samples.push(sample)
    });
    return {chunks, tokens, promptTokens: result.promptTokens, last: samples.at(-1)!};
}

describe("pruned generation is deterministic", () => {
    const engine = new Engine({loadLlama: loadRuntime, threads: 1});

    beforeAll(async () => {
        const model = await getFixtureModel("endless");
        await engine.loadModel(model, modelInfo(model));
    });
    afterAll(() => engine.dispose());

    for (const [policy, cells] of [
        ["lethe", 128],
        ["h2o", 100],
        ["refreekv", 96]
    ] as const) {
        it(`${policy} at ${cells} cells: the same tokens on a fresh context, again, after another request and under load`, async () => {
            // A fresh context: another budget first makes the engine create one.
            await run(engine, policy, other, cells + 1, 8);
            const first = await run(engine, policy, question, cells);
            expect(first.last.pruneRounds).toBeGreaterThan(3);
            expect(first.last.tokensEvicted).toBeGreaterThan(first.tokens);

            const again = await run(engine, policy, question, cells);
            await run(engine, policy, other, cells, 40);
            const afterOther = await run(engine, policy, question, cells);
            const loaded = await underLoad(() => run(engine, policy, question, cells));
            await run(engine, "full", short, cells, 20);
            const afterFull = await run(engine, policy, question, cells);

            for (const [label, repeat] of Object.entries({again, afterOther, loaded, afterFull})) {
                expect(repeat.chunks, label).toEqual(first.chunks);
                // The whole prompt is read again: a context pruned by an earlier request is never a cached prefix.
                expect(repeat.promptTokens).toBe(first.promptTokens);
                expect(repeat.last.cellsLive).toBe(first.last.cellsLive);
                expect(repeat.last.tokensEvicted).toBe(first.last.tokensEvicted);
                expect(repeat.last.pruneRounds).toBe(first.last.pruneRounds);
            }
        });
    }
});
