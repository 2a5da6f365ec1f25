import {decayedRetention, rankDescending, retentionStep, topHeld} from "./scoreMath.js";
import type {CombineMode, HeadCellsSnapshot, HeadKeepTarget, Policy, SelectorChoice} from "./types.js";

export type TrimKvParams = Record<string, never>;

/** How a gate file's gates were trained (`ponder.retention.reduction`): for the shared max, or per layer and KV head. */
export type GateReduction = "shared" | "per-head";

/**
 * TRIM-KV's combine mode when the settings leave it to the policy (`auto`), from how its gates were trained: gates
 * trained per layer and KV head (the paper's training, every converted checkpoint, every calibration) keep each head's own
 * tokens on per-head cells (`heads`), the paper's per-head memory at the same number of cells; gates trained for the shared
 * max ("shared") rank once by it (`aggregate`). Per-head cells by measurement (docs/BENCHMARKS.md): with gates fitted per
 * head they answered 1.000 of 32 held-out demo problems at 25% of Full's cells where the shared max answered 0.719, and
 * 0.969 of the merge problems at 50% where it answered 0.875.
 */
export function trimKvCombine(reduction: GateReduction): CombineMode {
    return reduction === "per-head" ? "heads" : "aggregate";
}

/**
 * TRIM-KV ("Cache What Lasts", Bui et al.; the authors' code `ngocbh/trimkv`): a small gate, read from a layer's
 * attention input (`attn_norm`) when a token is written, gives the token a retention beta per KV head; at step t the
 * token's retention is beta^(t - pos), and under budget pressure the lowest retentions go. No sinks or windows are made
 * by hand: the paper reports that they emerge from the gates.
 *
 * Selectors are (layer, KV head) pairs, each ranking every live cell by `(t - pos) * log beta`, its quota the budget. On
 * llama.cpp's shared cells, `aggregate` (what the gates are trained for with reduction "shared") ranks once by the max
 * over layers and heads (`maxLogBeta`, in `decide`); `quota` and `union` combine the per-head rankings (the paper's
 * per-(layer, head) top-k) as for the other per-head policies; `auto` picks by the gates' reduction (`trimKvCombine`).
 * Position 0 and the newest cells stay (`decide`).
 */
export const trimKvPolicy: Policy<TrimKvParams, null> = {
    id: "trimkv",
    defaults: {},
    initialState: () => null,
    // The gates' log beta only: no attention scores (scoring stays off), no decay to accumulate.
    needs: () => ({gamma: null, allRows: false, scores: false, retention: true}),
    select(snapshot, _params, _state, target) {
        const n = snapshot.positions.length;
        const logBeta = snapshot.retention;
        if (logBeta == null) throw new Error("TRIM-KV needs the retention gates' log beta, and this round read none");
        const heads = snapshot.retentionHeads ?? 1;
        if (logBeta.length !== snapshot.layers * heads * n)
            throw new Error(
                `the retention read holds ${logBeta.length} values, not ${snapshot.layers} layers x ${heads} heads x ${n} cells`
            );
        const t = retentionStep(snapshot.positions, target.tokensSeen);
        const quota = Math.min(n, target.maxKeep);
        const selectors: SelectorChoice[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            for (let h = 0; h < heads; h++) {
                // TRIM-KV (Bui et al.): keep the top `quota` cells by (t - pos) * log beta, the log of beta^(t - pos).
                const retention = decayedRetention(logBeta, (l * heads + h) * n, snapshot.positions, t);
                selectors.push({order: rankDescending(retention, 0, n), quota, structural: 0, layer: l, voting: true});
            }
        }
        return {selectors, state: null};
    },
    keepPerHead: (snapshot, _params, target) => trimKvKeepPerHead(snapshot, target)
};

/**
 * TRIM-KV on per-head cells (the paper's per-(layer, KV head) memory): each pair keeps the `count` tokens it holds with
 * the highest `(t - pos) * log beta`, the pinned ones first.
 */
function trimKvKeepPerHead(snapshot: HeadCellsSnapshot, target: HeadKeepTarget): Int32Array[] {
    const {layers, heads, n, tokens, retention} = snapshot;
    if (retention == null) throw new Error("TRIM-KV needs the retention gates' log beta, and this round read none");
    const keep = Math.min(n, target.count);
    const kept: Int32Array[] = [];
    for (let pair = 0; pair < layers * heads; pair++) {
        const held = tokens.subarray(pair * n, (pair + 1) * n);
        const value = decayedRetention(retention, pair * n, held, retentionStep(held, target.tokensSeen));
        kept.push(topHeld(held, value, keep, target.pinned));
    }
    return kept;
}
