// Attention scores of the patched engine, per query head: what one step's scores add up to per head, flash attention
// on and off agreeing, the decayed accumulator (Lethe RASR, Eq. 5) against its closed form, reused cells restarting
// from 0, and settings changes that keep the accumulated scores.
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {LlamaModel} from "node-llama-cpp";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import type {LayerScores, ScoreSnapshot} from "../../main/engine/native/types.js";
import {
    createTestContext,
    evaluateForLogits,
    loadTestModel,
    maxAbsDifference,
    MODEL_SHAPES,
    randomTokens,
    sum,
    type ModelShape
} from "./nativeTestUtils.js";

const shapes: ModelShape[] = ["gqa", "mqa"];

/** Head h's scores of every cell (`n` cells, head-major layout). */
function headOf(values: Float32Array, h: number, n: number): Float32Array {
    return values.subarray(h * n, (h + 1) * n);
}

/** The per-head sums of one layer's `last` (or `accumulated`) scores. */
function headSums(layer: LayerScores, key: "last" | "accumulated"): number[] {
    const n = layer.positions.length;
    return Array.from({length: layer.heads}, (_, h) => sum(headOf(layer[key], h, n)));
}

describe.each(shapes)("attention scores, %s model", (shape) => {
    let model: LlamaModel;
    let nHead: number;
    let nLayer: number;

    beforeAll(async () => {
        model = await loadTestModel(shape);
        const {spec} = await getFixtureModelInfo(MODEL_SHAPES[shape]);
        nHead = spec.nHead;
        nLayer = spec.nLayer;
    });

    afterAll(async () => {
        await model?.dispose();
    });

    test("per query head, one step's scores sum to the scored rows (softmax rows sum to 1); over heads, to heads x rows", async () => {
        const t = await createTestContext(model);
        try {
            const rows = 4;
            await t.kv.configureScoring({enabled: true, rows, gamma: 1});

            // prefill: the last `rows` query rows of the prompt are scored
            await evaluateForLogits(t.sequence, randomTokens(24, 1));
            let snapshot = await t.kv.scores(0);
            expect(snapshot.heads).toBe(nHead);
            expect(snapshot.layers).toHaveLength(nLayer);
            expect(snapshot.positions).toHaveLength(24);
            for (const layer of snapshot.layers) {
                expect(layer.heads).toBe(nHead);
                expect(layer.last).toHaveLength(nHead * 24);
                expect(layer.accumulated).toHaveLength(nHead * 24);
                for (const headSum of headSums(layer, "last")) expect(headSum).toBeCloseTo(rows, 5);
                expect(sum(layer.last)).toBeCloseTo(nHead * rows, 4);
            }

            // the heads are kept apart: in layer 0 at least two heads attend differently
            const first = snapshot.layers[0]!;
            expect(maxAbsDifference(headOf(first.last, 0, 24), headOf(first.last, 1, 24))).toBeGreaterThan(1e-4);

            // decoding one token at a time: one query row per step
            for (let step = 0; step < 5; step++) {
                await evaluateForLogits(t.sequence, randomTokens(1, 100 + step));
                snapshot = await t.kv.scores(0);
                for (const layer of snapshot.layers) {
                    for (const headSum of headSums(layer, "last")) expect(headSum).toBeCloseTo(1, 5);
                    // gamma = 1: each head's accumulator holds the whole mass it gave so far
                    for (const headSum of headSums(layer, "accumulated")) expect(headSum).toBeCloseTo(rows + step + 1, 4);
                    expect(sum(layer.accumulated)).toBeCloseTo(nHead * (rows + step + 1), 3);
                }
            }
        } finally {
            await t.dispose();
        }
    });

    test("a prefill scored on all its rows (rows = 512, 300 tokens) sums to heads x 300 per layer", async () => {
        const t = await createTestContext(model, {contextSize: 512, batchSize: 512});
        try {
            await t.kv.configureScoring({enabled: true, rows: 512, gamma: 1});
            await evaluateForLogits(t.sequence, randomTokens(300, 6));
            const snapshot = await t.kv.scores(0);
            expect(snapshot.positions).toHaveLength(300);
            for (const layer of snapshot.layers) {
                for (const headSum of headSums(layer, "last")) expect(headSum).toBeCloseTo(300, 2);
                expect(sum(layer.accumulated)).toBeCloseTo(nHead * 300, 1);
                // causal attention: the first cell is seen by all 300 rows, and with weight 1 by the first row
                const n = layer.positions.length;
                const first = layer.positions.indexOf(0);
                for (let h = 0; h < nHead; h++) expect(layer.last[h * n + first]).toBeGreaterThanOrEqual(1 - 1e-5);
            }
        } finally {
            await t.dispose();
        }
    });

    test("squared mode: per head, the squared weights of a softmax row sum to between 1/n and 1", async () => {
        const t = await createTestContext(model);
        try {
            await t.kv.configureScoring({enabled: true, rows: 1, squared: true});
            await evaluateForLogits(t.sequence, randomTokens(40, 2));
            const snapshot = await t.kv.scores(0);
            const n = snapshot.positions.length;
            for (const layer of snapshot.layers) {
                expect(layer.last).toHaveLength(nHead * n);
                for (const mass of headSums(layer, "last")) {
                    expect(mass).toBeGreaterThanOrEqual(1 / n - 1e-6);
                    expect(mass).toBeLessThanOrEqual(1 + 1e-6);
                }
                for (const value of layer.last) expect(value).toBeGreaterThanOrEqual(0);
            }
        } finally {
            await t.dispose();
        }
    });

    test.each([false, true])("flash attention on and off give the same scores per head (squared: %s)", async (squared) => {
        const snapshots: ScoreSnapshot[][] = [];
        for (const flashAttention of [false, true]) {
            const t = await createTestContext(model, {flashAttention});
            try {
                expect(t.context.flashAttention).toBe(flashAttention);
                // 3 rows in the prefill, 1 row (the grouped-query product under flash attention) while decoding
                await t.kv.configureScoring({enabled: true, rows: 3, squared, gamma: 0.9});
                const steps: ScoreSnapshot[] = [];
                await evaluateForLogits(t.sequence, randomTokens(30, 3));
                steps.push(await t.kv.scores(0));
                for (let step = 0; step < 4; step++) {
                    await evaluateForLogits(t.sequence, randomTokens(1, 200 + step));
                    steps.push(await t.kv.scores(0));
                }
                snapshots.push(steps);
            } finally {
                await t.dispose();
            }
        }

        // Layer 0 sees identical q and k in both modes: its scores must agree to float rounding. Later layers see the
        // hidden states of flash and non-flash attention, which differ by about 1e-3 (as the logits do), so their scores
        // may differ by as much.
        const [off, on] = snapshots as [ScoreSnapshot[], ScoreSnapshot[]];
        for (let step = 0; step < off.length; step++) {
            expect(Array.from(on[step]!.positions)).toEqual(Array.from(off[step]!.positions));
            expect(on[step]!.heads).toBe(nHead);
            for (let layer = 0; layer < nLayer; layer++) {
                const tolerance = layer === 0 ? 1e-6 : 2e-2;
                const [layerOn, layerOff] = [on[step]!.layers[layer]!, off[step]!.layers[layer]!];
                expect(layerOn.last).toHaveLength(nHead * layerOn.positions.length);
                expect(maxAbsDifference(layerOn.last, layerOff.last)).toBeLessThanOrEqual(tolerance);
                expect(maxAbsDifference(layerOn.accumulated, layerOff.accumulated)).toBeLessThanOrEqual(5 * tolerance);
            }
        }
    });

    // Under flash attention on the CPU the weights come from the kernel itself, which takes one of three paths: one
    // query row at a time (the test above), tiles of 64 query rows (a long prompt scored on many rows), and a decode
    // split over the KV cells (512 cells and more), whose chunks are merged afterwards. Each must give the softmax of
    // attention without flash attention, the reference: in layer 0 to float rounding, except that the tiled kernel (the
    // prompts here) multiplies k and q in F32 where attention without flash rounds q to F16 (relative differences of
    // about 1e-3).
    test.each([
        {path: "tiled prefill", contextSize: 256, prompt: 150, rows: 100, steps: 0},
        {path: "split-KV decode", contextSize: 1024, prompt: 700, rows: 1, steps: 3}
    ])("flash attention's weights match attention without it: $path", async ({contextSize, prompt, rows, steps}) => {
        const snapshots: ScoreSnapshot[][] = [];
        for (const flashAttention of [false, true]) {
            const t = await createTestContext(model, {flashAttention, contextSize, batchSize: 512});
            try {
                expect(t.context.flashAttention).toBe(flashAttention);
                await t.kv.configureScoring({enabled: true, rows, gamma: 0.9});
                const taken: ScoreSnapshot[] = [];
                await evaluateForLogits(t.sequence, randomTokens(prompt, 9));
                taken.push(await t.kv.scores(0));
                for (let step = 0; step < steps; step++) {
                    await evaluateForLogits(t.sequence, randomTokens(1, 800 + step));
                    taken.push(await t.kv.scores(0));
                }
                snapshots.push(taken);
            } finally {
                await t.dispose();
            }
        }

        // the prompt's ubatches are 512 tokens: a longer prompt's last ubatch holds its last prompt % 512 rows
        const scoredRows = [Math.min(rows, ((prompt - 1) % 512) + 1), ...Array.from({length: steps}, () => 1)];
        const [off, on] = snapshots as [ScoreSnapshot[], ScoreSnapshot[]];
        for (let step = 0; step < off.length; step++) {
            expect(Array.from(on[step]!.positions)).toEqual(Array.from(off[step]!.positions));
            for (let layer = 0; layer < nLayer; layer++) {
                const [layerOn, layerOff] = [on[step]!.layers[layer]!, off[step]!.layers[layer]!];
                for (const headSum of headSums(layerOn, "last")) expect(headSum).toBeCloseTo(scoredRows[step]!, 3);
                for (let i = 0; i < layerOff.last.length; i++) {
                    const reference = layerOff.last[i]!;
                    const tolerance = (layer > 0 ? 2e-2 : step === 0 ? 1e-3 : 1e-6) * Math.max(1, Math.abs(reference));
                    if (Math.abs(layerOn.last[i]! - reference) > tolerance)
                        expect(layerOn.last[i], `step ${step}, layer ${layer}, value ${i}`).toBeCloseTo(reference, 6);
                }
            }
        }
    });

    test("the decayed accumulator matches its closed form s_T = sum_t gamma^(T-t) a_t per head over many steps", async () => {
        const gamma = 0.8;
        const t = await createTestContext(model);
        try {
            await t.kv.configureScoring({enabled: true, rows: 2, gamma});

            // every step's raw score per layer, head and position
            const history: Map<number, Float32Array>[][] = [];
            const record = (snapshot: ScoreSnapshot) => {
                history.push(
                    snapshot.layers.map((layer) => {
                        const n = layer.positions.length;
                        return new Map(
                            Array.from(layer.positions, (pos, i) => [
                                pos,
                                Float32Array.from({length: layer.heads}, (_, h) => layer.last[h * n + i]!)
                            ])
                        );
                    })
                );
            };

            await evaluateForLogits(t.sequence, randomTokens(10, 4));
            record(await t.kv.scores(0));
            for (let step = 0; step < 60; step++) {
                await evaluateForLogits(t.sequence, randomTokens(1, 300 + step));
                record(await t.kv.scores(0));
            }

            const final = await t.kv.scores(0);
            const n = final.positions.length;
            for (const layer of final.layers) {
                expect(layer.heads).toBe(nHead);
                expect(layer.accumulated).toHaveLength(nHead * n);
                for (let i = 0; i < n; i++) {
                    const pos = final.positions[i]!;
                    for (let h = 0; h < layer.heads; h++) {
                        let expected = 0;
                        for (const step of history) expected = gamma * expected + (step[layer.layer]!.get(pos)?.[h] ?? 0);
                        expect(layer.accumulated[h * n + i]).toBeCloseTo(expected, 5);
                    }
                }
            }
        } finally {
            await t.dispose();
        }
    });

    test("a reused cell's scores restart from 0", async () => {
        const t = await createTestContext(model);
        try {
            await t.kv.configureScoring({enabled: true, rows: 1, gamma: 1});
            await evaluateForLogits(t.sequence, randomTokens(20, 7));
            for (let step = 0; step < 8; step++) await evaluateForLogits(t.sequence, randomTokens(1, 400 + step));

            // position 5 has collected attention for 9 steps; evict it, and the next token takes its cell
            const before = await t.kv.scores(0);
            const cell = before.positions.indexOf(5);
            const n = before.positions.length;
            expect(cell).toBeGreaterThanOrEqual(0);
            for (const layer of before.layers)
                expect(sum(Array.from({length: layer.heads}, (_, h) => layer.accumulated[h * n + cell]!))).toBeGreaterThan(0.01);

            expect(await t.kv.evict(0, [5])).toBe(1);
            await evaluateForLogits(t.sequence, randomTokens(1, 500));
            const after = await t.kv.scores(0);
            const newest = t.sequence.nextTokenIndex - 1;
            expect(after.positions[cell]).toBe(newest);
            for (const layer of after.layers) {
                for (let h = 0; h < layer.heads; h++) {
                    expect(layer.last[h * n + cell]).toBeGreaterThan(0);
                    expect(layer.accumulated[h * n + cell]).toBe(layer.last[h * n + cell]);
                }
            }
        } finally {
            await t.dispose();
        }
    });

    test("changing gamma, rows or squared while scoring keeps the accumulated scores; turning it off clears them", async () => {
        const t = await createTestContext(model);
        try {
            await t.kv.configureScoring({enabled: true, rows: 1, gamma: 1});
            await evaluateForLogits(t.sequence, randomTokens(16, 8));
            for (let step = 0; step < 4; step++) await evaluateForLogits(t.sequence, randomTokens(1, 600 + step));
            const kept = await t.kv.scores(0);

            await t.kv.configureScoring({enabled: true, rows: 2, gamma: 0.5});
            const unchanged = await t.kv.scores(0);
            for (let layer = 0; layer < nLayer; layer++)
                expect(Array.from(unchanged.layers[layer]!.accumulated)).toEqual(Array.from(kept.layers[layer]!.accumulated));

            // the next step decays with the new gamma: s = 0.5 * s + a (the new cell is appended after the others)
            await evaluateForLogits(t.sequence, randomTokens(1, 700));
            const next = await t.kv.scores(0);
            const [n0, n1] = [kept.positions.length, next.positions.length];
            for (let layer = 0; layer < nLayer; layer++) {
                const [a, s0, s1] = [next.layers[layer]!.last, kept.layers[layer]!.accumulated, next.layers[layer]!.accumulated];
                for (let h = 0; h < nHead; h++) {
                    for (let i = 0; i < n0; i++) expect(s1[h * n1 + i]).toBeCloseTo(0.5 * s0[h * n0 + i]! + a[h * n1 + i]!, 5);
                }
            }

            await t.kv.configureScoring({enabled: true, rows: 2, gamma: 0.5, squared: true});
            const squaredKept = await t.kv.scores(0);
            for (let layer = 0; layer < nLayer; layer++)
                expect(Array.from(squaredKept.layers[layer]!.accumulated)).toEqual(Array.from(next.layers[layer]!.accumulated));

            await t.kv.configureScoring({enabled: false});
            await t.kv.configureScoring({enabled: true, rows: 1, gamma: 1});
            const cleared = await t.kv.scores(0);
            for (const layer of cleared.layers) {
                expect(layer.accumulated.every((v) => v === 0)).toBe(true);
                expect(layer.last.every((v) => v === 0)).toBe(true);
            }
        } finally {
            await t.dispose();
        }
    });

    test("scoring leaves the logits unchanged", async () => {
        const tokens = randomTokens(20, 5);
        const results: Float32Array[] = [];
        for (const enabled of [false, true]) {
            const t = await createTestContext(model);
            try {
                if (enabled) await t.kv.configureScoring({enabled: true, rows: 4});
                results.push(await evaluateForLogits(t.sequence, tokens));
            } finally {
                await t.dispose();
            }
        }
        expect(Array.from(results[1]!)).toEqual(Array.from(results[0]!));
    });
});
