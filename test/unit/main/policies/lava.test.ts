import {describe, expect, it} from "vitest";
import {toPolicySnapshot} from "../../../../main/engine/pruning/toPolicySnapshot.js";
import {decide} from "../../../../main/engine/policies/decide.js";
import {
    lavaLayers,
    lavaPolicy,
    lavaScores,
    layerBudgets,
    layerEntropy,
    maxPoolByPosition,
    windowGamma,
    type LavaParams
} from "../../../../main/engine/policies/lava.js";
import {orderByPosition} from "../../../../main/engine/policies/scoreMath.js";
import type {PruneTarget, ScoreSnapshot} from "../../../../main/engine/policies/types.js";
import {scoring} from "../../../../main/engine/policies/scoring.js";
import {defaultCompressionSettings} from "../../../../main/services/schemas.js";

/**
 * `accumulated[l][q]`: layer l's query head q's accumulated attention per cell; `norms[l][g]`: layer l's KV head g's value
 * L1 norm per cell. Positions 0..n-1 unless given.
 */
function snapshot(accumulated: number[][][], norms: number[][][], positions?: number[]): ScoreSnapshot {
    const n = accumulated[0]![0]!.length;
    return {
        positions: Int32Array.from(positions ?? Array.from({length: n}, (_, i) => i)),
        layers: accumulated.length,
        heads: accumulated[0]!.length,
        accumulated: Float32Array.from(accumulated.flat(2)),
        last: new Float32Array(accumulated.flat(2).length),
        valueNorms: Float32Array.from(norms.flat(2)),
        valueHeads: norms[0]!.length
    };
}

const target = (maxKeep: number): PruneTarget => ({maxKeep, phase: "decode"});
const none = {perLayer: null, aggregate: null};

describe("LAVa's score (Definition 1, Eq. 5) with GQA (§4.3)", () => {
    // Two layers; four query heads over two KV heads (q0, q1 -> g0; q2, q3 -> g1); w = 4. By hand, layer 0:
    //   max(q0, q1)  0.4 0.5 0.2 0.3   V̄_g0 = max(1, 3, 2, 0) = 3: x 3/4 -> 0.3 0.375 0.15 0.225
    //   max(q2, q3)  0.2 0.2 0.8 0.4   V̄_g1 = max(8, 1, 1, 1) = 8: x 8/4 -> 0.4 0.4   1.6  0.8
    // Layer 1 has no norms (written before they were on): its heads weigh alike, 1/w.
    const s = snapshot(
        [
            [
                [0.4, 0.1, 0.2, 0.3],
                [0.1, 0.5, 0.2, 0.2],
                [0.2, 0.2, 0.2, 0.4],
                [0, 0, 0.8, 0.2]
            ],
            [
                [0.4, 0.4, 0.4, 0.4],
                [0.4, 0, 0, 0],
                [0, 0, 0, 0.8],
                [0, 0, 0, 0]
            ]
        ],
        [
            [
                [1, 3, 2, 0],
                [8, 1, 1, 1]
            ],
            [
                [0, 0, 0, 0],
                [0, 0, 0, 0]
            ]
        ]
    );

    it("weights the window's attention by the KV head's largest value norm over w, each KV head the max of its query heads", () => {
        const {scores, kvHeads} = lavaScores(s, 4);
        expect(kvHeads).toBe(2);
        [0.3, 0.375, 0.15, 0.225].forEach((v, j) => expect(scores[j]).toBeCloseTo(v, 6));
        [0.4, 0.4, 1.6, 0.8].forEach((v, j) => expect(scores[4 + j]).toBeCloseTo(v, 6));
        [0.1, 0.1, 0.1, 0.1].forEach((v, j) => expect(scores[8 + j]).toBeCloseTo(v, 6));
        [0, 0, 0, 0.2].forEach((v, j) => expect(scores[12 + j]).toBeCloseTo(v, 6));
    });

    it("refuses a round without value norms, or with norms of another shape", () => {
        expect(() => lavaScores({...s, valueNorms: undefined}, 4)).toThrow(/value norms/);
        expect(() => lavaScores({...s, valueNorms: new Float32Array(3)}, 4)).toThrow(/2 layers x 2 heads x 4 cells/);
    });

    it("ranks a cell a large-valued head attends to above one a small-valued head attends to more (heads compared by V̄)", () => {
        // One layer, two KV heads: head 0 gives cell 1 0.5 with values of norm 1; head 1 gives cell 2 0.4 with values of norm 10.
        const pair = snapshot(
            [
                [
                    [0, 0.5, 0, 0, 0],
                    [0, 0, 0.4, 0, 0]
                ]
            ],
            [
                [
                    [1, 1, 1, 1, 1],
                    [10, 10, 10, 10, 10]
                ]
            ]
        );
        const params: LavaParams = {window: 1, kernel: 1};
        const {selectors} = lavaPolicy.select(pair, params, null, target(2));
        expect(selectors[0]!.structural).toBe(1); // the newest cell
        expect([...selectors[0]!.order.subarray(0, 3)]).toEqual([4, 2, 1]);
        // Without the value weights, attention alone would put cell 1 first.
        const alike = lavaPolicy.select({...pair, valueNorms: new Float32Array(10)}, params, null, target(2));
        expect([...alike.selectors[0]!.order.subarray(0, 3)]).toEqual([4, 1, 2]);
    });
});

describe("max-pooling over positions (LAVa §5.1, kernel 7)", () => {
    // Cells in another order than their positions: by position 0, 2, 5, 7, 9 the values are 0, 5, 1, 0, 0.
    const positions = Int32Array.from([5, 0, 9, 2, 7]);
    const values = [1, 0, 0, 5, 0];
    const byPosition = orderByPosition(positions);

    it("gives each cell the largest value within kernel / 2 neighbours on either side, in position order", () => {
        // Kernel 3 by hand: position 0 -> max(0, 5) = 5; 2 -> 5; 5 -> max(5, 1, 0) = 5; 7 -> max(1, 0, 0) = 1; 9 -> 0.
        expect([...maxPoolByPosition(values, 0, byPosition, 3)]).toEqual([5, 5, 0, 5, 1]);
        expect([...maxPoolByPosition(values, 0, byPosition, 1)]).toEqual(values);
        expect([...maxPoolByPosition(values, 0, byPosition, 7)]).toEqual([5, 5, 5, 5, 5]);
        expect([...maxPoolByPosition([9, ...values], 1, byPosition, 3)]).toEqual([5, 5, 0, 5, 1]);
    });

    it("is applied before the layer ranks its cells", () => {
        const s = snapshot([[[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]]], [[[1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]]);
        const {cellScores} = lavaLayers(s, {window: 1, kernel: 7});
        // Cell 3's score reaches positions 0..6; w = 1 leaves it at 1.
        expect(Array.from(cellScores)).toEqual([1, 1, 1, 1, 1, 1, 1, 0, 0, 0]);
    });
});

describe("layer budgets from the normalised entropy (Eq. 6-7, Algorithm 2)", () => {
    it("computes e_l = -sum ŝ log ŝ / (H x N) over the cells outside the window", () => {
        // Two heads, three cells: [1, 1, 2] and [0, 4, 0] sum to 8; ŝ = 1/8, 1/8, 1/4, 0, 1/2, 0:
        // -sum ŝ log ŝ = 2/8 ln 8 + 1/4 ln 4 + 1/2 ln 2 = 1.75 ln 2; / (2 x 3).
        const scores = [1, 1, 2, 0, 4, 0];
        expect(layerEntropy(scores, 0, 2, 3, Uint8Array.from([1, 1, 1]))).toBeCloseTo((1.75 * Math.LN2) / 6, 12);
        // Cell 2 in the window: [1, 1] and [0, 4] sum to 6; ŝ = 1/6, 1/6, 0, 2/3; / (2 x 2).
        const windowless = (2 / 6) * Math.log(6) + (2 / 3) * Math.log(1.5);
        expect(layerEntropy(scores, 0, 2, 3, Uint8Array.from([1, 1, 0]))).toBeCloseTo(windowless / 4, 12);
        expect(layerEntropy([0, 0, 0], 0, 1, 3, Uint8Array.from([1, 1, 1]))).toBe(0);
    });

    it("shares the total by e_l / sum e (equal shares when every entropy is 0)", () => {
        expect([...layerBudgets(Float64Array.from([1, 3]), 100)]).toEqual([25, 75]);
        expect([...layerBudgets(Float64Array.from([0, 0]), 100)]).toEqual([50, 50]);
    });

    it("gives the layer whose attention is spread more cells: quotas in the entropies' ratio, the window on top", () => {
        // Ten cells, w = 2 (cells 8 and 9), no pooling. Outside the window, layer 0 is uniform over 8 cells (entropy ln 8 / 8),
        // layer 1 split over two (ln 2 / 8): 3 to 1. maxKeep 6: 2 layers x (6 - 2) = 8 cells shared 6 and 2, plus the window.
        const s = snapshot(
            [[[1, 1, 1, 1, 1, 1, 1, 1, 5, 5]], [[0, 0, 0, 0, 0, 2, 2, 0, 5, 5]]],
            [[Array(10).fill(1)], [Array(10).fill(1)]]
        );
        const {entropy} = lavaLayers(s, {window: 2, kernel: 1});
        expect(entropy[0]).toBeCloseTo(Math.log(8) / 8, 6);
        expect(entropy[1]).toBeCloseTo(Math.log(2) / 8, 6);
        const {selectors} = lavaPolicy.select(s, {window: 2, kernel: 1}, null, target(6));
        expect(selectors.map((choice) => [choice.quota, choice.structural, choice.layer])).toEqual([
            [8, 2, 0],
            [4, 2, 1]
        ]);
        // The window leads every layer's ranking (Algorithm 1 scores only the cells outside it), newest first.
        expect([...selectors[1]!.order.subarray(0, 4)]).toEqual([9, 8, 5, 6]);
    });
});

describe("LAVa through decide", () => {
    // 40 cells, two layers of two heads; head 1 has values ten times larger. w = 4.
    const n = 40;
    const attention = (seed: number) => Array.from({length: n}, (_, j) => ((j * 7919 + seed * 104_729) % 97) / 97);
    const s = snapshot(
        [
            [attention(1), attention(2)],
            [attention(3), attention(4)]
        ],
        [
            [Array(n).fill(1), Array(n).fill(10)],
            [Array(n).fill(2), Array(n).fill(1)]
        ]
    );
    const params: LavaParams = {window: 4, kernel: 7};

    for (const combine of ["quota", "aggregate", "union"] as const) {
        it(`keeps the window and stays within the budget (${combine})`, () => {
            const decision = decide(lavaPolicy, s, params, none, target(16), combine);
            expect(decision.keptCells).toBeLessThanOrEqual(16);
            const evicted = new Set(decision.evict);
            for (const position of [36, 37, 38, 39, 0]) expect(evicted.has(position)).toBe(false);
        });
    }

    it("under quota, keeps each layer's best cells up to its share of the budget", () => {
        const decision = decide(lavaPolicy, s, params, none, target(20), "quota");
        expect(decision.keptCells).toBe(20);
        const {selectors} = lavaPolicy.select(s, params, null, target(20));
        // Every kept cell is at the head of some layer's ranking: none is kept that both layers rank lower than an evicted one.
        const evicted = new Set(decision.evict);
        const depth = (j: number) => Math.min(...selectors.map((choice) => choice.order.indexOf(j) / choice.quota));
        const keptDepth = Math.max(
            ...Array.from({length: n}, (_, j) => j)
                .filter((j) => !evicted.has(j) && j !== 0 && j < n - 8)
                .map(depth)
        );
        const evictedDepth = Math.min(...[...evicted].map(depth));
        expect(keptDepth).toBeLessThanOrEqual(evictedDepth);
    });

    it("reads the value norms into the snapshot in the scores' cell order (matched by position)", () => {
        const positions = Int32Array.from([4, 0, 9]);
        const scores = {
            sequenceId: 0,
            positions,
            heads: 2,
            layers: [0].map((layer) => ({
                layer,
                positions,
                heads: 2,
                accumulated: new Float32Array(6),
                last: new Float32Array(6)
            }))
        };
        // The read's cells in another order, and one cell (position 9) it lacks.
        const norms = {sequenceId: 0, positions: Int32Array.from([0, 4]), heads: 1, norms: [Float32Array.from([3, 7])]};
        const policySnapshot = toPolicySnapshot(scores, undefined, norms);
        expect(policySnapshot.valueHeads).toBe(1);
        expect([...policySnapshot.valueNorms!]).toEqual([7, 3, 0]);
    });
});

describe("what LAVa asks of the engine", () => {
    it("accumulates with gamma = 1 - 1/w and scores a prompt's last w rows, within the flash attention bound", () => {
        expect(windowGamma(32)).toBe(1 - 1 / 32);
        expect(lavaPolicy.needs(lavaPolicy.defaults)).toEqual({gamma: 1 - 1 / 32, allRows: true, rows: 32, valueNorms: true});
        const lava = (window: number, flashAttention: boolean) =>
            scoring({
                ...defaultCompressionSettings,
                policy: "lava",
                flashAttention,
                params: {...defaultCompressionSettings.params, lava: {window, kernel: 7}}
            });
        expect(lava(32, false)).toEqual({rows: 32, gamma: 1 - 1 / 32});
        expect(lava(64, false)).toEqual({rows: 64, gamma: 1 - 1 / 64});
        expect(lava(64, true).rows).toBe(32);
        expect(lava(1024, false).rows).toBe(512);
    });
});
