import type {GateTrainingData} from "./types.js";

/** Per token, the longest read horizon over every layer and KV head. */
export function sharedHorizons(data: GateTrainingData): Float32Array {
    const per = data.layers * data.headCountKv;
    const out = new Float32Array(data.tokens);
    for (let i = 0; i < data.tokens; i++) {
        let best = 0;
        for (let k = 0; k < per; k++) best = Math.max(best, data.horizons[i * per + k]!);
        out[i] = best;
    }
    return out;
}
