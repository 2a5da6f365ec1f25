import {describe, expect, it} from "vitest";
import {decide, initialDecideState} from "../../../../main/engine/policies/decide.js";
import {h2oPolicy} from "../../../../main/engine/policies/h2o.js";
import {lethePolicy, segmentedShrink} from "../../../../main/engine/policies/lethe.js";
import {normPrefixLength, positionRank, refreeKvPolicy} from "../../../../main/engine/policies/refreekv.js";
import {hoyerSparsity} from "../../../../main/engine/policies/scoreMath.js";
import {streamingLlmPolicy} from "../../../../main/engine/policies/streamingLlm.js";
import {fullPolicy} from "../../../../main/engine/policies/full.js";
import type {ScoreSnapshot} from "../../../../main/engine/policies/types.js";

/** A snapshot of cells at positions 0..n-1 with the given per-layer scores. */
function snapshot(layers: number[][], last?: number[][]): ScoreSnapshot {
    const n = layers[0]!.length;
    return {
        positions: Int32Array.from({length: n}, (_, i) => i),
        layers: layers.length,
        accumulated: Float32Array.from(layers.flat()),
        last: Float32Array.from((last ?? layers).flat())
    };
}

function kept(mask: Uint8Array): number[] {
    return [...mask].flatMap((v, i) => (v ? [i] : []));
}

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
        const s = snapshot([Array(20).fill(1)]);
        const sel = streamingLlmPolicy.select(s, {sinks: 4}, null, {maxKeep: 10});
        expect(kept(sel.keep[0]!)).toEqual([0, 1, 2, 3, 14, 15, 16, 17, 18, 19]);
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
        const sel = h2oPolicy.select(snapshot([scores]), {heavyRatio: 0.5}, null, {maxKeep: 8});
        // recent 4: 16..19; heavy 4 by score: 2, 7, 9, 5
        expect(kept(sel.keep[0]!)).toEqual([2, 5, 7, 9, 16, 17, 18, 19]);
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
        for (const j of [5, 9, 13, 17])
            scores[j] = 10;
        // 40 cells, D = 8: first cut at 5, score 0.001: 10 / 0.001 > 400 -> breakpoint 5 (the 4 heavy + the best of the rest)
        const params = {...lethePolicy.defaults, sinks: 2, recentRatio: 0.1, segments: 8};
        const sel = lethePolicy.select(snapshot([scores]), params, {evictThreshold: Float64Array.of(10)}, {maxKeep: 30});
        const keep = kept(sel.keep[0]!);
        for (const j of [0, 1, 5, 9, 13, 17, 36, 37, 38, 39])
            expect(keep).toContain(j);
        // top[:5] = 5, 9, 13, 17 and, among equal scores, the lowest index 0, already a sink: 2 + 4 + 4 cells.
        expect(keep).toHaveLength(2 + 4 + 4);
        expect(sel.state.evictThreshold[0]).toBe(Math.max(10, 5 + 4));
    });

    it("keeps everything and doubles L_evict when no breakpoint exists, and waits below L_evict", () => {
        const flat = Array(40).fill(1);
        const sel = lethePolicy.select(snapshot([flat]), lethePolicy.defaults, {evictThreshold: Float64Array.of(16)}, {maxKeep: 30});
        expect(kept(sel.keep[0]!)).toHaveLength(40);
        expect(sel.state.evictThreshold[0]).toBe(32);
        const below = lethePolicy.select(snapshot([flat]), lethePolicy.defaults, {evictThreshold: Float64Array.of(64)}, {maxKeep: 30});
        expect(kept(below.keep[0]!)).toHaveLength(40);
        expect(below.state.evictThreshold[0]).toBe(64);
    });

    it("lets layers choose different sets and sizes", () => {
        const sparse = Array(40).fill(0.0001);
        sparse[20] = 5;
        const flat = Array(40).fill(1);
        const sel = lethePolicy.select(snapshot([sparse, flat]), lethePolicy.defaults, {evictThreshold: Float64Array.of(8, 8)}, {maxKeep: 30});
        expect(kept(sel.keep[0]!).length).toBeLessThan(kept(sel.keep[1]!).length);
    });
});

describe("ReFreeKV", () => {
    it("ranks the first m positions, then the rest newest first", () => {
        const positions = Int32Array.of(7, 0, 3, 1, 9, 2, 5);
        expect([...positionRank(positions, 2)].map((j) => positions[j])).toEqual([0, 1, 9, 7, 5, 3, 2]);
    });

    it("keeps the shortest ranked prefix whose norm loses less than T", () => {
        // Ranked squared masses 0.5, 0.3, 0.15, 0.05: norms sqrt(.5)=.707 (loss .293), sqrt(.8)=.894 (.106),
        // sqrt(.95)=.975 (.025), 1 (0). T = 0.03 -> 3 cells; T = 0.2 -> 2 cells.
        const squared = [0.5, 0.3, 0.15, 0.05];
        const ranked = Int32Array.of(0, 1, 2, 3);
        expect(normPrefixLength(squared, 0, ranked, 0.03)).toBe(3);
        expect(normPrefixLength(squared, 0, ranked, 0.2)).toBe(2);
    });

    it("keeps more for diffuse attention than for peaked, and layers 0 and 1 whole without a vote", () => {
        const n = 64;
        const diffuse = Array(n).fill(1 / n).map((v) => v * v);
        const peaked = Array(n).fill(0.0001).map((v, j) => (j >= n - 3 || j < 2 ? 0.3 : v)).map((v) => v * v);
        const s = snapshot([diffuse, diffuse, diffuse, peaked], [diffuse, diffuse, diffuse, peaked]);
        const sel = refreeKvPolicy.select(s, refreeKvPolicy.defaults, null, {maxKeep: n});
        expect(sel.voting).toEqual([false, false, true, true]);
        expect(kept(sel.keep[0]!)).toHaveLength(n);
        expect(kept(sel.keep[2]!).length).toBeGreaterThan(kept(sel.keep[3]!).length);
        expect(kept(sel.keep[3]!).length).toBeLessThanOrEqual(8);
    });
});

describe("combining layers and the budget", () => {
    it("union frees a cell only when no layer keeps it; aggregate selects once", () => {
        const a = Array(24).fill(0.01);
        a[3] = 5;
        const b = Array(24).fill(0.01);
        b[6] = 5;
        const s = snapshot([a, b]);
        // Per layer, H2O keeps its own heavy hitter: under the union both survive.
        const union = decide(h2oPolicy, s, {heavyRatio: 0.5}, {perLayer: null, aggregate: null}, {maxKeep: 12}, "union");
        expect(union.evict).not.toContain(3);
        expect(union.evict).not.toContain(6);
        expect(union.keptCells).toBeLessThanOrEqual(12);
        const aggregate = decide(h2oPolicy, s, {heavyRatio: 0.5}, {perLayer: null, aggregate: null}, {maxKeep: 12}, "aggregate");
        expect(aggregate.evict).not.toContain(3);
        expect(aggregate.evict).not.toContain(6);
        expect(aggregate.keptCells).toBe(12);
        // The newest 8 positions and position 0 are never freed.
        for (const p of [0, 16, 17, 18, 19, 20, 21, 22, 23])
            expect(aggregate.evict).not.toContain(p);
    });

    it("keeps Lethe's L_evict separately for the per-layer and the aggregated selection", () => {
        const flat = Array(40).fill(1);
        const s = snapshot([flat, flat, flat]);
        const first = decide(lethePolicy, s, lethePolicy.defaults, initialDecideState(lethePolicy, lethePolicy.defaults, 30), {maxKeep: 30}, "aggregate");
        expect(first.state.perLayer.evictThreshold).toHaveLength(3);
        expect(first.state.aggregate.evictThreshold).toHaveLength(1);
        // No breakpoint on flat scores: both double from 15 to 30, and the budget cap forces the drops.
        expect([...first.state.aggregate.evictThreshold]).toEqual([30]);
        expect(first.forcedDrops).toBe(10);
        const second = decide(lethePolicy, s, lethePolicy.defaults, first.state, {maxKeep: 30}, "aggregate");
        expect([...second.state.aggregate.evictThreshold]).toEqual([60]);
    });

    it("drops the lowest-scored cells past the budget and counts them as forced", () => {
        const s = snapshot([Array.from({length: 20}, (_, j) => j + 1)]);
        const decision = decide(fullPolicy, s, {}, {perLayer: null, aggregate: null}, {maxKeep: 15}, "union");
        expect(decision.keptCells).toBe(15);
        expect(decision.forcedDrops).toBe(5);
        // Lowest scores are at positions 1..5 (position 0 is protected).
        expect([...decision.evict]).toEqual([1, 2, 3, 4, 5]);
    });

    it("never evicts position 0 nor the newest position, and kept + evicted = live", () => {
        const scores = Array(30).fill(1);
        scores[0] = 0;
        scores[29] = 0;
        const decision = decide(streamingLlmPolicy, snapshot([scores]), {sinks: 0}, {perLayer: null, aggregate: null}, {maxKeep: 6}, "union");
        expect(decision.evict).not.toContain(0);
        expect(decision.evict).not.toContain(29);
        expect(decision.keptCells + decision.evict.length).toBe(30);
    });
});
