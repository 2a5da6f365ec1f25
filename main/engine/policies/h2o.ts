import {defaultParams} from "../../../preload/policyCatalogue.js";
import {orderByPosition, structuredOrder, topHeld} from "./scoreMath.js";
import type {HeadCellsSnapshot, HeadKeepTarget, Policy, SelectorChoice} from "./types.js";

export type H2oParams = {
    /** Share of the budget given to heavy hitters; the rest is the recent window. Defaults to `0.5`. */
    heavyRatio: number;
};

/**
 * H2O (Zhang et al., §4): every attention head keeps its own heavy hitters, the cells with the most accumulated
 * attention (gamma = 1), plus the recent window; on llama.cpp's shared cells the heads' and layers' sets are joined, on
 * per-head cells (`keepPerHead`) each KV head keeps its own.
 */
export const h2oPolicy: Policy<H2oParams, null> = {
    id: "h2o",
    defaults: defaultParams("h2o"),
    initialState: () => null,
    needs: () => ({gamma: 1, allRows: true}),
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const byPosition = orderByPosition(snapshot.positions);
        const recent = recentWindow(target.maxKeep, params);
        const selectors: SelectorChoice[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            for (let h = 0; h < snapshot.heads; h++) {
                const {order, structural} = structuredOrder(byPosition, 0, recent, snapshot.accumulated, (l * snapshot.heads + h) * n);
                selectors.push({order, quota: Math.min(n, target.maxKeep), structural, layer: l, voting: true});
            }
        }
        return {selectors, state: null};
    },
    keepPerHead: h2oKeepPerHead
};

/** The recent window's share of a budget of `count` cells: what the heavy hitters leave, at least one cell. */
function recentWindow(count: number, params: H2oParams): number {
    return Math.max(1, count - Math.floor(count * params.heavyRatio));
}

/**
 * H2O on per-head cells (Zhang et al., §4: a heavy-hitter set per head): each (layer, KV head) keeps the newest tokens it
 * holds (the recent window), then its heaviest by the attention they received from the query heads reading it.
 */
function h2oKeepPerHead(snapshot: HeadCellsSnapshot, params: H2oParams, target: HeadKeepTarget): Int32Array[] {
    const {layers, heads, n, tokens, accumulated} = snapshot;
    if (accumulated == null) throw new Error("H2O needs the attention scores, and this round read none");
    const recent = Math.min(n, recentWindow(target.count, params));
    const kept: Int32Array[] = [];
    for (let pair = 0; pair < layers * heads; pair++) {
        const held = tokens.subarray(pair * n, (pair + 1) * n);
        // in double: the window ranks below the pinned tokens (infinite in topHeld) and above every score
        const value = Float64Array.from(accumulated.subarray(pair * n, (pair + 1) * n));
        const byPosition = orderByPosition(held);
        for (let i = n - recent; i < n; i++) value[byPosition[i]!] = Number.MAX_VALUE;
        kept.push(topHeld(held, value, target.count, target.pinned));
    }
    return kept;
}
