import {orderByPosition} from "./scoreMath.js";
import type {Policy} from "./types.js";

export type FullParams = Record<string, never>;

/** Full KV: keeps every cell; the budget is a hard stop, enforced by the caller. */
export const fullPolicy: Policy<FullParams, null> = {
    id: "full",
    defaults: {},
    initialState: () => null,
    needs: () => ({gamma: null, allRows: false, scores: false}),
    select(snapshot) {
        const n = snapshot.positions.length;
        return {
            selectors: [{order: orderByPosition(snapshot.positions).reverse(), quota: n, structural: n, layer: null, voting: true}],
            state: null
        };
    }
};
