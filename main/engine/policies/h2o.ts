import {keepSinksAndRecent, orderByPosition, rankDescending} from "./scoreMath.js";
import type {Policy} from "./types.js";

export type H2oParams = {
    /** Share of the budget given to heavy hitters; the rest is the recent window. Defaults to `0.5`. */
    heavyRatio: number
};

/** H2O (Zhang et al.): per layer, the heavy hitters by accumulated attention (gamma = 1) plus the recent window. */
export const h2oPolicy: Policy<H2oParams, null> = {
    id: "h2o",
    defaults: {heavyRatio: 0.5},
    initialState: () => null,
    needs: () => ({gamma: 1, squaredLast: false}),
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const byPosition = orderByPosition(snapshot.positions);
        const recent = Math.max(1, target.maxKeep - Math.floor(target.maxKeep * params.heavyRatio));
        const keep: Uint8Array[] = [];
        for (let l = 0; l < snapshot.layers; l++) {
            const mask = new Uint8Array(n);
            keepSinksAndRecent(mask, byPosition, 0, recent);
            let room = target.maxKeep - Math.min(recent, n);
            for (const j of rankDescending(snapshot.accumulated, l * n, n)) {
                if (room <= 0)
                    break;
                if (mask[j] === 0) {
                    mask[j] = 1;
                    room--;
                }
            }
            keep.push(mask);
        }
        return {keep, voting: Array(snapshot.layers).fill(true), state: null};
    }
};
