// LAVa through the engine, on generated models: the patched graph writes every cell's value L1 norm per layer and KV head
// (native/patches 0007-0008), NativeKv reads and writes them back, and the policy prunes by them within the budget.
import type {LlamaContext, LlamaModel, Token} from "node-llama-cpp";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {getFixtureModel, getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import {generateRun} from "./generateRun.js";

const modelInfo = (p: string) => ({
    id: p,
    path: p,
    name: "fixture",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});
const tokens = (count: number, seed: number) => Array.from({length: count}, (_, i) => (40 + ((i * 7919 + seed * 104_729) % 210)) as Token);

describe("value norms in the patched engine (tiny-qwen2: 4 layers, 2 KV heads)", () => {
    let model: LlamaModel;
    let context: LlamaContext | undefined;
    let kv: NativeKv | undefined;

    beforeAll(async () => {
        const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
        model = await llama.loadModel({modelPath: await getFixtureModel("tiny-qwen2")});
    });
    afterAll(async () => {
        await kv?.dispose();
        await context?.dispose();
        await model?.dispose();
    });

    async function freshContext(): Promise<NativeKv> {
        await kv?.dispose();
        await context?.dispose();
        context = await model.createContext({contextSize: 256, threads: 1});
        kv = new NativeKv(context);
        return kv;
    }

    it("keeps a positive L1 norm per layer, KV head and cell, head-major, for the cells of the scores", async () => {
        const info = await getFixtureModelInfo("tiny-qwen2");
        const native = await freshContext();
        await native.configureScoring({enabled: true, rows: 1});
        await native.configureValueNorms(true);
        await context!.getSequence().evaluateWithoutGeneratingNewTokens(tokens(40, 1));
        const read = await native.valueNorms(0);
        const n = read.positions.length;
        expect(n).toBe(40);
        expect(read.heads).toBe(info.spec.nHeadKv);
        expect(read.norms).toHaveLength(info.spec.nLayer);
        expect([...read.positions]).toEqual([...(await native.scores(0)).positions]);
        for (const layer of read.norms) {
            expect(layer).toHaveLength(read.heads * n);
            expect(layer.every((v) => Number.isFinite(v) && v > 0)).toBe(true);
        }
    });

    it("reads layer 0's values from the token alone: the same token has the same layer-0 norms wherever it stands", async () => {
        const native = await freshContext();
        await native.configureValueNorms(true);
        const input = [...tokens(12, 2), ...tokens(12, 2)];
        await context!.getSequence().evaluateWithoutGeneratingNewTokens(input);
        const read = await native.valueNorms(0);
        const n = read.positions.length;
        const at = (position: number, h: number) => read.norms[0]![h * n + read.positions.indexOf(position)]!;
        for (let h = 0; h < read.heads; h++) {
            for (let i = 0; i < 12; i++) expect(at(i + 12, h)).toBeCloseTo(at(i, h), 3);
        }
    });

    it("writes norms back at positions (a restored state), and refuses to read them while off", async () => {
        const native = await freshContext();
        await native.configureValueNorms(true);
        await context!.getSequence().evaluateWithoutGeneratingNewTokens(tokens(20, 3));
        const read = await native.valueNorms(0);
        const n = read.positions.length;
        const doubled = read.norms.map((layer) => layer.map((v) => 2 * v));
        expect(await native.restoreValueNorms(0, read.positions, read.heads, doubled)).toBe(n);
        const back = await native.valueNorms(0);
        back.norms.forEach((layer, l) => layer.forEach((v, i) => expect(v).toBeCloseTo(doubled[l]![i]!, 4)));
        await native.configureValueNorms(false);
        expect(native.valueNormsOn).toBe(false);
        await expect(native.valueNorms(0)).rejects.toThrow();
    });
});

describe("LAVa through the engine", () => {
    const engine = new Engine({loadLlama: loadRuntime, threads: 1});
    afterAll(() => engine.dispose());
    const budget = 128;

    const generate = (compression: Partial<CompressionSettings>, cells: number, maxTokens: number) =>
        generateRun(engine, compression, cells, maxTokens);

    it("loads the endless fixture", async () => {
        // "endless" never closes its thought: every answer runs to its token limit.
        const model = await getFixtureModel("endless");
        await engine.loadModel(model, modelInfo(model));
    });

    for (const [index, combine] of (["quota", "aggregate", "union"] as const).entries()) {
        it(`generates 4 x the budget without exceeding it (${combine})`, async () => {
            // A fresh context per mode (the cell count differs by one) so the counters start at zero.
            const cells = budget + index + 1;
            const {result, samples, tokens, last} = await generate({policy: "lava", combine}, cells, 4 * budget + 40);
            expect(result.stopReason).toBe("maxTokens");
            expect(tokens).toBeGreaterThanOrEqual(4 * budget);
            expect(last.cellsPeak).toBeLessThanOrEqual(cells);
            expect(samples.every((sample) => sample.cellsLive <= cells)).toBe(true);
            expect(last.pruneRounds).toBeGreaterThan(3);
            expect(last.tokensEvicted).toBeGreaterThan(0);
            // Each round said per token what attention it had received, and which of the 4 layers kept it.
            expect(samples.flatMap((sample) => sample.rounds ?? [])).toHaveLength(last.pruneRounds);
            expect(samples.findLast((sample) => sample.tokens != null)?.tokens).toMatchObject({kind: "attention", layers: 4});
        }, 120_000);
    }
});
