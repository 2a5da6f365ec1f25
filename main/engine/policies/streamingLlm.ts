import {defaultParams} from "../../../preload/policyCatalogue.js";
import {orderByPosition, structuredOrder} from "./scoreMath.js";
import type {Policy} from "./types.js";

export type StreamingLlmParams = {
    /** Attention sinks: the first positions, always kept. Defaults to `4`. */
    sinks: number;
};

/** StreamingLLM (Xiao et al.): the sinks plus the most recent window filling the rest of the budget. Same for every layer. */
export const streamingLlmPolicy: Policy<StreamingLlmParams, null> = {
    id: "streamingllm",
    defaults: defaultParams("streamingllm"),
    initialState: () => null,
    needs: () => ({gamma: null, allRows: false, scores: false}),
    select(snapshot, params, _state, target) {
        const sinks = Math.min(params.sinks, target.maxKeep);
        const {order} = structuredOrder(orderByPosition(snapshot.positions), sinks, snapshot.positions.length, null);
        return {selectors: [{order, quota: target.maxKeep, structural: target.maxKeep, layer: null, voting: true}], state: null};
    }
};
