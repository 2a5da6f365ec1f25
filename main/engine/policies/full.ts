import type {Policy} from "./types.js";

export type FullParams = Record<string, never>;

/** Full KV: keeps every cell; the budget is a hard stop, enforced by the caller. */
export const fullPolicy: Policy<FullParams, null> = {
    id: "full",
    defaults: {},
    initialState: () => null,
    needs: () => ({gamma: null, squaredLast: false}),
    select(snapshot) {
        const n = snapshot.positions.length;
        return {keep: Array.from({length: snapshot.layers}, () => new Uint8Array(n).fill(1)), voting: Array(snapshot.layers).fill(true), state: null};
    }
};
