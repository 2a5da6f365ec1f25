// Per-head cells (native/patches 0015-0016): moving single KV heads' contents between cells. Attention is a sum over
// cells, so giving every head its own permutation of the same cells leaves the next logits as they were, with flash
// attention on and off (V in rows or transposed) and with quantized caches; a head's hole filled from another cell,
// then that cell freed, is the shared eviction of the hole's token; the values kept per cell (scores, gates, value
// norms, read horizons) move with their head; a refused call moves nothing.
import {mkdtemp, rm} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {LlamaModel} from "node-llama-cpp";
import {getFixtureModel, getFixtureModelInfo, type FixtureName} from "../fixtures/gguf/fixtures.js";
import {writeFixtureWithGates} from "../fixtures/gguf/fixtureRetention.js";
import {createTestContext, evaluateForLogits, getTestLlama, maxAbsDifference, randomTokens} from "./nativeTestUtils.js";
import type {TestContext} from "./nativeTestUtils.js";

type CacheCase = {fixture: FixtureName; flashAttention: boolean; keyType?: "Q8_0" | "Q4_0"; valueType?: "Q8_0" | "Q4_0"};

const cases: CacheCase[] = [
    {fixture: "tiny-qwen2", flashAttention: false},
    {fixture: "tiny-qwen2", flashAttention: true},
    {fixture: "tiny-mqa", flashAttention: false},
    // head size 64: whole Q8_0 blocks per head (and llama.cpp's rotation of quantized caches, within a head)
    {fixture: "tiny-qwen3", flashAttention: false, keyType: "Q8_0"},
    {fixture: "tiny-qwen3", flashAttention: true, keyType: "Q8_0", valueType: "Q8_0"},
    // Q4_0: two blocks of 32 per head
    {fixture: "tiny-qwen3", flashAttention: false, keyType: "Q4_0"},
    {fixture: "tiny-qwen3", flashAttention: true, keyType: "Q4_0", valueType: "Q4_0"}
];

const PROMPT = 40;

/** A permutation of `items` from a seed (Fisher-Yates on a small LCG): every head gets its own. */
function shuffled(items: number[], seed: number): number[] {
    const out = [...items];
    let state = seed >>> 0 || 1;
    for (let i = out.length - 1; i > 0; i--) {
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        const j = (state >>> 8) % (i + 1);
        [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
}

async function withContext<T>(model: LlamaModel, c: CacheCase, fn: (t: TestContext) => Promise<T>): Promise<T> {
    const t = await createTestContext(model, {
        flashAttention: c.flashAttention,
        kvCacheKeyType: c.keyType,
        kvCacheValueType: c.valueType
    });
    try {
        return await fn(t);
    } finally {
        await t.dispose();
    }
}

describe.each(cases)("per-head cells, $fixture, flash attention $flashAttention, K $keyType V $valueType", (c) => {
    let model: LlamaModel;
    let layers: number;
    let kvHeads: number;

    beforeAll(async () => {
        const llama = await getTestLlama();
        model = await llama.loadModel({modelPath: await getFixtureModel(c.fixture)});
        const spec = (await getFixtureModelInfo(c.fixture)).spec;
        layers = spec.nLayer;
        kvHeads = spec.nHeadKv;
    });

    afterAll(async () => {
        await model?.dispose();
    });

    // a sum in another order: exact but for rounding, which flash attention's tiles (F16 accumulation) make larger
    const tolerance = c.flashAttention ? 1.5e-2 : 2e-3;
    const prompt = randomTokens(PROMPT, 11);
    const next = randomTokens(3, 12);

    test("every head permuting its own cells leaves the next logits unchanged; copying over a cell changes them", async () => {
        const expected = await withContext(model, c, async (t) => {
            await evaluateForLogits(t.sequence, prompt);
            return await evaluateForLogits(t.sequence, next);
        });

        const permuted = await withContext(model, c, async (t) => {
            await evaluateForLogits(t.sequence, prompt);
            const positions = Array.from({length: PROMPT}, (_, i) => i);
            const moves: number[] = [];
            for (let layer = 0; layer < layers; layer++)
                for (let head = 0; head < kvHeads; head++) {
                    const to = shuffled(positions, 1 + layer * 31 + head * 7);
                    positions.forEach((from, i) => moves.push(layer, head, from, to[i]!));
                }
            expect(await t.kv.moveHeadCells(0, moves)).toBe(layers * kvHeads * PROMPT);
            return await evaluateForLogits(t.sequence, next);
        });
        expect(maxAbsDifference(permuted, expected)).toBeLessThan(tolerance);

        // the comparison can fail: layer 0's heads reading copies of other tokens' K and V in place of 8 of their own
        const copied = await withContext(model, c, async (t) => {
            await evaluateForLogits(t.sequence, prompt);
            const moves: number[] = [];
            for (let head = 0; head < kvHeads; head++) for (let i = 0; i < 8; i++) moves.push(0, head, 5 + i, 30 + i);
            await t.kv.moveHeadCells(0, moves);
            return await evaluateForLogits(t.sequence, next);
        });
        expect(maxAbsDifference(copied, expected)).toBeGreaterThan(4 * tolerance);
    });

    test("a head's hole filled from a cell that is then freed equals the shared eviction of the hole's token", async () => {
        const hole = 9;
        const freed = 27;
        const shared = await withContext(model, c, async (t) => {
            await evaluateForLogits(t.sequence, prompt);
            expect(await t.kv.evict(0, [hole])).toBe(1);
            return await evaluateForLogits(t.sequence, next);
        });
        const perHead = await withContext(model, c, async (t) => {
            await evaluateForLogits(t.sequence, prompt);
            const moves: number[] = [];
            for (let layer = 0; layer < layers; layer++) for (let head = 0; head < kvHeads; head++) moves.push(layer, head, freed, hole);
            await t.kv.moveHeadCells(0, moves);
            expect(await t.kv.evict(0, [freed])).toBe(1);
            expect((await t.kv.stats()).cellsUsed).toBe(PROMPT - 1);
            return await evaluateForLogits(t.sequence, next);
        });
        expect(maxAbsDifference(perHead, shared)).toBeLessThan(tolerance);
    });

    test("a refused call names its reason and moves nothing", async () => {
        await withContext(model, c, async (t) => {
            await evaluateForLogits(t.sequence, prompt);
            const before = await t.kv.scores(0);
            await expect(t.kv.moveHeadCells(0, [0, 0, 3, PROMPT + 5])).rejects.toThrow(/a position has no cell/);
            await expect(t.kv.moveHeadCells(0, [0, kvHeads, 3, 4])).rejects.toThrow(/KV head is out of range/);
            await expect(t.kv.moveHeadCells(0, [layers, 0, 3, 4])).rejects.toThrow(/layer has no KV cache/);
            await expect(t.kv.moveHeadCells(0, [0, 0, 3, 4, 0, 0, 5, 4])).rejects.toThrow(/same head of the same cell/);
            await expect(t.kv.moveHeadCells(0, [0, 0, 3])).rejects.toThrow(/quadruples/);
            // a refused call's first, valid move was not made either
            await expect(t.kv.moveHeadCells(0, [0, 0, 12, 13, 0, 0, 3, PROMPT + 5])).rejects.toThrow(/no cell/);
            expect(Array.from((await t.kv.scores(0)).positions)).toEqual(Array.from(before.positions));
            const untouched = await evaluateForLogits(t.sequence, next);
            const reference = await withContext(model, c, async (r) => {
                await evaluateForLogits(r.sequence, prompt);
                return await evaluateForLogits(r.sequence, next);
            });
            expect(Array.from(untouched)).toEqual(Array.from(reference));
        });
    });
});

describe("per-head cells: the values kept per cell move with their head", () => {
    let dir: string;
    let sidecarPath: string;
    let model: LlamaModel;
    let layers: number;
    let kvHeads: number;

    beforeAll(async () => {
        dir = await mkdtemp(path.join(os.tmpdir(), "ponder-head-cells-"));
        const withGates = await writeFixtureWithGates("tiny-qwen2", dir, {seed: 5});
        sidecarPath = withGates.sidecarPath;
        const llama = await getTestLlama();
        model = await llama.loadModel({modelPath: withGates.modelPath});
        const spec = (await getFixtureModelInfo("tiny-qwen2")).spec;
        layers = spec.nLayer;
        kvHeads = spec.nHeadKv;
        expect(kvHeads).toBeGreaterThan(1);
    });

    afterAll(async () => {
        await model?.dispose();
        await rm(dir, {recursive: true, force: true});
    });

    test("scores, gate logits, value norms and read horizons of one head of one layer swap; nothing else changes", async () => {
        const t = await createTestContext(model);
        try {
            await t.kv.configureScoring({enabled: true, gamma: 0.9});
            await t.kv.configureRetention(sidecarPath);
            await t.kv.configureValueNorms(true);
            await t.kv.configureReadHorizon(0.01);
            await evaluateForLogits(t.sequence, randomTokens(30, 21));
            await evaluateForLogits(t.sequence, randomTokens(4, 22));

            const read = async () => ({
                scores: await t.kv.scores(0),
                gates: await t.kv.retention(0),
                norms: await t.kv.valueNorms(0),
                horizons: await t.kv.readHorizon(0)
            });
            const before = await read();
            const [layer, head, a, b] = [1, 1, 4, 17];
            await t.kv.moveHeadCells(0, [layer, head, a, b, layer, head, b, a]);
            const after = await read();

            const queryHeads = before.scores.heads;
            const group = queryHeads / kvHeads;
            const swapped = (values: Float32Array, positions: Int32Array, heads: number, moved: (h: number) => boolean) => {
                const n = positions.length;
                const ia = positions.indexOf(a);
                const ib = positions.indexOf(b);
                const out = Float32Array.from(values);
                for (let h = 0; h < heads; h++) {
                    if (!moved(h)) continue;
                    out[h * n + ia] = values[h * n + ib]!;
                    out[h * n + ib] = values[h * n + ia]!;
                }
                return Array.from(out);
            };
            for (let l = 0; l < layers; l++) {
                const movedKv = (h: number) => l === layer && h === head;
                const movedQ = (h: number) => l === layer && Math.floor(h / group) === head;
                const positions = before.scores.positions;
                expect(Array.from(after.scores.layers[l]!.accumulated)).toEqual(
                    swapped(before.scores.layers[l]!.accumulated, positions, queryHeads, movedQ)
                );
                expect(Array.from(after.scores.layers[l]!.last)).toEqual(
                    swapped(before.scores.layers[l]!.last, positions, queryHeads, movedQ)
                );
                expect(Array.from(after.gates.logits[l]!)).toEqual(
                    swapped(before.gates.logits[l]!, before.gates.positions, before.gates.heads, movedKv)
                );
                expect(Array.from(after.norms.norms[l]!)).toEqual(
                    swapped(before.norms.norms[l]!, before.norms.positions, before.norms.heads, movedKv)
                );
                expect(Array.from(after.horizons.last[l]!)).toEqual(
                    swapped(before.horizons.last[l]!, before.horizons.positions, before.horizons.heads, movedKv)
                );
            }
            // the swap moved something: the two cells' values differ in that head
            const n = before.gates.positions.length;
            const ia = before.gates.positions.indexOf(a);
            const ib = before.gates.positions.indexOf(b);
            expect(before.gates.logits[layer]![head * n + ia]).not.toBe(before.gates.logits[layer]![head * n + ib]);
        } finally {
            await t.dispose();
        }
    });
});
