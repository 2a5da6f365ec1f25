import {afterAll, describe, expect, it} from "vitest";
import type {CompressionSettings, KvSample, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {ChatTurn} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {resolveCombine} from "../../main/engine/policies/decide.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

const budget = 128;
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

async function run(engine: Engine, policy: PolicyId, history: ChatTurn[], maxTokens: number, cells = budget) {
    const compression: CompressionSettings = {...defaultCompressionSettings, policy, pruneEvery: 16};
    const samples: KvSample[] = [];
    let tokens = 0;
    let thought = "";
    let answer = "";
    const result = await engine.generate({
        history,
        systemPrompt: "",
        temperature: 0.8,
        maxTokens,
        seed: 9,
        signal: new AbortController().signal,
        kv: {compression, cells},
        onChunk(chunk) {
            tokens += chunk.tokens;
            if (chunk.segment === "thought") thought += chunk.text;
            else answer += chunk.text;
        },
        onSample(sample) {
            samples.push(sample);
        }
    });
    return {result, samples, tokens, thought, answer};
}

describe("compression policies on a generated model", () => {
    const engine = new Engine({loadLlama: loadRuntime, threads: 1});
    afterAll(() => engine.dispose());

    it("runs on the patched build", async () => {
        const {build} = await engine.runtime();
        expect(build.patched).toBe(true);
        const model = await getFixtureModel("endless");
        await engine.loadModel(model, modelInfo(model));
    });

    it("stops Full KV at its budget with a budget stop, not a failure", async () => {
        const {result, tokens, samples} = await run(engine, "full", [{role: "user", text: "Think."}], 600);
        expect(result.stopReason).toBe("budget");
        expect(tokens).toBeLessThan(budget);
        expect(samples.at(-1)!.cellsLive).toBeLessThanOrEqual(budget);
        expect(samples.at(-1)!.pruneRounds).toBe(0);
        // A token limit short of the budget ends it, not only the tokens as they arrive: node-llama-cpp can hold a
        // few back (a partial stop trigger) while the context fills, and then shifts the context, which fails.
        expect(result.promptTokens + tokens).toBeLessThanOrEqual(budget - 12);
    });

    for (const policy of ["streamingllm", "h2o", "lethe", "refreekv", "leankv"] as const) {
        it(`${policy}: generates 4 x the budget without exceeding it, with consistent stats`, async () => {
            // A fresh context per policy (the cell count differs by one) so the counters start at zero.
            const cells = budget + ["streamingllm", "h2o", "lethe", "refreekv", "leankv"].indexOf(policy) + 1;
            const {result, samples, tokens} = await run(
                engine,
                policy,
                [{role: "user", text: "Think for a long time."}],
                4 * budget + 40,
                cells
            );
            expect(result.stopReason).toBe("maxTokens");
            expect(tokens).toBeGreaterThanOrEqual(4 * budget);
            expect(samples.length).toBeGreaterThan(10);
            for (const sample of samples) {
                expect(sample.cellsLive).toBeLessThanOrEqual(cells);
                expect(sample.cellsLive).toBeLessThanOrEqual(sample.cellsAllocated);
                expect(sample.liveBytes).toBeLessThanOrEqual(sample.allocatedBytes);
            }
            const last = samples.at(-1)!;
            // on per-head cells (H2O's own mode) a cell's heads hold different tokens: one is evicted once no head holds it
            if (resolveCombine("auto", policy) === "heads")
                expect(last.cellsLive + last.tokensEvicted).toBeLessThanOrEqual(last.tokensSeen);
            else expect(last.cellsLive + last.tokensEvicted).toBe(last.tokensSeen);
            expect(last.pruneRounds).toBeGreaterThan(0);
            expect(last.tokensEvicted).toBeGreaterThan(2 * budget);
            expect(last.fullBytes).toBeGreaterThan(3 * last.liveBytes);
            expect(samples.flatMap((sample) => sample.rounds ?? [])).toHaveLength(last.pruneRounds);
            expect(samples.findLast((sample) => sample.tokens != null)?.tokens?.layers).toBe(4);
        });
    }

    it("rebuilds a stored conversation longer than the budget into a new context, with progress", async () => {
        const long = "The quick brown fox jumps over the lazy dog while counting primes. ".repeat(40);
        const history: ChatTurn[] = [
            {role: "user", text: "Tell me a story."},
            {role: "assistant", text: long, thinking: long},
            {role: "user", text: "Again."},
            {role: "assistant", text: long, thinking: ""},
            {role: "user", text: "Once more, shorter."}
        ];
        const progress: number[] = [];
        const compression: CompressionSettings = {...defaultCompressionSettings, policy: "h2o", pruneEvery: 16};
        const samples: KvSample[] = [];
        let tokens = 0;
        await engine.generate({
            history,
            systemPrompt: "",
            temperature: 0.8,
            maxTokens: 40,
            seed: 3,
            signal: new AbortController().signal,
            kv: {compression, cells: 256},
            onChunk: (chunk) => void (tokens += chunk.tokens),
            onSample: (sample) => void samples.push(sample),
            onRebuild: (p) => void progress.push(p)
        });
        expect(progress[0]).toBe(0);
        expect(progress.at(-1)).toBe(1);
        expect(progress.length).toBeGreaterThan(3);
        expect(tokens).toBeGreaterThan(0);
        expect(samples.at(-1)!.tokensSeen).toBeGreaterThan(600);
        for (const sample of samples) expect(sample.cellsLive).toBeLessThanOrEqual(256);

        // Full KV cannot hold it: a clear refusal, not a crash.
        await expect(
            engine.generate({
                history,
                systemPrompt: "",
                temperature: 0.8,
                maxTokens: 40,
                signal: new AbortController().signal,
                kv: {compression: {...compression, policy: "full"}, cells: 300},
                onChunk() {}
            })
        ).rejects.toThrow(/more than the KV budget of 300 cells/);
    });

    it("reports each answer's own evictions and rounds, not what earlier answers in the same context did", async () => {
        const cells = 512;
        const long = await run(engine, "lethe", [{role: "user", text: "Think for a long time."}], 3 * cells, cells);
        const before = long.samples.at(-1)!;
        expect(before.tokensEvicted).toBeGreaterThan(cells);
        expect(before.cellsLive + before.tokensEvicted).toBe(before.tokensSeen);

        // A short answer in the same context: nothing is pruned, so nothing is evicted.
        const short = await run(engine, "lethe", [{role: "user", text: "Hi."}], 40, cells);
        const last = short.samples.at(-1)!;
        expect(last.tokensSeen).toBeLessThan(100);
        expect(last.tokensEvicted).toBe(0);
        expect(last.liveBytes).toBe(last.fullBytes);
        for (const sample of short.samples) expect(sample.tokensEvicted).toBeLessThanOrEqual(sample.tokensSeen);

        // Again a long one: its count is its own, not added to the first's.
        const again = await run(engine, "lethe", [{role: "user", text: "Think for a long time."}], 3 * cells, cells);
        expect(again.samples.at(-1)!.tokensEvicted).toBe(before.tokensEvicted);
        expect(again.samples.at(-1)!.pruneRounds).toBe(before.pruneRounds);

        // Full KV after them: nothing evicted, every token live.
        const full = await run(engine, "full", [{role: "user", text: "Hi."}], 20, cells);
        expect(full.samples.at(-1)!.tokensEvicted).toBe(0);
        expect(full.samples.at(-1)!.pruneRounds).toBe(0);
        expect(full.samples.at(-1)!.liveBytes).toBe(full.samples.at(-1)!.fullBytes);
    });

    it("continues a conversation in turn two after pruning in turn one", async () => {
        const first = await run(engine, "lethe", [{role: "user", text: "Think for a long time."}], 300);
        expect(first.samples.at(-1)!.tokensEvicted).toBeGreaterThan(0);
        const second = await run(
            engine,
            "lethe",
            [
                {role: "user", text: "Think for a long time."},
                {role: "assistant", text: first.answer, thinking: first.thought},
                {role: "user", text: "And now?"}
            ],
            200
        );
        expect(second.tokens).toBeGreaterThan(50);
        for (const sample of second.samples) expect(sample.cellsLive).toBeLessThanOrEqual(budget);
    });
});
