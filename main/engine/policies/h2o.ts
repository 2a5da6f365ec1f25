import {defaultParams} from "../../../preload/policyCatalogue.js";
import {orderByPosition, structuredOrder} from "./scoreMath.js";
import type {Policy, SelectorChoice} from "./types.js";

export type H2oParams = {
    /** Share of the budget given to heavy hitters; the rest is the recent window. Defaults to `0.5`. */
    heavyRatio: number;
};

/**
 * H2O (Zhang et al., §4): every attention head keeps its own heavy hitters, the cells with the most accumulated
 * attention (gamma = 1), plus the recent window; on llama.cpp's shared cells the heads' and layers' sets are joined.
 */
export const h2oPolicy: Policy<H2oParams, null> = {
    id: "h2o",
    defaults: defaultParams("h2o"),
    initialState: () => null,
    needs: () => ({gamma: 1, allRows: true}),
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const byPosition = orderByPosition(snapshot.positions);
        const recent = Math.max(1, target.maxKeep - Math.floor(target.maxKeep * params.heavyRatio));
        const selectors: SelectorChoice[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            for (let h = 0; h < snapshot.heads; h++) {
                const {order, structural} = structuredOrder(byPosition, 0, recent, snapshot.accumulated, (l * snapshot.heads + h) * n);
                selectors.push({order, quota: Math.min(n, target.maxKeep), structural, layer: l, voting: true});
            }
        }
        return {selectors, state: null};
    }
};
