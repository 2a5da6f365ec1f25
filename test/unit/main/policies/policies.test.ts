import {describe, expect, it} from "vitest";
import {decide, initialDecideState} from "../../../../main/engine/policies/decide.js";
import {h2oPolicy} from "../../../../main/engine/policies/h2o.js";
import {lethePolicy, segmentedShrink, type LetheState} from "../../../../main/engine/policies/lethe.js";
import {normPrefixLength, positionRank, refreeKvPolicy} from "../../../../main/engine/policies/refreekv.js";
import {hoyerSparsity, kvHeadOf} from "../../../../main/engine/policies/scoreMath.js";
import {streamingLlmPolicy} from "../../../../main/engine/policies/streamingLlm.js";
import {fullPolicy} from "../../../../main/engine/policies/full.js";
import type {PruneTarget, ScoreSnapshot, SelectorChoice} from "../../../../main/engine/policies/types.js";

/** A snapshot of cells at positions 0..n-1; `layers[l][h]` is head h of layer l (or `layers[l]` one head). */
function snapshot(layers: number[][] | number[][][], last?: number[][] | number[][][]): ScoreSnapshot {
    const perHead = (value: number[][] | number[][][]) =>
        typeof value[0]![0] === "number" ? (value as number[][]).map((row) => [row]) : (value as number[][][]);
    const acc = perHead(layers);
    const n = acc[0]![0]!.length;
    return {
        positions: Int32Array.from({length: n}, (_, i) => i),
        layers: acc.length,
        heads: acc[0]!.length,
        accumulated: Float32Array.from(acc.flat(2)),
        last: Float32Array.from(perHead(last ?? layers).flat(2))
    };
}

const decode = (maxKeep: number): PruneTarget => ({maxKeep, phase: "decode"});

/** Cells a selector keeps on its own: the top of its ranking up to its quota. */
function kept(choice: SelectorChoice): number[] {
    return [...choice.order.subarray(0, choice.quota)].sort((a, b) => a - b);
}

const none = {perLayer: null, aggregate: null};

/** Cells layer `layer`'s own selection keeps in a round (`keptByLayer`, `layers x n`). */
function ownKept(decision: {keptByLayer: Uint8Array; cellScores: Float32Array}, layer: number): number {
    const n = decision.cellScores.length;
    return decision.keptByLayer.subarray(layer * n, (layer + 1) * n).reduce((sum, kept) => sum + kept, 0);
}

describe("grouped-query attention's head mapping", () => {
    it("maps query heads to KV heads in contiguous groups, as llama.cpp does, and refuses counts that do not divide", () => {
        expect(Array.from({length: 6}, (_, q) => kvHeadOf(q, 6, 2))).toEqual([0, 0, 0, 1, 1, 1]);
        expect(Array.from({length: 4}, (_, q) => kvHeadOf(q, 4, 4))).toEqual([0, 1, 2, 3]);
        expect(Array.from({length: 8}, (_, q) => kvHeadOf(q, 8, 1))).toEqual(new Array(8).fill(0));
        expect(() => kvHeadOf(0, 6, 4)).toThrow(/do not divide/);
    });
});

describe("Hoyer sparsity (Lethe Eq. 1)", () => {
    it("is 0 for a flat vector and 1 for a one-hot vector", () => {
        expect(hoyerSparsity([1, 1, 1, 1])).toBeCloseTo(0);
        expect(hoyerSparsity([0, 0, 5, 0])).toBeCloseTo(1);
        // n = 4, a = [3, 4, 0, 0]: |a|1 = 7, |a|2 = 5: (2 - 1.4) / 1 = 0.6
        expect(hoyerSparsity([3, 4, 0, 0])).toBeCloseTo(0.6);
    });
});

describe("StreamingLLM", () => {
    it("keeps exactly the sinks and the recent window", () => {
        const decision = decide(streamingLlmPolicy, snapshot([Array(20).fill(1)]), {sinks: 4}, none, decode(16), "aggregate");
        expect([...decision.evict]).toEqual([4, 5, 6, 7]);
    });
});

describe("H2O", () => {
    it("keeps the heavy hitters and the recent window, half and half", () => {
        const scores = Array(20).fill(0.1);
        scores[2] = 9;
        scores[7] = 8;
        scores[9] = 7;
        scores[5] = 6;
        scores[11] = 0.5;
        const sel = h2oPolicy.select(snapshot([scores]), {heavyRatio: 0.5}, null, decode(8));
        // recent 4: 16..19; heavy 4 by score: 2, 7, 9, 5
        expect(kept(sel.selectors[0]!)).toEqual([2, 5, 7, 9, 16, 17, 18, 19]);
    });

    it("lets every head keep its own heavy hitters: a cell one head needs survives a sum that dilutes it", () => {
        // Head 0 spreads its attention over many old cells; head 1 (a lookup head) puts all of it on cell 3.
        const spread = Array.from({length: 40}, (_, j) => (j < 30 ? 1 + (j % 7) * 0.1 : 0.5));
        const lookup = Array(40).fill(0);
        lookup[3] = 0.25;
        const perHead = decide(h2oPolicy, snapshot([[spread, lookup]]), {heavyRatio: 0.25}, none, decode(16), "quota");
        expect(perHead.evict).not.toContain(3);
        // Summed over heads first, cell 3 (1.3 + 0.25) falls behind the spread head's best cells (1.6) and goes.
        const summed = decide(h2oPolicy, snapshot([spread.map((v, j) => v + lookup[j]!)]), {heavyRatio: 0.25}, none, decode(16), "quota");
        expect(summed.evict).toContain(3);
    });
});

describe("Lethe Algorithm 1", () => {
    it("finds the breakpoint at the first cut whose score fell more than tau below the top", () => {
        // 16 cells, D = 4: cuts at 4, 8, 12. Sorted: 4 cells at 1000, 4 at 10, rest at 1.
        const scores = [...Array(4).fill(1000), ...Array(4).fill(10), ...Array(8).fill(1)];
        // cut 4: 1000/10 = 100 <= 400; cut 8: 1000/1 = 1000 > 400 -> breakpoint 8
        const r = segmentedShrink(scores, 0, 16, {sparseRatio: 400, recentRatio: 0.25, segments: 4});
        expect(r.breakpoint).toBe(8);
        expect(r.recent).toBe(4);
        // A larger tau is more conservative: no cut drops 2000x.
        expect(segmentedShrink(scores, 0, 16, {sparseRatio: 2000, recentRatio: 0.25, segments: 4}).breakpoint).toBe(-1);
    });

    it("keeps top[:breakpoint] + sinks + recent, and raises L_evict to breakpoint + r", () => {
        const scores = Array(40).fill(0.001);
        for (const j of [5, 9, 13, 17]) scores[j] = 10;
        // 40 cells, D = 8: first cut at 5, score 0.001: 10 / 0.001 > 400 -> breakpoint 5 (the 4 heavy + the best of the rest)
        const params = {...lethePolicy.defaults, sinks: 2, recentRatio: 0.1, segments: 8};
        const sel = lethePolicy.select(snapshot([scores]), params, {evictThreshold: Float64Array.of(10)}, decode(30));
        const keep = kept(sel.selectors[0]!);
        for (const j of [0, 1, 5, 9, 13, 17, 36, 37, 38, 39]) expect(keep).toContain(j);
        // top[:5] = 5, 9, 13, 17 and, among equal scores, the lowest index 0, already a sink: 2 + 4 + 4 cells.
        expect(keep).toHaveLength(2 + 4 + 4);
        expect(sel.state.evictThreshold[0]).toBe(Math.max(10, 5 + 4));
    });

    it("sums heads before ranking (Eq. 2)", () => {
        const a = Array(40).fill(0.001);
        const b = Array(40).fill(0.001);
        a[5] = 10;
        b[9] = 10;
        const params = {...lethePolicy.defaults, sinks: 0, recentRatio: 0, segments: 8};
        const sel = lethePolicy.select(snapshot([[a, b]]), params, {evictThreshold: Float64Array.of(10)}, decode(30));
        expect(sel.selectors).toHaveLength(1);
        expect(kept(sel.selectors[0]!)).toEqual(expect.arrayContaining([5, 9]));
    });

    it("keeps everything and doubles L_evict when no breakpoint exists, and waits below L_evict", () => {
        const flat = Array(40).fill(1);
        const sel = lethePolicy.select(snapshot([flat]), lethePolicy.defaults, {evictThreshold: Float64Array.of(16)}, decode(50));
        expect(kept(sel.selectors[0]!)).toHaveLength(40);
        expect(sel.state.evictThreshold[0]).toBe(32);
        const below = lethePolicy.select(snapshot([flat]), lethePolicy.defaults, {evictThreshold: Float64Array.of(64)}, decode(80));
        expect(kept(below.selectors[0]!)).toHaveLength(40);
        expect(below.state.evictThreshold[0]).toBe(64);
    });

    it("keeps running Algorithm 1 under a hard cap: L_evict never grows past what the budget allows", () => {
        const flat = Array(40).fill(1);
        const peaked = Array(40).fill(0.0001);
        peaked[20] = 5;
        let state: LetheState = {evictThreshold: Float64Array.of(16)};
        // Several rounds with no breakpoint: L_evict doubles 16 -> 30 (capped at maxKeep), not 16 -> 32 -> 64 -> 128.
        for (let round = 0; round < 4; round++) state = lethePolicy.select(snapshot([flat]), lethePolicy.defaults, state, decode(30)).state;
        expect(state.evictThreshold[0]).toBe(30);
        // Attention sharpens later in the chain of thought: Algorithm 1 still runs and prunes by itself.
        const later = lethePolicy.select(snapshot([peaked]), lethePolicy.defaults, state, decode(30));
        expect(later.selectors[0]!.quota).toBeLessThan(30);
        const decision = decide(
            lethePolicy,
            snapshot([peaked]),
            lethePolicy.defaults,
            {perLayer: state, aggregate: state},
            decode(30),
            "quota"
        );
        expect(decision.forcedDrops).toBe(0);
    });

    it("lets layers choose different sets and sizes", () => {
        const sparse = Array(40).fill(0.0001);
        sparse[20] = 5;
        const flat = Array(40).fill(1);
        const sel = lethePolicy.select(snapshot([sparse, flat]), lethePolicy.defaults, {evictThreshold: Float64Array.of(8, 8)}, decode(30));
        expect(sel.selectors[0]!.quota).toBeLessThan(sel.selectors[1]!.quota);
    });

    it("keeps the input whole while it takes at most keepInput of the budget, and ranks it by RASR otherwise", () => {
        // 60 cells: a 20-cell question nobody has attended yet (0..19), then 40 generated cells with some attention.
        const scores = Array.from({length: 60}, (_, i) => (i < 20 ? 0 : 1 + (i % 7)));
        const target = (maxKeep: number): PruneTarget => ({maxKeep, phase: "decode", inputEnd: 20});
        const questionKept = (decision: {evict: Int32Array}) => 20 - [...decision.evict].filter((p) => p < 20).length;
        const state = () => initialDecideState(lethePolicy, lethePolicy.defaults, 40);
        // 20 <= 0.5 * 40: the question survives whole, within the budget.
        const keptWhole = decide(lethePolicy, snapshot([scores]), lethePolicy.defaults, state(), target(40), "aggregate");
        expect(questionKept(keptWhole)).toBe(20);
        expect(keptWhole.keptCells).toBeLessThanOrEqual(40);
        // 20 > 0.5 * 30: it would crowd out the thoughts, so its unattended cells go (the 4 sinks stay).
        expect(questionKept(decide(lethePolicy, snapshot([scores]), lethePolicy.defaults, state(), target(30), "aggregate"))).toBe(4);
        // keepInput 0, or no input known yet (a prompt still being read): RASR alone.
        expect(
            questionKept(decide(lethePolicy, snapshot([scores]), {...lethePolicy.defaults, keepInput: 0}, state(), target(40), "aggregate"))
        ).toBe(4);
        expect(questionKept(decide(lethePolicy, snapshot([scores]), lethePolicy.defaults, state(), decode(40), "aggregate"))).toBe(4);
    });
});

describe("ReFreeKV", () => {
    it("ranks the first m positions, then the rest newest first", () => {
        const positions = Int32Array.of(7, 0, 3, 1, 9, 2, 5);
        expect([...positionRank(positions, 2)].map((j) => positions[j])).toEqual([0, 1, 9, 7, 5, 3, 2]);
    });

    it("keeps the shortest ranked prefix whose norm loses less than T", () => {
        // Ranked attention sqrt(.5), sqrt(.3), sqrt(.15), sqrt(.05): norms .707 (loss .293), .894 (.106), .975 (.025), 1 (0).
        // T = 0.03 -> 3 cells; T = 0.2 -> 2 cells.
        const attention = [0.5, 0.3, 0.15, 0.05].map(Math.sqrt);
        const ranked = Int32Array.of(0, 1, 2, 3);
        expect(normPrefixLength(attention, 0, ranked, 0.03)).toBe(3);
        expect(normPrefixLength(attention, 0, ranked, 0.2)).toBe(2);
    });

    it("tests every head: one head that looks far back keeps the longer prefix", () => {
        const n = 64;
        const recentHead = Array.from({length: n}, (_, j) => (j >= n - 4 ? 0.25 : 0));
        const farHead = Array.from({length: n}, (_, j) => (j === 10 ? 0.5 : j >= n - 2 ? 0.25 : 0));
        const s = snapshot([
            [recentHead, recentHead],
            [recentHead, recentHead],
            [recentHead, farHead]
        ]);
        const sel = refreeKvPolicy.select(s, refreeKvPolicy.defaults, null, {maxKeep: n, phase: "after-prefill"});
        const quotas = sel.selectors.filter((choice) => choice.layer === 2).map((choice) => choice.quota);
        expect(quotas[0]).toBeLessThanOrEqual(4 + 4);
        // Position 10 is rank 4 + (63 - 10) = 57: the far head keeps 58 cells.
        expect(quotas[1]).toBe(58);
        const decision = decide(refreeKvPolicy, s, refreeKvPolicy.defaults, none, {maxKeep: n, phase: "after-prefill"}, "quota");
        expect(decision.evict).not.toContain(10);
    });

    it("keeps layers 0 and 1 whole without a vote", () => {
        const n = 64;
        const peaked = Array.from({length: n}, (_, j) => (j >= n - 3 || j < 2 ? 0.2 : 0.0001));
        const diffuse = Array(n).fill(1 / n);
        const s = snapshot([diffuse, diffuse, peaked], [diffuse, diffuse, peaked]);
        const sel = refreeKvPolicy.select(s, refreeKvPolicy.defaults, null, {maxKeep: n, phase: "after-prefill"});
        expect(sel.selectors.map((choice) => choice.voting)).toEqual([false, false, true]);
        expect(sel.selectors[0]!.quota).toBe(n);
        expect(sel.selectors[2]!.quota).toBeLessThanOrEqual(8);
    });

    it("runs its criterion on the aggregated scores too (the aggregate is not layer 0)", () => {
        const n = 64;
        const peaked = Array.from({length: n}, (_, j) => (j >= n - 3 || j < 2 ? 0.2 : 0.0001));
        const s = snapshot([peaked, peaked, peaked, peaked]);
        const decision = decide(refreeKvPolicy, s, refreeKvPolicy.defaults, none, {maxKeep: n, phase: "after-prefill"}, "aggregate");
        // Nothing forces a drop (maxKeep = n): every eviction is the 1% criterion's.
        expect(decision.forcedDrops).toBe(0);
        expect(decision.keptCells).toBeLessThanOrEqual(12);
    });

    it("prunes once after the prompt in the paper's mode, at every round as the labelled extension", () => {
        const n = 64;
        const peaked = Array.from({length: n}, (_, j) => (j >= n - 3 || j < 2 ? 0.2 : 0.0001));
        const s = snapshot([peaked, peaked, peaked]);
        const once = decide(refreeKvPolicy, s, refreeKvPolicy.defaults, none, decode(n), "aggregate");
        expect(once.evict).toHaveLength(0);
        const rounds = decide(refreeKvPolicy, s, {...refreeKvPolicy.defaults, mode: "rounds"}, none, decode(n), "aggregate");
        expect(rounds.evict.length).toBeGreaterThan(40);
        // Over the budget the paper's mode still evicts, by its own ranking: the oldest after the first m.
        const capped = decide(refreeKvPolicy, s, refreeKvPolicy.defaults, none, decode(40), "aggregate");
        expect([...capped.evict]).toEqual(Array.from({length: 24}, (_, i) => 4 + i));
    });
});

describe("combining selections and the budget", () => {
    it("union frees a cell only when no layer keeps it; aggregate selects once", () => {
        const a = Array(24).fill(0.01);
        a[3] = 5;
        const b = Array(24).fill(0.01);
        b[6] = 5;
        const s = snapshot([a, b]);
        for (const combine of ["union", "quota", "aggregate"] as const) {
            const decision = decide(h2oPolicy, s, {heavyRatio: 0.5}, none, decode(12), combine);
            expect(decision.evict).not.toContain(3);
            expect(decision.evict).not.toContain(6);
            expect(decision.keptCells).toBeLessThanOrEqual(12);
            // The newest 8 positions and position 0 are never freed.
            for (const p of [0, 16, 17, 18, 19, 20, 21, 22, 23]) expect(decision.evict).not.toContain(p);
        }
    });

    it("quota mode: every layer keeps the top of its own ranking, quotas scaled by one factor to fit the budget", () => {
        // Layer 0 is sparse (Lethe finds a small quota), layer 1 flat (no breakpoint: it wants everything).
        const sparse = Array(80).fill(0.0001);
        sparse[10] = 5;
        sparse[11] = 4;
        const flat = Array.from({length: 80}, (_, j) => 1 + ((j * 37) % 80) / 1000);
        const params = {...lethePolicy.defaults, sinks: 0, recentRatio: 0};
        const state = {evictThreshold: Float64Array.of(8, 8)};
        const decision = decide(lethePolicy, snapshot([sparse, flat]), params, {perLayer: state, aggregate: state}, decode(40), "quota");
        expect(decision.keptCells).toBe(40);
        // The sparse layer's few salient cells go in first: its quota is small, so each of its cells is a large share.
        expect(decision.evict).not.toContain(10);
        expect(decision.evict).not.toContain(11);
        // The flat layer's best-scored cells fill the rest.
        expect(ownKept(decision, 1) / 80).toBeGreaterThan(0.3);
    });

    it("reads out per layer which cells its own selection would keep, and the shared cells' share", () => {
        // 80 live cells of 400 tokens seen (320 already evicted). Layer 0 is sparse (its own scores keep a few cells),
        // layer 1 flat (it would keep every live cell); the shared round keeps 40.
        const sparse = Array(80).fill(0.0001);
        sparse[10] = 5;
        sparse[11] = 4;
        const flat = Array.from({length: 80}, (_, j) => 1 + ((j * 37) % 80) / 1000);
        const params = {...lethePolicy.defaults, sinks: 0, recentRatio: 0};
        const state = {evictThreshold: Float64Array.of(8, 8)};
        const s = snapshot([sparse, flat]);
        for (const combine of ["quota", "aggregate"] as const) {
            const decision = decide(lethePolicy, s, params, {perLayer: state, aggregate: state}, {...decode(40), tokensSeen: 400}, combine);
            const own = lethePolicy.select(s, params, state, decode(40)).selectors.map((choice) => choice.quota);
            expect(ownKept(decision, 0)).toBe(own[0]!);
            expect(ownKept(decision, 1)).toBe(80);
            expect(ownKept(decision, 0)).toBeLessThan(20);
            // The sparse layer's own pick is its two salient cells first.
            expect(decision.keptByLayer[10]).toBe(1);
            expect(decision.keptByLayer[11]).toBe(1);
            expect(decision.keptShare).toBeCloseTo(40 / 400);
        }
        // Without the count, the tokens seen are the newest live position + 1.
        const decision = decide(lethePolicy, s, params, {perLayer: state, aggregate: state}, decode(40), "quota");
        expect(decision.keptShare).toBeCloseTo(0.5);
    });

    it("over the budget, drops the policy's scored cells before its sinks and recent window", () => {
        // H2O: the recent window is 10 cells; old cells with large scores must not push it out.
        const scores = Array.from({length: 60}, (_, j) => (j < 50 ? 100 - j : 0));
        for (const combine of ["union", "quota", "aggregate"] as const) {
            const decision = decide(h2oPolicy, snapshot([scores, scores]), {heavyRatio: 0.5}, none, decode(20), combine);
            for (let p = 50; p < 60; p++) expect(decision.evict).not.toContain(p);
            expect(decision.keptCells).toBe(20);
        }
    });

    it("drops the lowest-ranked cells past the budget and counts them as forced", () => {
        const s = snapshot([Array.from({length: 20}, (_, j) => j + 1)]);
        const decision = decide(fullPolicy, s, {}, none, decode(15), "quota");
        expect(decision.keptCells).toBe(15);
        expect(decision.forcedDrops).toBe(5);
        // Full ranks by recency: the oldest go (position 0 is protected).
        expect([...decision.evict]).toEqual([1, 2, 3, 4, 5]);
    });

    it("keeps Lethe's L_evict separately for the per-layer and the aggregated selection", () => {
        const flat = Array(40).fill(1);
        const s = snapshot([flat, flat, flat]);
        const first = decide(
            lethePolicy,
            s,
            lethePolicy.defaults,
            initialDecideState(lethePolicy, lethePolicy.defaults, 30),
            decode(30),
            "aggregate"
        );
        expect(first.state.perLayer.evictThreshold).toHaveLength(3);
        expect(first.state.aggregate.evictThreshold).toHaveLength(1);
        // No breakpoint on flat scores: both double from 15 to 30 (the cap), and the budget forces the drops.
        expect([...first.state.aggregate.evictThreshold]).toEqual([30]);
        expect(first.forcedDrops).toBe(10);
    });

    it("never evicts position 0 nor the newest position, and kept + evicted = live", () => {
        const scores = Array(30).fill(1);
        scores[0] = 0;
        scores[29] = 0;
        for (const combine of ["union", "quota", "aggregate"] as const) {
            const decision = decide(streamingLlmPolicy, snapshot([scores]), {sinks: 0}, none, decode(6), combine);
            expect(decision.evict).not.toContain(0);
            expect(decision.evict).not.toContain(29);
            expect(decision.keptCells + decision.evict.length).toBe(30);
        }
    });
});
