import {describe, expect, it} from "vitest";
import {decide} from "../../../../main/engine/policies/decide.js";
import {averageScale, leanKvPolicy, significance} from "../../../../main/engine/policies/leankv.js";
import {maxOverRows} from "../../../../main/engine/policies/scoreMath.js";
import {scoring} from "../../../../main/engine/policies/scoring.js";
import {defaultCompressionSettings} from "../../../../main/services/schemas.js";
import type {PruneTarget, ScoreSnapshot, SelectorChoice} from "../../../../main/engine/policies/types.js";

/** Cells at positions 0..n-1; `heads[l][h]` is head h of layer l's accumulated attention (gamma = 1). */
function snapshot(heads: number[][][]): ScoreSnapshot {
    const n = heads[0]![0]!.length;
    const accumulated = Float32Array.from(heads.flat(2));
    return {
        positions: Int32Array.from({length: n}, (_, i) => i),
        layers: heads.length,
        heads: heads[0]!.length,
        accumulated,
        last: new Float32Array(accumulated.length)
    };
}

const kept = (choice: SelectorChoice) => [...choice.order.subarray(0, choice.quota)].sort((a, b) => a - b);
const target = (phase: PruneTarget["phase"], maxKeep = 1000): PruneTarget => ({maxKeep, phase});
const none = {perLayer: null, aggregate: null};

// Ten cells, N = 10. Accumulated attention and, by hand, the significance (its mean over the N - p rows that read it):
//   position     0     1     2     3      4     5     6     7      8  9
//   accumulated  4     0.9   0.72  0.3    1.2   0.5   0.44  0.1    0  0
//   rows N - p   10    9     8     7      6     5     4     3      2  1
//   mean         0.4   0.1   0.09  0.043  0.2   0.1   0.11  0.033  0  0
// Generation (Algorithm 1, alpha / N): mean x 10 = 4, 1, 0.9, 0.43, 2, 1, 1.1, 0.33: below alpha = 0.5 go 3 and 7.
// Prompt (alpha / i, i = p + 1): mean x i = 0.4, 0.2, 0.27, 0.17, 1.0, 0.6, 0.77, 0.27: below 0.5 go 0, 1, 2, 3 and 7.
// The W = 2 newest (8, 9) stay whatever they received.
const table = [4, 0.9, 0.72, 0.3, 1.2, 0.5, 0.44, 0.1, 0, 0];
const params = {alpha: 0.5, window: 2};

describe("LeanKV's significance (seed 003, §4)", () => {
    it("is the mean attention a cell received from the rows that read it", () => {
        expect(significance(3, 4, 10)).toBeCloseTo(0.5, 12);
        expect(significance(0.72, 2, 10)).toBeCloseTo(0.09, 12);
        // The newest cell has been read by its own row only.
        expect(significance(0.25, 9, 10)).toBeCloseTo(0.25, 12);
    });

    it("compares it with the average 1/N while generating and 1/i for a prompt", () => {
        const positions = Int32Array.from([0, 3, 9]);
        const generating = averageScale(positions, {phase: "decode"});
        expect(generating.length).toBe(10);
        expect([0, 1, 2].map(generating.of)).toEqual([10, 10, 10]);
        const prompt = averageScale(positions, {phase: "prefill-chunk"});
        expect([0, 1, 2].map(prompt.of)).toEqual([1, 4, 10]);
    });
});

describe("LeanKV's pruning rule", () => {
    it("while generating, prunes the cells whose mean attention is below alpha / N, keeping the W newest", () => {
        const {selectors} = leanKvPolicy.select(snapshot([[table]]), params, null, target("decode"));
        expect(selectors).toHaveLength(1);
        expect(kept(selectors[0]!)).toEqual([0, 1, 2, 4, 5, 6, 8, 9]);
        expect(selectors[0]!.structural).toBe(2);
    });

    it("ranks by the mean, not the sum: an old cell read by many rows goes before a newer one read less", () => {
        // Cell 2 received more in all (0.72) than cell 6 (0.44), but over 8 rows against 4.
        const {selectors} = leanKvPolicy.select(snapshot([[table]]), {alpha: 1.05, window: 2}, null, target("decode"));
        expect(kept(selectors[0]!)).toEqual([0, 4, 6, 8, 9]);
    });

    it("for a prompt, prunes below alpha / i", () => {
        const {selectors} = leanKvPolicy.select(snapshot([[table]]), params, null, target("prefill-chunk"));
        expect(kept(selectors[0]!)).toEqual([4, 5, 6, 8, 9]);
        expect(kept(leanKvPolicy.select(snapshot([[table]]), params, null, target("after-prefill")).selectors[0]!)).toEqual([
            4, 5, 6, 8, 9
        ]);
    });

    it("prunes nothing at alpha = 0", () => {
        const {selectors} = leanKvPolicy.select(snapshot([[table]]), {alpha: 0, window: 2}, null, target("decode"));
        expect(selectors[0]!.quota).toBe(10);
    });

    it("needs every query row's attention, undecayed, with flash attention too", () => {
        expect(leanKvPolicy.needs(params)).toEqual({gamma: 1, allRows: true, everyRow: true});
        const compression = {...defaultCompressionSettings, policy: "leankv" as const};
        expect(scoring({...compression, flashAttention: false})).toEqual({rows: 512, gamma: 1});
        expect(scoring({...compression, flashAttention: true})).toEqual({rows: 512, gamma: 1});
        // Lethe and H2O keep a prompt's last 32 rows with flash attention.
        expect(scoring({...compression, policy: "h2o", flashAttention: true})).toEqual({rows: 32, gamma: 1});
    });
});

describe("LeanKV on shared cells", () => {
    const heads = [
        [
            [0.1, 0.5, 0, 0, 0.05, 0],
            [0, 0, 0.4, 0, 0, 0]
        ],
        [
            [0, 0, 0, 0.3, 0, 0],
            [0, 0, 0, 0, 0.1, 0]
        ]
    ];

    it("takes, per cell, the most attention any head gave it (the max over a KV head's query heads, and over layers)", () => {
        expect([...maxOverRows(Float32Array.from(heads.flat(2)), 2, 2, 6, () => true)]).toEqual(
            [0.1, 0.5, 0.4, 0.3, 0.1, 0].map((v) => Math.fround(v))
        );
        expect([...maxOverRows(Float32Array.from(heads.flat(2)), 2, 2, 6, (l) => l === 1)]).toEqual(
            [0, 0, 0, 0.3, 0.1, 0].map((v) => Math.fround(v))
        );
    });

    it("frees a cell only when no head of any layer finds it significant, in every combine mode", () => {
        // 16 cells, two layers of two heads, W = 1, alpha = 0.5: a cell stays when a mean is at least 0.5 / 16 = 0.03125.
        // Means: layer 0 head 0 gives cell 1 0.05 (kept) and cells 0 and 4 0.01; head 1 cell 2 0.04 (kept); layer 1
        // head 0 cell 3 0.1 (kept), head 1 cell 4 0.02. Nobody keeps 0, 4, 5, 6, 7; position 0 and the 8 newest are
        // never freed, so 4 to 7 go.
        const n = 16;
        const row = (means: Record<number, number>) => Array.from({length: n}, (_, p) => (means[p] ?? 0) * (n - p));
        const scores = snapshot([
            [row({0: 0.01, 1: 0.05, 4: 0.01}), row({2: 0.04})],
            [row({3: 0.1}), row({4: 0.02})]
        ]);
        const selectors = leanKvPolicy.select(scores, {alpha: 0.5, window: 1}, null, target("decode")).selectors;
        // One selector per layer, ranking by its heads' max: layer 0 keeps what either of its heads keeps.
        expect(selectors.map(kept)).toEqual([
            [1, 2, 15],
            [3, 15]
        ]);
        for (const combine of ["union", "quota", "aggregate"] as const) {
            const decision = decide(leanKvPolicy, scores, {alpha: 0.5, window: 1}, none, target("decode"), combine);
            expect([...decision.evict]).toEqual([4, 5, 6, 7]);
            expect(decision.forcedDrops).toBe(0);
        }
    });

    it("under a budget tighter than its rule, drops the least significant cells first and counts them as forced", () => {
        // 20 cells, alpha = 0 (keep all), W = 2; cells 1..11 with means 0.05, 0.3, 0.01, 0.2, 0.02, 0.25, 0.03, 0.15, 0.04, 0.1, 0.005.
        const means = [0, 0.05, 0.3, 0.01, 0.2, 0.02, 0.25, 0.03, 0.15, 0.04, 0.1, 0.005, 0, 0, 0, 0, 0, 0, 0, 0];
        const scores = snapshot([[means.map((mean, p) => mean * (20 - p))]]);
        // 14 kept: position 0 and the 8 newest (12..19) are never freed; of the rest the 5 most significant stay.
        const decision = decide(leanKvPolicy, scores, {alpha: 0, window: 2}, none, target("decode", 14), "aggregate");
        expect([...decision.evict]).toEqual([1, 3, 5, 7, 9, 11]);
        expect(decision.forcedDrops).toBe(6);
    });
});
