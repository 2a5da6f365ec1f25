import {orderByPosition} from "./scoreMath.js";
import type {Policy} from "./types.js";

export type RefreeKvParams = {
    /** T, the largest relative loss of the attention norm. Defaults to `0.01` (ReFreeKV §2.2, universal). */
    threshold: number,
    /** m, the first positions ranked ahead of all others. Defaults to `4` (ReFreeKV §3.1). */
    firstM: number,
    /** Leading layers kept whole. Defaults to `2` (ReFreeKV Appendix B). */
    wholeLayers: number
};

/**
 * ReFreeKV (seed 002, Appendix A): per layer from layer `wholeLayers` on, rank cells as the first m positions then
 * the rest newest first, and keep the shortest ranked prefix whose norm of the last row's attention loses less
 * than T. Applied after prefill and, as our extension, at every prune round.
 */
export const refreeKvPolicy: Policy<RefreeKvParams, null> = {
    id: "refreekv",
    defaults: {threshold: 0.01, firstM: 4, wholeLayers: 2},
    initialState: () => null,
    // k = 1 (ReFreeKV §3.4): the last query row; squared before the head sum for the Frobenius norm.
    needs: () => ({gamma: null, squaredLast: true}),
    select(snapshot, params) {
        const n = snapshot.positions.length;
        const ranked = positionRank(snapshot.positions, params.firstM);
        const keep: Uint8Array[] = [];
        const voting: boolean[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            const mask = new Uint8Array(n);
            if (l < params.wholeLayers) {
                mask.fill(1);
                keep.push(mask);
                voting.push(false); // Whole layers would veto every eviction under the union of keep sets.
                continue;
            }
            const length = normPrefixLength(snapshot.last, l * n, ranked, params.threshold);
            for (let i = 0; i < length; i++)
                mask[ranked[i]!] = 1;
            keep.push(mask);
            voting.push(true);
        }
        return {keep, voting, state: null};
    }
};

/** ReFreeKV §2.1: X^ = {x_1..x_m, x_n, x_n-1, .., x_m+1}, as live-cell indices. */
export function positionRank(positions: Int32Array, firstM: number): Int32Array {
    const byPosition = orderByPosition(positions);
    const n = byPosition.length;
    const m = Math.min(firstM, n);
    const ranked = new Int32Array(n);
    ranked.set(byPosition.subarray(0, m));
    for (let i = 0; i < n - m; i++)
        ranked[m + i] = byPosition[n - 1 - i]!;
    return ranked;
}

/**
 * Shortest ranked prefix with 1 - ||a_prefix|| / ||a|| < T, where `squared` holds each cell's squared attention
 * summed over heads: cumulative sum then sqrt gives the prefix norm (ReFreeKV Eq. 1 and Eq. 3).
 */
export function normPrefixLength(squared: ArrayLike<number>, start: number, ranked: Int32Array, threshold: number): number {
    let total = 0;
    for (const j of ranked)
        total += squared[start + j]!;
    if (total <= 0)
        return ranked.length;
    const norm = Math.sqrt(total);
    let cumulative = 0;
    for (let i = 0; i < ranked.length; i++) {
        cumulative += squared[start + ranked[i]!]!;
        if (1 - Math.sqrt(cumulative) / norm < threshold)
            return i + 1;
    }
    return ranked.length;
}
