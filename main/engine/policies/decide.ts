import {aggregateNormalised, hoyerSparsity, orderByPosition, rankDescending} from "./scoreMath.js";

/** Newest positions no round frees. */
export const protectNewest = 8;
import type {CombineMode, Policy, PruneDecision, PruneTarget, ScoreSnapshot} from "./types.js";

/**
 * One prune round: the policy's per-layer selections, combined into one set of cells (llama.cpp's cells are
 * shared by all layers), capped by the budget, with position 0 and the newest cell always kept.
 * - `union`: a cell is freed only when no voting layer keeps it;
 * - `aggregate`: the policy selects once on the layers' normalised scores summed.
 * When the result is over `maxKeep`, the lowest-scored cells go and count as forced drops.
 */
export function decide<Params, State>(
    policy: Policy<Params, State>,
    snapshot: ScoreSnapshot,
    params: Params,
    state: DecideState<State>,
    target: PruneTarget,
    combine: CombineMode
): PruneDecision<DecideState<State>> {
    const n = snapshot.positions.length;
    const perLayer = policy.select(snapshot, params, state.perLayer, target);
    const keptPerLayer = new Int32Array(snapshot.layers);
    const sparsityPerLayer = new Float32Array(snapshot.layers);
    for (let l = 0; l < snapshot.layers; l++) {
        keptPerLayer[l] = perLayer.keep[l]!.reduce((sum, v) => sum + v, 0);
        sparsityPerLayer[l] = hoyerSparsity(snapshot.accumulated, l * n, n);
    }

    const aggregated = aggregateNormalised(snapshot.accumulated, snapshot.layers, n, (l) => perLayer.voting[l] ?? true);
    const aggregatedLast = aggregateNormalised(snapshot.last, snapshot.layers, n, (l) => perLayer.voting[l] ?? true);
    let keep: Uint8Array;
    let aggregateState = state.aggregate;
    if (combine === "union") {
        keep = new Uint8Array(n);
        const voters = perLayer.keep.filter((_, l) => perLayer.voting[l] ?? true);
        for (const mask of voters.length > 0 ? voters : perLayer.keep) {
            for (let j = 0; j < n; j++)
                keep[j] = keep[j]! | mask[j]!;
        }
    } else {
        const single = policy.select({positions: snapshot.positions, layers: 1, accumulated: aggregated, last: aggregatedLast}, params, state.aggregate, target);
        keep = single.keep[0]!;
        aggregateState = single.state;
    }

    // Never free position 0 (node-llama-cpp treats it as the sequence start) nor the newest tokens: llama.cpp
    // wants each new position to follow the newest live one, also after node-llama-cpp rewinds a few tokens.
    const byPosition = orderByPosition(snapshot.positions);
    const protectedCells = new Uint8Array(n);
    if (n > 0)
        protectedCells[byPosition[0]!] = 1;
    const newestKept = Math.max(1, Math.min(protectNewest, target.maxKeep - 1));
    for (let i = Math.max(0, n - newestKept); i < n; i++)
        protectedCells[byPosition[i]!] = 1;
    for (let j = 0; j < n; j++) {
        if (protectedCells[j] === 1)
            keep[j] = 1;
    }

    let kept = keep.reduce((sum, v) => sum + v, 0);
    let forcedDrops = 0;
    if (kept > target.maxKeep) {
        const priority = new Float32Array(n);
        for (let j = 0; j < n; j++)
            priority[j] = aggregated[j]! + aggregatedLast[j]!;
        const order = rankDescending(priority, 0, n);
        for (let i = order.length - 1; i >= 0 && kept > target.maxKeep; i--) {
            const j = order[i]!;
            if (keep[j] === 1 && protectedCells[j] === 0) {
                keep[j] = 0;
                kept--;
                forcedDrops++;
            }
        }
    }

    const evict: number[] = [];
    for (let j = 0; j < n; j++) {
        if (keep[j] === 0)
            evict.push(snapshot.positions[j]!);
    }
    evict.sort((a, b) => a - b);
    return {evict: Int32Array.from(evict), keptCells: kept, forcedDrops, keptPerLayer, sparsityPerLayer, state: {perLayer: perLayer.state, aggregate: aggregateState}};
}

/** A policy's state for its per-layer run (always made, for the per-layer read-outs) and its aggregated run. */
export type DecideState<State> = {perLayer: State, aggregate: State};

export function initialDecideState<Params, State>(policy: Policy<Params, State>, params: Params, budget: number): DecideState<State> {
    return {perLayer: policy.initialState(params, budget), aggregate: policy.initialState(params, budget)};
}
