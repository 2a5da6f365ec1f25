// Batched eviction that keeps positions: what it refuses, what it frees, and that evicted cells no longer matter.
import {mkdtemp, rm} from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {LlamaModel} from "node-llama-cpp";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import {createTestContext, evaluateForLogits, loadTestModel, MODEL_SHAPES, randomTokens, type ModelShape} from "./nativeTestUtils.js";

const shapes: ModelShape[] = ["gqa", "mqa"];

describe.each(shapes)("eviction, %s model", (shape) => {
    let model: LlamaModel;
    let bytesPerTokenF16KV: number;

    beforeAll(async () => {
        model = await loadTestModel(shape);
        bytesPerTokenF16KV = (await getFixtureModelInfo(MODEL_SHAPES[shape])).bytesPerTokenF16KV;
    });

    afterAll(async () => {
        await model?.dispose();
    });

    test("refuses position 0 and the newest token with a clear error, and evicts nothing then", async () => {
        const t = await createTestContext(model);
        try {
            await evaluateForLogits(t.sequence, randomTokens(16, 1));
            await expect(t.kv.evict(0, [3, 0])).rejects.toThrow(/Refusing to evict position 0 of sequence 0/);
            await expect(t.kv.evict(0, [15])).rejects.toThrow(/Refusing to evict position 15 of sequence 0: the newest token/);
            await expect(t.kv.evict(0, [-1])).rejects.toThrow(/negative position/);
            const stats = await t.kv.stats();
            expect(stats.cellsUsed).toBe(16);
            expect(stats.tokensEvicted).toBe(0);
            expect(stats.pruneCalls).toBe(0);
        } finally {
            await t.dispose();
        }
    });

    test("reads the live cells' positions with scoring off, with zero scores and no scoring cost", async () => {
        const t = await createTestContext(model);
        try {
            await evaluateForLogits(t.sequence, randomTokens(24, 5));
            await t.kv.evict(0, [4, 5, 9]);
            const snapshot = await t.kv.scores(0);
            expect([...snapshot.positions].sort((a, b) => a - b)).toEqual(
                Array.from({length: 24}, (_, i) => i).filter((p) => ![4, 5, 9].includes(p))
            );
            expect((await t.kv.stats()).scoring).toBe(false);
            expect(snapshot.heads).toBeGreaterThan(0);
            for (const layer of snapshot.layers) {
                expect(layer.accumulated).toHaveLength(snapshot.heads * snapshot.positions.length);
                expect(layer.accumulated.every((v) => v === 0)).toBe(true);
                expect(layer.last.every((v) => v === 0)).toBe(true);
            }
        } finally {
            await t.dispose();
        }
    });

    test("frees the cells of the given positions in one call and counts them", async () => {
        const t = await createTestContext(model);
        try {
            await evaluateForLogits(t.sequence, randomTokens(40, 2));
            let stats = await t.kv.stats();
            expect(stats.cellsUsed).toBe(40);
            expect(stats.cellsAllocated).toBe(t.context.contextSize);
            expect(stats.bytesPerCell).toBe(bytesPerTokenF16KV);
            expect(stats.bytesAllocated).toBe(stats.cellsAllocated * bytesPerTokenF16KV);

            // positions already gone or never there are not counted
            expect(await t.kv.evict(0, [5, 6, 7, 20, 21, 38])).toBe(6);
            expect(await t.kv.evict(0, [5, 6, 8, 400])).toBe(1);
            stats = await t.kv.stats();
            expect(stats.cellsUsed).toBe(33);
            expect(stats.bytesUsed).toBe(33 * bytesPerTokenF16KV);
            expect(stats.tokensEvicted).toBe(7);
            expect(stats.pruneCalls).toBe(2);

            await t.kv.configureScoring({enabled: true});
            await evaluateForLogits(t.sequence, randomTokens(1, 3));
            const positions = Array.from((await t.kv.scores(0)).positions).sort((a, b) => a - b);
            const expected = Array.from({length: 41}, (_, i) => i).filter((pos) => ![5, 6, 7, 8, 20, 21, 38].includes(pos));
            expect(positions).toEqual(expected);
        } finally {
            await t.dispose();
        }
    });

    test("changing the content of evicted cells leaves the next logits unchanged (positions intact)", async () => {
        const prompt = randomTokens(48, 4);
        const evicted = [3, 4, 5, 17, 30, 31, 32, 33, 46];
        const next = randomTokens(3, 5);

        const runs: Float32Array[] = [];
        for (const overwrite of [false, true]) {
            const t = await createTestContext(model);
            try {
                await evaluateForLogits(t.sequence, prompt);
                expect(await t.kv.evict(0, evicted)).toBe(evicted.length);
                if (overwrite) {
                    // fill the freed cells with other tokens' keys and values, then drop those tokens again (tail erase,
                    // nothing after them to shift): the freed cells now hold different data
                    const garbage = randomTokens(evicted.length + 2, 6);
                    await evaluateForLogits(t.sequence, garbage);
                    await t.sequence.eraseContextTokenRanges([{start: prompt.length, end: prompt.length + garbage.length}]);
                    expect(t.sequence.nextTokenIndex).toBe(prompt.length);
                    expect((await t.kv.stats()).cellsUsed).toBe(prompt.length - evicted.length);
                }
                runs.push(await evaluateForLogits(t.sequence, next));
            } finally {
                await t.dispose();
            }
        }
        expect(Array.from(runs[1]!)).toEqual(Array.from(runs[0]!));
    });

    test("a saved and reloaded sequence with holes gives the same next logits", async () => {
        const dir = await mkdtemp(path.join(os.tmpdir(), "ponder-native-state-"));
        try {
            const statePath = path.join(dir, "holey.bin");
            const prompt = randomTokens(60, 7);
            const next = randomTokens(2, 8);

            const original = await createTestContext(model);
            let expected: Float32Array;
            try {
                await evaluateForLogits(original.sequence, prompt);
                await original.kv.evict(0, [1, 2, 10, 11, 12, 40, 58]);
                await original.sequence.saveStateToFile(statePath);
                expected = await evaluateForLogits(original.sequence, next);
            } finally {
                await original.dispose();
            }

            const restored = await createTestContext(model);
            try {
                await restored.sequence.loadStateFromFile(statePath, {acceptRisk: true});
                expect(restored.sequence.nextTokenIndex).toBe(prompt.length);
                expect((await restored.kv.stats()).cellsUsed).toBe(prompt.length - 7);
                const logits = await evaluateForLogits(restored.sequence, next);
                expect(Array.from(logits)).toEqual(Array.from(expected));
            } finally {
                await restored.dispose();
            }
        } finally {
            await rm(dir, {recursive: true, force: true});
        }
    });
});
