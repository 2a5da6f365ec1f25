import {defaultParams} from "../../../preload/policyCatalogue.js";
import {orderByPosition, rankDescending, structuredOrder, sumHeads} from "./scoreMath.js";
import type {HeadCellsSnapshot, HeadKeepTarget, Policy, PruneTarget, SelectorChoice} from "./types.js";

export type LetheParams = {
    /** tau: the largest ratio of the top score to a segment's score still counted as salient. Defaults to `400` (Lethe §5 ablation). */
    sparseRatio: number;
    /** Share of the current cache kept as the recent window r (our reading: of the cache length K). Defaults to `0.3`. */
    recentRatio: number;
    /** D, the number of segments the sorted scores are cut into. Defaults to `8` (the paper gives none). */
    segments: number;
    /** s_len, attention sinks always kept. Defaults to `4` (the paper gives none). */
    sinks: number;
    /** gamma of RASR's decay. Defaults to `0.95` (the paper gives none). */
    gamma: number;
    /** First L_evict as a share of the budget. Defaults to `0.5` (the paper gives none). */
    initialEvictRatio: number;
    /**
     * Keep the turn's input (the question, earlier turns) whole while it takes at most this share of the budget; `0`
     * never. Defaults to `0.5`. Not in the paper: see `protectedInput`.
     */
    keepInput: number;
};

export type LetheState = {
    /** L_evict per layer: a layer prunes only when the cache is longer. */
    evictThreshold: Float64Array;
};

/**
 * Lethe (seed 000): RASR scores (Eq. 5, accumulated natively with decay gamma, summed over heads as Eq. 2) and, per
 * layer, Algorithm 1's segmented shrinking with its own L_evict. Each layer's result is its quota: the cells it is
 * owed (sinks + recent + top[:breakpoint]), so layers keep different sets and sizes (§4 spatial adaptivity).
 */
export const lethePolicy: Policy<LetheParams, LetheState> = {
    id: "lethe",
    defaults: defaultParams("lethe"),
    initialState: () => ({evictThreshold: new Float64Array(0)}),
    needs: (params) => ({gamma: params.gamma, allRows: true}),
    select(snapshot, params, state, target) {
        const n = snapshot.positions.length;
        const byPosition = orderByPosition(snapshot.positions);
        const scores = sumHeads(snapshot.accumulated, snapshot.layers, snapshot.heads, n);
        const thresholds =
            state.evictThreshold.length === snapshot.layers
                ? Float64Array.from(state.evictThreshold)
                : new Float64Array(snapshot.layers).fill(Math.max(1, Math.floor(target.maxKeep * params.initialEvictRatio)));

        const selectors: SelectorChoice[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            const recent = Math.floor(params.recentRatio * n);
            const {order, structural} = structuredOrder(byPosition, params.sinks, recent, scores, l * n);
            let quota = n;
            if (n > thresholds[l]!) {
                const {order: top, breakpoint} = segmentedShrink(scores, l * n, n, params);
                if (breakpoint >= 0) {
                    // Algorithm 1 lines 12-15: sinks + recent + top_indices[:breakpoint]
                    quota = structural + countOutside(top, breakpoint, order, structural);
                    thresholds[l] = Math.max(thresholds[l]!, breakpoint + recent); // line 16
                } else {
                    thresholds[l] = 2 * thresholds[l]!; // line 18: no breakpoint, delay pruning
                }
                // Our addition under a hard budget: L_evict never grows past what the budget allows, so Algorithm 1
                // keeps running through the whole chain of thought instead of leaving every eviction to the cap.
                thresholds[l] = Math.min(thresholds[l]!, target.maxKeep);
            }
            selectors.push({order, quota, structural, layer: l, voting: true});
        }
        return {selectors, state: {evictThreshold: thresholds}, protect: protectedInput(snapshot.positions, target, params.keepInput)};
    },
    keepPerHead: letheKeepPerLayer
};

/**
 * Lethe on per-head cells, per layer at equal counts (§4's per-layer selection without its layer-adaptive sizes: every
 * layer keeps the round's count): each layer ranks its tokens by RASR summed over its heads (Eq. 2), its sinks, recent
 * window and protected input first, and all of its KV heads keep that layer's top tokens. Unequal layer budgets would
 * need a layer to leave some of the common cells unread (a mask per layer), which the engine does not have.
 */
function letheKeepPerLayer(snapshot: HeadCellsSnapshot, params: LetheParams, target: HeadKeepTarget): Int32Array[] {
    const {layers, heads, n, tokens, accumulated} = snapshot;
    if (accumulated == null) throw new Error("Lethe needs the attention scores, and this round read none");
    const keep = Math.min(n, target.count);
    const recent = Math.floor(params.recentRatio * n);
    const kept: Int32Array[] = [];
    for (let l = 0; l < layers; l++) {
        // the layer's score of a token: what each of its KV heads holding it received
        const score = new Map<number, number>();
        for (let i = l * heads * n; i < (l + 1) * heads * n; i++) score.set(tokens[i]!, (score.get(tokens[i]!) ?? 0) + accumulated[i]!);
        const byAge = [...score.keys()].sort((a, b) => a - b);
        const structure = new Set([...byAge.slice(0, params.sinks), ...byAge.slice(Math.max(0, byAge.length - recent)), ...target.pinned]);
        const input = target.inputEnd == null || !(params.keepInput > 0) ? [] : byAge.filter((token) => token < target.inputEnd!);
        if (input.length > 0 && input.length <= params.keepInput * target.count) for (const token of input) structure.add(token);
        // one order for the layer (structure, then score, then the newer token), so that every head of it keeps the same tokens
        const rank = (a: number, b: number) =>
            Number(structure.has(b)) - Number(structure.has(a)) || score.get(b)! - score.get(a)! || b - a;
        const ranked = [...byAge].sort(rank);
        for (let h = 0; h < heads; h++) {
            const held = new Set(tokens.subarray((l * heads + h) * n, (l * heads + h + 1) * n));
            kept.push(Int32Array.from(ranked.filter((token) => held.has(token)).slice(0, keep)));
        }
    }
    return kept;
}

/**
 * The input's cells, when they take at most `share` of the budget; else none. Attention history cannot see what a
 * question will be asked for next: the parts of it not read yet score as low as filler, so RASR frees them just
 * before they are needed. Where the input leaves at least the rest of the budget to the chain of thought, it is
 * kept whole (as reasoning-cache methods that compress only the generated thoughts do); where it would crowd out
 * the thoughts, RASR ranks it with them.
 */
export function protectedInput(positions: Int32Array, target: PruneTarget, share: number): Int32Array | undefined {
    const end = target.inputEnd;
    if (end == null || !(share > 0)) return undefined;
    const cells: number[] = [];
    for (let j = 0; j < positions.length; j++) {
        if (positions[j]! < end) cells.push(j);
    }
    return cells.length > 0 && cells.length <= share * target.maxKeep ? Int32Array.from(cells) : undefined;
}

/** How many of `top[:count]` are not among the first `structural` cells of `order`. */
function countOutside(top: Int32Array, count: number, order: Int32Array, structural: number): number {
    const inStructure = new Set(order.subarray(0, structural));
    let outside = 0;
    for (let i = 0; i < count; i++) {
        if (!inStructure.has(top[i]!)) outside++;
    }
    return outside;
}

/**
 * Algorithm 1 (Lethe §4) on one layer's scores: the first cut point c = floor(K d / D) whose score has
 * fallen more than tau below the top score is the breakpoint; -1 when none has. The box prints the test as
 * `<= tau`, but the prose (a larger sparse_ratio prunes more conservatively; no breakpoint delays pruning)
 * only holds for `> tau`, so we follow the prose.
 */
export function segmentedShrink(
    scores: ArrayLike<number>,
    start: number,
    n: number,
    params: Pick<LetheParams, "sparseRatio" | "recentRatio" | "segments">
) {
    const order = rankDescending(scores, start, n);
    const recent = Math.floor(params.recentRatio * n);
    const head = scores[start + order[0]!]!;
    let breakpoint = -1;
    if (head > 0) {
        for (let d = 1; d < params.segments; d++) {
            const c = Math.floor((n * d) / params.segments);
            const cut = scores[start + order[c]!]!;
            if (cut <= 0 || head / cut > params.sparseRatio) {
                breakpoint = c;
                break;
            }
        }
    }
    return {order, breakpoint, recent};
}
