// Attention scores of the patched engine: what one step's scores add up to, flash attention on and off agreeing,
// and the decayed accumulator (Lethe RASR, Eq. 5) against its closed form.
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {LlamaModel} from "node-llama-cpp";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import type {ScoreSnapshot} from "../../main/engine/native/types.js";
import {
    createTestContext, evaluateForLogits, loadTestModel, maxAbsDifference, MODEL_SHAPES, randomTokens, sum, type ModelShape
} from "./nativeTestUtils.js";

const shapes: ModelShape[] = ["gqa", "mqa"];

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

    test("one step's score mass per layer is query heads x scored rows (softmax rows sum to 1)", async () => {
        const t = await createTestContext(model);
        try {
            const rows = 4;
            await t.kv.configureScoring({enabled: true, rows, gamma: 1});

            // prefill: the last `rows` query rows of the prompt are scored
            await evaluateForLogits(t.sequence, randomTokens(24, 1));
            let snapshot = await t.kv.scores(0);
            expect(snapshot.layers).toHaveLength(nLayer);
            expect(snapshot.positions).toHaveLength(24);
            for (const layer of snapshot.layers)
                expect(sum(layer.last)).toBeCloseTo(nHead * rows, 4);

            // decoding one token at a time: one query row per step
            for (let step = 0; step < 5; step++) {
                await evaluateForLogits(t.sequence, randomTokens(1, 100 + step));
                snapshot = await t.kv.scores(0);
                for (const layer of snapshot.layers) {
                    expect(sum(layer.last)).toBeCloseTo(nHead, 4);
                    // gamma = 1: the accumulator holds the whole mass seen so far
                    expect(sum(layer.accumulated)).toBeCloseTo(nHead * rows + nHead * (step + 1), 3);
                }
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
                const mass = sum(layer.last);
                expect(mass).toBeGreaterThanOrEqual(nHead / n - 1e-6);
                expect(mass).toBeLessThanOrEqual(nHead + 1e-6);
                for (const value of layer.last)
                    expect(value).toBeGreaterThanOrEqual(0);
            }
        } finally {
            await t.dispose();
        }
    });

    test.each([false, true])("flash attention on and off give the same scores (squared: %s)", async (squared) => {
        const snapshots: ScoreSnapshot[][] = [];
        for (const flashAttention of [false, true]) {
            const t = await createTestContext(model, {flashAttention});
            try {
                expect(t.context.flashAttention).toBe(flashAttention);
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
            for (let layer = 0; layer < nLayer; layer++) {
                const tolerance = layer === 0 ? 1e-6 : 2e-2;
                expect(maxAbsDifference(on[step]!.layers[layer]!.last, off[step]!.layers[layer]!.last)).toBeLessThanOrEqual(tolerance);
                expect(maxAbsDifference(on[step]!.layers[layer]!.accumulated, off[step]!.layers[layer]!.accumulated))
                    .toBeLessThanOrEqual(5 * tolerance);
            }
        }
    });

    test("the decayed accumulator matches its closed form s_T = sum_t gamma^(T-t) a_t over many steps", async () => {
        const gamma = 0.8;
        const t = await createTestContext(model);
        try {
            await t.kv.configureScoring({enabled: true, rows: 2, gamma});

            // every step's raw score per layer and position
            const history: Map<number, number>[][] = [];
            const record = (snapshot: ScoreSnapshot) => {
                history.push(snapshot.layers.map((layer) => new Map(Array.from(layer.positions, (pos, i) => [pos, layer.last[i]!]))));
            };

            await evaluateForLogits(t.sequence, randomTokens(10, 4));
            record(await t.kv.scores(0));
            for (let step = 0; step < 60; step++) {
                await evaluateForLogits(t.sequence, randomTokens(1, 300 + step));
                record(await t.kv.scores(0));
            }

            const final = await t.kv.scores(0);
            for (const layer of final.layers) {
                for (let i = 0; i < final.positions.length; i++) {
                    const pos = final.positions[i]!;
                    let expected = 0;
                    for (const step of history)
                        expected = gamma * expected + (step[layer.layer]!.get(pos) ?? 0);
                    expect(layer.accumulated[i]).toBeCloseTo(expected, 5);
                }
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
                if (enabled)
                    await t.kv.configureScoring({enabled: true, rows: 4});
                results.push(await evaluateForLogits(t.sequence, tokens));
            } finally {
                await t.dispose();
            }
        }
        expect(Array.from(results[1]!)).toEqual(Array.from(results[0]!));
    });
});
