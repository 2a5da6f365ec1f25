import {defaultParams} from "../../../preload/policyCatalogue.js";
import {kvHeadOf, orderByPosition, structuredOrder} from "./scoreMath.js";
import type {Policy, ScoreSnapshot, SelectorChoice} from "./types.js";

export type LavaParams = {
    /** w: the recent window, never evicted, and the last queries whose attention is averaged (SnapKV's window). Defaults to `32`. */
    window: number;
    /** Width of the max-pooling over positions that smooths the scores (odd; `1`: none). Defaults to `7` (LAVa §5.1). */
    kernel: number;
};

/**
 * LAVa (Shen et al., §4): a cell's score per layer and KV head is the attention the last w queries paid it, weighted by the
 * head's largest value L1 norm (Definition 1, Eq. 5); within a layer all heads are ranked together (Algorithm 1: dynamic
 * head budgets); layers get budgets in proportion to the normalised entropy of their scores (Eq. 6-7, Algorithm 2).
 *
 * On Ponder's shared cells (a llama.cpp cell holds a token for every layer and head):
 * - The window sum is the native accumulator `s = gamma * s + a` with gamma = 1 - 1/w, an exponentially weighted window
 *   whose weights sum to w (a prompt's ubatches score their last w rows); divided by w as Eq. 5 divides. The paper sums
 *   the last w queries with equal weights: this departs from it in the weights, not in the scale.
 * - GQA (§4.3): a KV head's score is the max over its query heads; V̄_{l,h} is the max over the live cells of the KV
 *   head's value L1 norm, written per cell by the patched graph.
 * - Max-pooling of `kernel` over the live cells sorted by position (after evictions, a cell's neighbours are the nearest
 *   positions still live).
 * - Algorithm 1 on shared cells: a layer is one selector; it ranks cells by the max over its KV heads of the pooled score,
 *   so its first k cells hold exactly the entries that rank first in the layer's flattened array of heads and cells.
 * - Algorithm 2: quota B_l = e_l / sum e x layers x (the budget less the window), plus the window, capped at the live cells.
 *   With combine mode `quota` (the one that realises LAVa: every layer's ranking with its own budget), every quota shrinks
 *   by one common factor until the shared cells fit the budget, so layers keep their Eq. 7 proportions. `aggregate` ranks
 *   once by the layers' Eq. 6-normalised scores weighted by e_l (`lavaAggregate`); `union` lets the layer with the largest
 *   quota veto nearly every eviction and falls back on the budget's lowest-attention rule.
 * - The recent window (the w newest cells) is each selector's structure: never evicted while the budget holds it.
 */
export const lavaPolicy: Policy<LavaParams, null> = {
    id: "lava",
    defaults: defaultParams("lava"),
    initialState: () => null,
    // Eq. 5's window as an exponentially weighted one: gamma = 1 - 1/w; prompts scored by their last w rows; the value norms.
    needs: (params) => ({gamma: windowGamma(params.window), allRows: true, rows: params.window, valueNorms: true}),
    aggregate: (_scores, _layers, _heads, _n, include, snapshot, params) => lavaAggregate(snapshot, params, include),
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const byPosition = orderByPosition(snapshot.positions);
        if (snapshot.aggregated === true) {
            // `lavaAggregate`'s one row: scored, pooled and weighted by the layers' entropies already.
            const {order, structural} = structuredOrder(byPosition, 0, params.window, snapshot.accumulated);
            return {selectors: [{order, quota: Math.min(n, target.maxKeep), structural, layer: null, voting: true}], state: null};
        }
        const layers = lavaLayers(snapshot, params);
        const budgets = layerBudgets(layers.entropy, snapshot.layers * Math.max(0, target.maxKeep - layers.window));
        const selectors: SelectorChoice[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            // Algorithm 1: the window first, then the layer's cells by their best head's pooled score.
            const {order, structural} = structuredOrder(byPosition, 0, params.window, layers.cellScores, l * n);
            selectors.push({order, quota: Math.min(n, structural + Math.round(budgets[l]!)), structural, layer: l, voting: true});
        }
        return {selectors, state: null};
    }
};

/** The accumulator's decay for a window of w queries: gamma = 1 - 1/w, whose weights sum to w. */
export function windowGamma(window: number): number {
    return 1 - 1 / Math.max(1, window);
}

/**
 * Eq. 5 per layer and KV head: s_{l,h}[j] = V̄_{l,h} / w x (attention of the last w queries), the attention the max over
 * the KV head's query heads (§4.3) and V̄_{l,h} the largest value L1 norm of the head's live cells. A layer whose norms
 * are all 0 (cells written before they were on) weighs its heads alike. Returns `layers * kvHeads * n`.
 */
export function lavaScores(snapshot: ScoreSnapshot, window: number): {scores: Float32Array; kvHeads: number} {
    const n = snapshot.positions.length;
    const norms = snapshot.valueNorms;
    if (norms == null) throw new Error("LAVa needs the cells' value norms, and this round read none");
    const kvHeads = snapshot.valueHeads ?? 1;
    if (norms.length !== snapshot.layers * kvHeads * n)
        throw new Error(`the value norms hold ${norms.length} values, not ${snapshot.layers} layers x ${kvHeads} heads x ${n} cells`);
    const heads = snapshot.heads;
    const scores = new Float32Array(snapshot.layers * kvHeads * n);
    const vMax = new Float64Array(kvHeads);
    for (let l = 0; l < snapshot.layers; l++) {
        vMax.fill(0);
        for (let g = 0; g < kvHeads; g++) {
            for (let j = 0; j < n; j++) vMax[g] = Math.max(vMax[g]!, norms[(l * kvHeads + g) * n + j]!);
        }
        const known = vMax.some((v) => v > 0);
        for (let q = 0; q < heads; q++) {
            const g = kvHeadOf(q, heads, kvHeads);
            const weight = (known ? vMax[g]! : 1) / Math.max(1, window); // Eq. 5: max_k ||V_{l,h}[k]||_1 / w
            const from = (l * heads + q) * n;
            const to = (l * kvHeads + g) * n;
            for (let j = 0; j < n; j++) scores[to + j] = Math.max(scores[to + j]!, weight * snapshot.accumulated[from + j]!); // §4.3: max over the group
        }
    }
    return {scores, kvHeads};
}

/**
 * Max-pooling of `values[start..start+n)` over the cells sorted by position (`byPosition`): each cell takes the largest
 * value among the `floor(kernel / 2)` cells on either side of it in position order (LAVa §5.1, kernel 7; SnapKV's pooling).
 */
export function maxPoolByPosition(values: ArrayLike<number>, start: number, byPosition: Int32Array, kernel: number): Float32Array {
    const n = byPosition.length;
    const out = new Float32Array(n);
    const radius = Math.max(0, Math.floor(kernel / 2));
    for (let i = 0; i < n; i++) {
        let best = -Infinity;
        for (let k = Math.max(0, i - radius); k <= Math.min(n - 1, i + radius); k++) best = Math.max(best, values[start + byPosition[k]!]!);
        out[byPosition[i]!] = best;
    }
    return out;
}

/**
 * Eq. 6-7 on one layer's scores (`kvHeads` rows of `n` from `start`), over the cells `candidate` marks (outside the
 * window, Algorithm 1 line 5): ŝ = s / (the sum over heads and cells); e_l = -sum ŝ log ŝ / (H x N). 0 when all are 0.
 */
export function layerEntropy(scores: ArrayLike<number>, start: number, kvHeads: number, n: number, candidate: Uint8Array): number {
    let total = 0;
    let count = 0;
    for (let h = 0; h < kvHeads; h++) {
        for (let j = 0; j < n; j++) {
            if (candidate[j] === 1) {
                total += scores[start + h * n + j]!;
                count++;
            }
        }
    }
    if (!(total > 0) || count === 0) return 0;
    let entropy = 0;
    for (let h = 0; h < kvHeads; h++) {
        for (let j = 0; j < n; j++) {
            const p = candidate[j] === 1 ? scores[start + h * n + j]! / total : 0; // Eq. 6
            if (p > 0) entropy -= p * Math.log(p);
        }
    }
    return entropy / count; // Eq. 7: / (H x N)
}

/** Algorithm 2 line 10: B_l = e_l / sum e x total; equal shares when every entropy is 0. */
export function layerBudgets(entropy: Float64Array, total: number): Float64Array {
    const sum = entropy.reduce((a, b) => a + b, 0);
    return entropy.map((e) => (sum > 0 ? (e / sum) * total : total / entropy.length));
}

/**
 * Per layer: each cell's best KV head's pooled LAVa score (`layers * n`), and the layer's Eq. 7 entropy over the cells
 * outside the window (the w newest), with the window's size.
 */
export function lavaLayers(snapshot: ScoreSnapshot, params: LavaParams) {
    const n = snapshot.positions.length;
    const byPosition = orderByPosition(snapshot.positions);
    const {scores, kvHeads} = lavaScores(snapshot, params.window);
    const window = Math.min(n, Math.max(0, params.window));
    const candidate = new Uint8Array(n);
    for (let i = 0; i < n - window; i++) candidate[byPosition[i]!] = 1;
    const pooled = new Float32Array(scores.length);
    const cellScores = new Float32Array(snapshot.layers * n);
    const entropy = new Float64Array(snapshot.layers);
    for (let l = 0; l < snapshot.layers; l++) {
        for (let g = 0; g < kvHeads; g++) {
            const row = (l * kvHeads + g) * n;
            pooled.set(maxPoolByPosition(scores, row, byPosition, params.kernel), row);
            for (let j = 0; j < n; j++) cellScores[l * n + j] = Math.max(cellScores[l * n + j]!, pooled[row + j]!); // Algorithm 1: heads ranked together
        }
        entropy[l] = layerEntropy(pooled, l * kvHeads * n, kvHeads, n, candidate);
    }
    return {cellScores, entropy, window, kvHeads};
}

/**
 * `aggregate` mode's one row: per voting layer, its cells' scores (`lavaLayers`) divided by the layer's total (Eq. 6 on
 * the cells) and weighted by the layer's share of the entropies (Eq. 7: its budget share), summed over the layers.
 */
export function lavaAggregate(snapshot: ScoreSnapshot, params: LavaParams, include: (layer: number) => boolean): Float32Array {
    const n = snapshot.positions.length;
    const {cellScores, entropy} = lavaLayers(snapshot, params);
    const shares = layerBudgets(
        entropy.map((e, l) => (include(l) ? e : 0)),
        1
    );
    const out = new Float32Array(n);
    for (let l = 0; l < snapshot.layers; l++) {
        if (!include(l)) continue;
        let total = 0;
        for (let j = 0; j < n; j++) total += cellScores[l * n + j]!;
        if (!(total > 0)) continue;
        for (let j = 0; j < n; j++) out[j] = out[j]! + (shares[l]! * cellScores[l * n + j]!) / total;
    }
    return out;
}
