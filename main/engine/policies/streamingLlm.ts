import {keepSinksAndRecent, orderByPosition} from "./scoreMath.js";
import type {Policy} from "./types.js";

export type StreamingLlmParams = {
    /** Attention sinks: the first positions, always kept. Defaults to `4`. */
    sinks: number
};

/** StreamingLLM (Xiao et al.): the sinks plus the most recent window filling the rest of the budget. Same for every layer. */
export const streamingLlmPolicy: Policy<StreamingLlmParams, null> = {
    id: "streamingllm",
    defaults: {sinks: 4},
    initialState: () => null,
    needs: () => ({gamma: null, squaredLast: false}),
    select(snapshot, params, _state, target) {
        const n = snapshot.positions.length;
        const mask = new Uint8Array(n);
        const sinks = Math.min(params.sinks, target.maxKeep);
        keepSinksAndRecent(mask, orderByPosition(snapshot.positions), sinks, target.maxKeep - sinks);
        return {keep: Array.from({length: snapshot.layers}, () => mask), voting: Array(snapshot.layers).fill(true), state: null};
    }
};
