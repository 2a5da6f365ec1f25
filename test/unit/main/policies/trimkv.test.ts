import {describe, expect, it} from "vitest";
import {toPolicySnapshot} from "../../../../main/engine/pruning/toPolicySnapshot.js";
import {decide, resolveCombine} from "../../../../main/engine/policies/decide.js";
import {decayedRetention, logSigmoid, maxLogBeta, retentionStep} from "../../../../main/engine/policies/scoreMath.js";
import {trimKvPolicy} from "../../../../main/engine/policies/trimkv.js";
import type {CombineMode, PruneTarget, ScoreSnapshot, SelectorChoice} from "../../../../main/engine/policies/types.js";
import {scoring} from "../../../../main/engine/policies/scoring.js";
import {defaultCompressionSettings} from "../../../../main/services/schemas.js";
import {mulberry32} from "../../../fixtures/gguf/random.js";

/** Cells at positions 0..n-1 with no attention scores; `logBeta[l][h]` is layer l's KV head h's log beta per cell. */
function snapshot(logBeta: number[][][], positions?: number[]): ScoreSnapshot {
    const n = logBeta[0]![0]!.length;
    const layers = logBeta.length;
    return {
        positions: Int32Array.from(positions ?? Array.from({length: n}, (_, i) => i)),
        layers,
        heads: 1,
        accumulated: new Float32Array(layers * n),
        last: new Float32Array(layers * n),
        retention: Float32Array.from(logBeta.flat(2)),
        retentionHeads: logBeta[0]!.length
    };
}

const ranked = (choice: SelectorChoice) => [...choice.order];
const kept = (choice: SelectorChoice) => [...choice.order.subarray(0, choice.quota)].sort((a, b) => a - b);
const target = (maxKeep: number, tokensSeen?: number): PruneTarget => ({maxKeep, phase: "decode", tokensSeen});
const none = {perLayer: null, aggregate: null};

// Eight cells, positions 0..7, so 8 tokens seen and t = 8 + 1 = 9 (the authors' q_idx = seen + 1). By hand, (t - pos) * log beta:
//   position          0      1      2      3     4     5      6     7
//   age t - pos       9      8      7      6     5     4      3     2
//   head 0 log beta  -0.01  -1     -0.05  -0.5  -0.2  -0.02  -3     0
//   head 0 score     -0.09  -8     -0.35  -3    -1    -0.08  -9     0
//   head 1 log beta  -1     -0.001 -1     -1    -1    -1     -0.1  -0.5
//   head 1 score     -9     -0.008 -7     -6    -5    -4     -0.3  -1
//   max log beta     -0.01  -0.001 -0.05  -0.5  -0.2  -0.02  -0.1  0
//   max score        -0.09  -0.008 -0.35  -3    -1    -0.08  -0.3  0
// With the age 2 less (t = 7, the newest position), head 0 would rank cell 6 (-3) above cell 1 (-6), and head 1 cell 7
// (0) first: a shift of t reorders cells of different log beta.
const head0 = [-0.01, -1, -0.05, -0.5, -0.2, -0.02, -3, 0];
const head1 = [-1, -0.001, -1, -1, -1, -1, -0.1, -0.5];

describe("log beta from a gate logit (logsigmoid, in double)", () => {
    it("keeps its precision at both ends, where the naive formula loses it", () => {
        // log sigmoid(40) = -log(1 + e^-40) = -e^-40 to double precision; the naive log(1 / (1 + e^-40)) rounds to 0.
        expect(logSigmoid(40)).toBeCloseTo(-Math.exp(-40), 30);
        expect(logSigmoid(40) / -Math.exp(-40)).toBeCloseTo(1, 12);
        expect(Math.log(1 / (1 + Math.exp(-40)))).toBe(0);
        // log sigmoid(-40) = -40 - log(1 + e^-40).
        expect(logSigmoid(-40)).toBe(-40);
        expect(logSigmoid(-800)).toBe(-800);
        expect(Math.log(1 / (1 + Math.exp(800)))).toBe(-Infinity);
        expect(logSigmoid(0)).toBeCloseTo(-Math.LN2, 15);
    });

    it("gives 0 (never forgotten) for the huge logit of a cell the gates did not see", () => {
        const value = logSigmoid(3.4e38);
        expect(value === 0).toBe(true);
        expect(Number.isFinite(logSigmoid(-3.4e38))).toBe(true);
    });

    it("becomes the policies' log beta, matched to the scores' cells by position, NaN and missing cells as never forgotten", () => {
        const scores = {
            sequenceId: 0,
            positions: Int32Array.from([4, 0, 9]),
            heads: 1,
            layers: [0, 1].map((layer) => ({
                layer,
                positions: Int32Array.from([4, 0, 9]),
                heads: 1,
                accumulated: new Float32Array(3),
                last: new Float32Array(3)
            }))
        };
        // The retention read lists the cells in another order, without cell 9; two KV heads.
        const retention = {
            sequenceId: 0,
            positions: Int32Array.from([0, 4]),
            heads: 2,
            logits: [Float32Array.from([0, 40, /* head 1 */ -40, NaN]), Float32Array.from([3.4e38, -2, /* head 1 */ 1, 2])]
        };
        const policy = toPolicySnapshot(scores, retention);
        expect(policy.retentionHeads).toBe(2);
        // (layer * heads + head) * n + j with cells in the scores' order: 4, 0, 9.
        const expected = [
            logSigmoid(40),
            logSigmoid(0),
            0,
            /* layer 0 head 1 */ 0,
            -40,
            0,
            logSigmoid(-2),
            0,
            0,
            /* layer 1 head 1 */ logSigmoid(2),
            logSigmoid(1),
            0
        ];
        expect([...policy.retention!].map((v, i) => Math.abs(v - Math.fround(expected[i]!)))).toEqual(expected.map(() => 0));
    });
});

describe("TRIM-KV's ranking: (t - pos) * log beta per (layer, KV head)", () => {
    it("ranks each head's cells by its retention at the authors' step, the budget as each quota", () => {
        const {selectors} = trimKvPolicy.select(snapshot([[head0, head1]]), {}, null, target(4));
        expect(selectors).toHaveLength(2);
        expect(ranked(selectors[0]!)).toEqual([7, 5, 0, 2, 4, 3, 1, 6]);
        expect(ranked(selectors[1]!)).toEqual([1, 6, 7, 5, 4, 3, 2, 0]);
        expect(selectors.map((choice) => [choice.quota, choice.structural, choice.layer])).toEqual([
            [4, 0, 0],
            [4, 0, 0]
        ]);
        expect(kept(selectors[0]!)).toEqual([0, 2, 5, 7]);
    });

    it("lets age count: a steep gate on a young cell outranks a gentle one on an old cell only while the old has decayed more", () => {
        // Head 0: cell 6 (log beta -3, age 3) scores -9, below cell 3 (log beta -0.5, age 6) at -3.
        const at9 = ranked(trimKvPolicy.select(snapshot([[head0]]), {}, null, target(8)).selectors[0]!);
        expect(at9.indexOf(3)).toBeLessThan(at9.indexOf(6));
        // Six steps later (t = 15) cell 6 scores -27 and cell 3 -6: the same order.
        expect(decayedRetention(Float32Array.from(head0), 0, Int32Array.from([0, 1, 2, 3, 4, 5, 6, 7]), 15)[6]).toBeCloseTo(-27, 5);
    });

    it("measures as the authors do, at q_idx = seen + 1: the tokens seen plus one, or the newest position plus two when later", () => {
        expect(retentionStep(Int32Array.from([3, 0, 7]), undefined)).toBe(9);
        expect(retentionStep(Int32Array.from([3, 0, 7]), 12)).toBe(13);
        expect(retentionStep(Int32Array.from([3, 0, 7]), 5)).toBe(9);
        // The newest cell is two steps old, as in the authors' cache right after it is written.
        expect(decayedRetention(Float32Array.from([-0.5]), 0, Int32Array.from([11]), retentionStep(Int32Array.from([11]), 12))[0]).toBe(-1);
    });

    it("makes no sinks or windows by hand: nothing is structural", () => {
        const {selectors} = trimKvPolicy.select(snapshot([[head0], [head1]]), {}, null, target(3));
        expect(selectors.every((choice) => choice.structural === 0)).toBe(true);
    });

    it("refuses a round without log beta", () => {
        const bare = {...snapshot([[head0]]), retention: undefined};
        expect(() => trimKvPolicy.select(bare, {}, null, target(4))).toThrow(/retention gates/);
    });

    it("reads no attention scores: scoring stays off, and the gates are asked for", () => {
        expect(trimKvPolicy.needs({})).toMatchObject({gamma: null, scores: false, retention: true});
        expect(scoring({...defaultCompressionSettings, policy: "trimkv"})).toEqual({rows: 0, gamma: 1});
    });
});

describe("TRIM-KV on shared cells", () => {
    it("aggregates by the max over layers and heads of log beta, which ranks by the max of (t - pos) * log beta", () => {
        const logBeta = Float32Array.from([...head0, ...head1]);
        expect([...maxLogBeta(logBeta, 1, 2, 8)]).toEqual([-0.01, -0.001, -0.05, -0.5, -0.2, -0.02, -0.1, 0].map(Math.fround));
        // Layer 1 left out: head 0 of layer 0 alone.
        expect([...maxLogBeta(logBeta, 2, 1, 8, (layer) => layer === 0)]).toEqual(head0.map(Math.fround));
    });

    it("in aggregate mode keeps position 0, the newest cells and then the cells with the highest retention of any head", () => {
        // 40 cells, 2 layers x 2 KV heads of seeded log beta; a budget of 20: position 0 and the 8 newest are protected, and
        // the other 11 are the best of positions 1..31 by max over rows of (t - pos) * log beta.
        const random = mulberry32(20);
        const n = 40;
        const rows = Array.from({length: 4}, () => Array.from({length: n}, () => -3 * random.uniform() ** 3));
        const snap = snapshot([
            [rows[0]!, rows[1]!],
            [rows[2]!, rows[3]!]
        ]);
        const t = n + 1; // 40 tokens seen: q_idx = 41
        const best = Array.from({length: n}, (_, j) => (t - j) * Math.max(...rows.map((row) => Math.fround(row[j]!))));
        const candidates = Array.from({length: 31}, (_, i) => i + 1).sort((a, b) => best[b]! - best[a]! || a - b);
        const expected = [0, ...candidates.slice(0, 11), ...Array.from({length: 8}, (_, i) => 32 + i)].sort((a, b) => a - b);
        const decision = decide(trimKvPolicy, snap, {}, none, target(20), "aggregate");
        const keptPositions = Array.from({length: n}, (_, j) => j).filter((j) => !decision.evict.includes(j));
        expect(keptPositions).toEqual(expected);
        // What each layer's own gates (its two heads' top 20, under union) would keep of the 40 cells: 20 to 40 of them.
        expect(decision.keptByLayer).toHaveLength(2 * n);
        for (const layer of [0, 1]) {
            const own = decision.keptByLayer.subarray(layer * n, (layer + 1) * n).reduce((sum, kept) => sum + kept, 0);
            expect(own).toBeGreaterThanOrEqual(20);
            expect(own).toBeLessThanOrEqual(40);
        }
        // And each cell's retention at this step, the largest over layers and heads: beta^(t - pos).
        expect(Array.from(decision.cellScores, (score) => Math.log(score))).toEqual(best.map((value) => expect.closeTo(value, 3)));
    });

    it("ranks per (layer, KV head) under auto for gates trained per head, by the shared max for shared gates or another policy", () => {
        expect(resolveCombine("auto", "trimkv", "per-head")).toBe("heads");
        expect(resolveCombine("auto", "trimkv", "shared")).toBe("aggregate");
        expect(resolveCombine("auto", "lethe")).toBe("aggregate");
        expect(resolveCombine("auto", "lava")).toBe("aggregate");
        // A mode the person chose stays.
        expect(resolveCombine("union", "trimkv", "per-head")).toBe("union");
        expect(resolveCombine("aggregate", "trimkv", "per-head")).toBe("aggregate");
        expect(resolveCombine("quota", "trimkv", "shared")).toBe("quota");
        expect(() => resolveCombine("auto", "trimkv")).toThrow(/how its gates were trained/);
    });

    it("keeps each head's best cells under per-head quotas, where the shared max and union keep one head's", () => {
        // 14 cells (14 seen: t = 15), budget 11: position 0 and the 8 newest (6..13) are kept by decide, room for 2 of 1..5.
        // Cells 0 and 6..13 have log beta 0 in both heads (score 0, ranks 0..8 of each head), so each head's quota of 11
        // reaches 2 of cells 1..5. By hand, (15 - pos) * log beta:
        //   position            1       2       3       4       5
        //   age                 14      13      12      11      10
        //   head A log beta    -0.01   -0.01   -1      -1      -1
        //   head A score       -0.14   -0.13   -12     -11     -10     head A's order: 2, 1
        //   head B log beta    -1      -1      -0.02   -0.03   -1
        //   head B score       -14     -13     -0.24   -0.33   -10     head B's order: 3, 4
        //   max score          -0.14   -0.13   -0.24   -0.33   -10
        // Shared max (aggregate): 2 and 1, both head A's. Quota: each head's first (entry level 10/11) before either's
        // second (11/11): 2 and 3.
        const zero = (values: number[]) => [0, ...values, ...Array(8).fill(0)];
        const snap = snapshot([[zero([-0.01, -0.01, -1, -1, -1]), zero([-1, -1, -0.02, -0.03, -1])]]);
        const keptOf = (combine: CombineMode) => {
            const decision = decide(trimKvPolicy, snap, {}, none, target(11), combine);
            return Array.from({length: 14}, (_, j) => j).filter((j) => !decision.evict.includes(j) && j >= 1 && j <= 5);
        };
        expect(keptOf("aggregate")).toEqual([1, 2]);
        expect(keptOf("quota")).toEqual([2, 3]);
        // Union: every cell is within some head's quota of 11, and over the budget the lowest retention of any head goes.
        expect(keptOf("union")).toEqual([1, 2]);
    });

    it("frees under union exactly what the shared max frees: over the budget the lowest retention of any head goes first", () => {
        // A cell among the `room` best by max score ranks, in its best head, below fewer than `room` + protected cells (each
        // with a higher max score), so it is within that head's quota: union's candidates hold the shared max's choice.
        let quotaDiffers = 0;
        for (const seed of [1, 2, 3, 4, 5]) {
            const random = mulberry32(seed);
            const n = 60;
            const rows = Array.from({length: 8}, () => Array.from({length: n}, () => -3 * random.uniform() ** 2));
            const snap = snapshot([
                [rows[0]!, rows[1]!, rows[2]!, rows[3]!],
                [rows[4]!, rows[5]!, rows[6]!, rows[7]!]
            ]);
            for (const maxKeep of [12, 20, 35]) {
                const union = decide(trimKvPolicy, snap, {}, none, target(maxKeep), "union");
                const aggregate = decide(trimKvPolicy, snap, {}, none, target(maxKeep), "aggregate");
                const quota = decide(trimKvPolicy, snap, {}, none, target(maxKeep), "quota");
                expect([...union.evict]).toEqual([...aggregate.evict]);
                quotaDiffers += quota.evict.join() === aggregate.evict.join() ? 0 : 1;
            }
        }
        // Quota, each (layer, head) its equal share, is the one per-head mode that frees other cells.
        expect(quotaDiffers).toBeGreaterThan(10);
    });

    it("keeps the budget in every combine mode, dropping the lowest retention first over it", () => {
        const random = mulberry32(7);
        const n = 30;
        const rows = Array.from({length: 4}, () => Array.from({length: n}, () => -2 * random.uniform()));
        const snap = snapshot([
            [rows[0]!, rows[1]!],
            [rows[2]!, rows[3]!]
        ]);
        for (const combine of ["aggregate", "quota", "union"] as CombineMode[]) {
            const decision = decide(trimKvPolicy, snap, {}, none, target(12), combine);
            expect(decision.keptCells).toBe(12);
            expect(decision.evict).toHaveLength(n - 12);
            expect(decision.evict.includes(0)).toBe(false);
            expect(decision.evict.some((position) => position >= n - 8)).toBe(false);
        }
    });
});
