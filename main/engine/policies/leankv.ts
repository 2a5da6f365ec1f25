import {defaultParams} from "../../../preload/policyCatalogue.js";
import {maxOverRows, orderByPosition, structuredOrder} from "./scoreMath.js";
import type {Policy, PruneTarget, SelectorChoice} from "./types.js";

export type LeanKvParams = {
    /**
     * alpha_l: a cell is pruned when its significance is below alpha_l / i (prompt) or alpha_l / N (generation), i.e. below
     * alpha_l times the theoretical average attention. `0` prunes nothing. Defaults to `1.2`, calibrated on 16 training
     * problems of the demo task as §7.2 calibrates it (the most accurate alpha, then the largest): `npm run bench --
     * --suites calibrate-leankv --calibration-problems 16 --alphas 0,0.5,1,1.1,1.2,1.3,1.5,2,3,4 --threads 2`.
     */
    alpha: number;
    /** W, the newest tokens always kept. Defaults to `64` (LeanKV §4). */
    window: number;
};

/**
 * LeanKV's pruning tier (seed 003, §4): a cell's significance is the mean attention it received from the tokens after it
 * (accumulated with gamma = 1, divided by how many rows read it), per attention head; the W newest stay; a cell whose
 * significance falls below alpha_l over the sequence length (alpha_l / N while generating, Algorithm 1; alpha_l / i for a
 * prompt, i its 1-based position) is pruned. No budget: the memory follows the attention (§3.3 dynamic sparsity); a
 * budget still caps it. The paper's middle tier (moderately significant cells re-quantized to a lower precision) needs a
 * cache with more than one precision per layer, which llama.cpp does not have: between alpha_l and alpha_h a cell stays
 * at the cache's own precision (choose K8V4 for the paper's high-precision pair).
 *
 * Selectors are layers, each ranking a cell by the most attention any of its heads gave it. The paper takes, per KV
 * head, the max over its query heads; a cell passes that max test exactly when one of those heads passes its own, so on
 * shared cells, where a cell goes only when no selector keeps it, the layer's max keeps the same cells as per-KV-head
 * (or per-query-head) selectors would, with one ranking per layer instead of one per head.
 */
export const leanKvPolicy: Policy<LeanKvParams, null> = {
    id: "leankv",
    defaults: defaultParams("leankv"),
    initialState: () => null,
    // The mean over the rows that read a cell: every row scored, with flash attention too, and no decay.
    needs: () => ({gamma: 1, allRows: true, everyRow: true}),
    // Shared cells: a cell is kept when any head of any layer keeps it, so the one aggregated selection ranks by the
    // largest accumulated attention over layers and heads (§4: "aggregated using the maximum operation").
    aggregate: maxOverRows,
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const byPosition = orderByPosition(snapshot.positions);
        const scale = averageScale(snapshot.positions, target);
        const selectors: SelectorChoice[] = [];
        const relative = new Float64Array(n);
        for (let l = 0; l < snapshot.layers; l++) {
            // §4: a KV head's query heads aggregated by their max (here all of the layer's heads).
            const best = maxOverRows(snapshot.accumulated, snapshot.layers, snapshot.heads, n, (layer) => layer === l);
            for (let j = 0; j < n; j++) relative[j] = significance(best[j]!, snapshot.positions[j]!, scale.length) * scale.of(j);
            const {order, structural} = structuredOrder(byPosition, 0, params.window, relative);
            let quota = structural;
            for (let r = structural; r < n; r++) {
                if (relative[order[r]!]! >= params.alpha)
                    // §4: pruned below alpha_l / i (prompt), alpha_l / N (Algorithm 1)
                    quota++;
            }
            selectors.push({order, quota, structural, layer: l, voting: true});
        }
        return {selectors, state: null};
    }
};

/**
 * LeanKV §4: the significance of a cell at position `position` in a sequence of `length` tokens, the mean of the attention
 * it received from the rows that read it: `accumulated / (length - position)`. The accumulator cannot leave out a token's
 * own row, so that row is counted in the mean (the paper averages the N - i later tokens).
 */
export function significance(accumulated: number, position: number, length: number): number {
    return accumulated / Math.max(1, length - position);
}

/**
 * The factor that turns a significance into a multiple of the theoretical average: N while generating (Algorithm 1,
 * `Score(t) >= alpha / N`), i = position + 1 for a prompt (§4 prompt phase, `alpha / i`). A cell is pruned when the
 * product is below alpha_l.
 */
export function averageScale(positions: Int32Array, target: Pick<PruneTarget, "phase">) {
    let newest = -1;
    for (const position of positions) newest = Math.max(newest, position);
    const length = newest + 1;
    const prompt = target.phase !== "decode";
    return {length, of: (j: number) => (prompt ? positions[j]! + 1 : length)};
}
