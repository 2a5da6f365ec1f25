import {policyEntry} from "../../../preload/policyCatalogue.js";
import {aggregateNormalised, decayedRetention, hoyerSparsity, maxLogBeta, orderByPosition, retentionStep, sumHeads} from "./scoreMath.js";
import {trimKvCombine, type GateReduction} from "./trimkv.js";
import type {CombineMode, Policy, PolicyId, PruneDecision, PruneTarget, ScoreSnapshot, SelectorChoice} from "./types.js";

/** Newest positions no round frees. */
export const protectNewest = 8;

/**
 * One prune round: the policy's selectors (a layer each, or a layer and head), combined into one set of cells
 * (llama.cpp's cells are shared by all layers) within the budget, with position 0 and the newest cells always kept.
 * See `CombineMode` for the three ways. Cells a selector wanted but the budget did not allow count as forced drops.
 */
export function decide<Params, State>(
    policy: Policy<Params, State>,
    snapshot: ScoreSnapshot,
    params: Params,
    state: DecideState<State>,
    target: PruneTarget,
    combine: CombineMode
): PruneDecision<DecideState<State>> {
    if (combine === "heads") throw new Error("per-head cells free no shared choice: their rounds are pruneHeadCells'");
    const n = snapshot.positions.length;
    const perLayer = policy.select(snapshot, params, state.perLayer, target);
    const votes = (choices: SelectorChoice[]) => {
        const voting = choices.filter((choice) => choice.voting);
        return voting.length > 0 ? voting : choices;
    };
    const votingLayers = new Set(perLayer.selectors.filter((choice) => choice.voting).map((choice) => choice.layer));
    const include = (l: number) => votingLayers.size === 0 || votingLayers.has(l) || votingLayers.has(null);
    const aggregated = aggregateNormalised(snapshot.accumulated, snapshot.layers, snapshot.heads, n, include);
    const aggregatedLast = aggregateNormalised(snapshot.last, snapshot.layers, snapshot.heads, n, include);
    // The retention gates' aggregate: per cell the max of log beta over layers and heads (TRIM-KV's global ranking).
    const retention =
        snapshot.retention == null ? undefined : maxLogBeta(snapshot.retention, snapshot.layers, snapshot.retentionHeads ?? 1, n, include);

    let choices: SelectorChoice[];
    let aggregateState = state.aggregate;
    let policyProtects = perLayer.protect;
    if (combine === "aggregate") {
        const accumulated =
            policy.aggregate?.(snapshot.accumulated, snapshot.layers, snapshot.heads, n, include, snapshot, params) ?? aggregated;
        const single = policy.select(
            {
                positions: snapshot.positions,
                layers: 1,
                heads: 1,
                accumulated,
                last: aggregatedLast,
                aggregated: true,
                retention,
                retentionHeads: retention == null ? undefined : 1
            },
            params,
            state.aggregate,
            target
        );
        choices = single.selectors;
        aggregateState = single.state;
        policyProtects = single.protect;
    } else {
        choices = votes(perLayer.selectors);
    }

    // Never free position 0 (node-llama-cpp treats it as the sequence start) nor the newest tokens: llama.cpp
    // wants each new position to follow the newest live one, also after node-llama-cpp rewinds a few tokens.
    const byPosition = orderByPosition(snapshot.positions);
    const protectedCells = new Uint8Array(n);
    if (n > 0) protectedCells[byPosition[0]!] = 1;
    const newestKept = Math.max(1, Math.min(protectNewest, target.maxKeep - 1));
    for (let i = Math.max(0, n - newestKept); i < n; i++) protectedCells[byPosition[i]!] = 1;
    // Then what the policy protects, oldest first, as far as the budget goes.
    let protectedCount = protectedCells.reduce((sum, v) => sum + v, 0);
    for (const j of [...(policyProtects ?? [])].sort((a, b) => snapshot.positions[a]! - snapshot.positions[b]!)) {
        if (protectedCount >= target.maxKeep) break;
        if (protectedCells[j] === 0) {
            protectedCells[j] = 1;
            protectedCount++;
        }
    }

    // A cell's entry level: the smallest share of its quota at which some selector keeps it (rank + 1) / quota;
    // structural cells (sinks, recent window) enter first under `union`. Infinity: no selector keeps it.
    const level = new Float64Array(n).fill(Infinity);
    const structural = new Uint8Array(n);
    for (const choice of choices) {
        const quota = Math.min(choice.quota, choice.order.length);
        for (let r = 0; r < quota; r++) {
            const j = choice.order[r]!;
            level[j] = Math.min(level[j]!, (r + 1) / quota);
            if (r < choice.structural) structural[j] = 1;
        }
    }

    const keep = new Uint8Array(n);
    let kept = 0;
    const candidates: number[] = [];
    for (let j = 0; j < n; j++) {
        if (protectedCells[j] === 1) {
            keep[j] = 1;
            kept++;
        } else if (level[j]! <= 1) {
            candidates.push(j);
        }
    }
    // What goes first over the budget: the lowest attention, or with the gates the lowest retention of any head.
    let priority: Float32Array | Float64Array;
    if (retention != null) {
        priority = decayedRetention(retention, 0, snapshot.positions, retentionStep(snapshot.positions, target.tokensSeen));
    } else {
        priority = new Float32Array(n);
        for (let j = 0; j < n; j++) priority[j] = aggregated[j]! + aggregatedLast[j]!;
    }
    if (combine === "union") candidates.sort((a, b) => structural[b]! - structural[a]! || priority[b]! - priority[a]! || a - b);
    else candidates.sort((a, b) => level[a]! - level[b]! || priority[b]! - priority[a]! || a - b);
    const room = Math.max(0, target.maxKeep - kept);
    for (const j of candidates.slice(0, room)) {
        keep[j] = 1;
        kept++;
    }
    const forcedDrops = Math.max(0, candidates.length - room);

    // What each layer's own scores would keep of the live cells: its selectors' top cells, whether or not the shared round
    // kept them.
    const seen = Math.max(target.tokensSeen ?? 0, n, n > 0 ? snapshot.positions[byPosition[n - 1]!]! + 1 : 0);
    const keptByLayer = new Uint8Array(snapshot.layers * n);
    const headSums = sumHeads(snapshot.accumulated, snapshot.layers, snapshot.heads, n);
    const sparsityPerLayer = new Float32Array(snapshot.layers);
    for (let l = 0; l < snapshot.layers; l++) {
        sparsityPerLayer[l] = hoyerSparsity(headSums, l * n, n);
        const own = keptByLayer.subarray(l * n, (l + 1) * n);
        for (const choice of perLayer.selectors) {
            if (choice.layer !== l && choice.layer !== null) continue;
            for (let r = 0; r < Math.min(choice.quota, choice.order.length); r++) own[choice.order[r]!] = 1;
        }
    }

    const evict: number[] = [];
    for (let j = 0; j < n; j++) {
        if (keep[j] === 0) evict.push(snapshot.positions[j]!);
    }
    evict.sort((a, b) => a - b);
    // What a person is shown of each cell: its retention beta^(t - pos) under the gates, else the attention it received.
    const cellScores = new Float32Array(n);
    for (let j = 0; j < n; j++) cellScores[j] = retention != null ? Math.exp(priority[j]!) : aggregated[j]!;
    return {
        evict: Int32Array.from(evict),
        keptCells: kept,
        keptShare: seen > 0 ? kept / seen : 1,
        forcedDrops,
        keptByLayer,
        cellScores,
        sparsityPerLayer,
        state: {perLayer: perLayer.state, aggregate: aggregateState}
    };
}

/** A combine setting: one of the modes, or `auto`, the policy's own (`resolveCombine`). */
export type CombineSetting = CombineMode | "auto";

/**
 * The combine mode a policy's rounds run under: the one the settings name, or under `auto` the policy's own (the
 * catalogue's `ownCombine`): for gates, how they were trained (`trimKvCombine`; `reduction` is needed then), else
 * `aggregate` or `heads` (H2O).
 */
export function resolveCombine(setting: CombineSetting, policy: PolicyId, reduction?: GateReduction): CombineMode {
    if (setting !== "auto") return setting;
    const own = policyEntry(policy).ownCombine;
    if (own !== "gates") return own;
    if (reduction == null) throw new Error("TRIM-KV's combine mode follows how its gates were trained, and no gate file was read");
    return trimKvCombine(reduction);
}

/** A policy's state for its per-layer run (always made, for the per-layer read-outs) and its aggregated run. */
export type DecideState<State> = {perLayer: State; aggregate: State};

export function initialDecideState<Params, State>(policy: Policy<Params, State>, params: Params, budget: number): DecideState<State> {
    return {perLayer: policy.initialState(params, budget), aggregate: policy.initialState(params, budget)};
}
