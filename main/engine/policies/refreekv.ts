import {defaultParams} from "../../../preload/policyCatalogue.js";
import {orderByPosition} from "./scoreMath.js";
import type {Policy, SelectorChoice} from "./types.js";

export type RefreeKvParams = {
    /** T, the largest relative loss of the attention norm. Defaults to `0.01` (ReFreeKV §2.2, universal). */
    threshold: number;
    /** m, the first positions ranked ahead of all others. Defaults to `4` (ReFreeKV §3.1). */
    firstM: number;
    /** Leading layers kept whole. Defaults to `2` (ReFreeKV Appendix B). */
    wholeLayers: number;
    /**
     * `"once"`: the paper's method, one pruning after prefill (Appendix A); later the budget alone evicts, by the same
     * position ranking. `"rounds"`: our extension, the 1% test at every prune round against the pruned cache. Defaults
     * to `"once"`.
     */
    mode: "once" | "rounds";
};

/**
 * ReFreeKV (seed 002, §2.2 and Appendix A): per layer from layer `wholeLayers` on and per attention head, rank cells as
 * the first m positions then the rest newest first, and keep the shortest ranked prefix whose norm of the last query
 * row's attention (k = 1, §2.3) loses less than T (Eq. 1, via the cumulative sum of Eq. 3).
 */
export const refreeKvPolicy: Policy<RefreeKvParams, null> = {
    id: "refreekv",
    defaults: defaultParams("refreekv"),
    initialState: () => null,
    needs: () => ({gamma: null, allRows: false}),
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const ranked = positionRank(snapshot.positions, params.firstM);
        const test = target.phase === "after-prefill" || params.mode === "rounds";
        const structural = Math.min(params.firstM, n);
        const selectors: SelectorChoice[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            const whole = !snapshot.aggregated && l < params.wholeLayers;
            if (whole || !test) {
                // Whole layers (Appendix B) would veto every eviction on shared cells, so they do not vote.
                selectors.push({order: ranked, quota: n, structural, layer: l, voting: !whole});
                continue;
            }
            for (let h = 0; h < snapshot.heads; h++) {
                const quota = normPrefixLength(snapshot.last, (l * snapshot.heads + h) * n, ranked, params.threshold);
                selectors.push({order: ranked, quota, structural, layer: l, voting: true});
            }
        }
        return {selectors, state: null};
    }
};

/** ReFreeKV §2.1: X^ = {x_1..x_m, x_n, x_n-1, .., x_m+1}, as live-cell indices. */
export function positionRank(positions: Int32Array, firstM: number): Int32Array {
    const byPosition = orderByPosition(positions);
    const n = byPosition.length;
    const m = Math.min(firstM, n);
    const ranked = new Int32Array(n);
    ranked.set(byPosition.subarray(0, m));
    for (let i = 0; i < n - m; i++) ranked[m + i] = byPosition[n - 1 - i]!;
    return ranked;
}

/**
 * Shortest ranked prefix with 1 - ||a_prefix|| / ||a|| < T for one head's attention row `a` (Appendix A: square,
 * reorder by rank, cumulative sum, sqrt; Eq. 1 and Eq. 3).
 */
export function normPrefixLength(attention: ArrayLike<number>, start: number, ranked: Int32Array, threshold: number): number {
    let total = 0;
    for (const j of ranked) total += attention[start + j]! ** 2;
    if (total <= 0) return ranked.length;
    const norm = Math.sqrt(total);
    let cumulative = 0;
    for (let i = 0; i < ranked.length; i++) {
        cumulative += attention[start + ranked[i]!]! ** 2;
        if (1 - Math.sqrt(cumulative) / norm < threshold) return i + 1;
    }
    return ranked.length;
}
