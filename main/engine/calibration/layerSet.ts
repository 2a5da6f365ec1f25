import {isHorizonObserved} from "./isHorizonObserved.js";
import type {GateTrainingData} from "./types.js";

/** One layer's training rows: [rows, width] inputs, and per (row, KV head) the target (NaN where censored) and weight. */
export type LayerSet = {
    rows: number;
    x: Float32Array;
    target: Float32Array;
    weight: Float32Array;
    /** The (token, KV head) pairs the loss counts. */
    pairs: number;
    /** The mean target over those pairs. */
    meanTarget: number;
};

/**
 * The rows of one layer the loss can count: inputs copied contiguous, targets log(1 + horizon) or NaN where censored,
 * each weighed by (1 + horizon)^power; with `shared`, every head's horizon is the token's longest.
 */
export function layerSet(data: GateTrainingData, layer: number, minSeen: number, shared: Float32Array | null, power: number): LayerSet {
    const {layers, embeddingLength: width, headCountKv: kvHeads, tokens: count} = data;
    // A text the model ended itself has no future beyond its end: every read was seen. Only a text the token limit cut
    // hides reads, so only its samples are censored (train.py's rule).
    const ended = data.text != null && data.texts != null ? data.texts.map((t) => t.stop === "eog") : null;
    const observed = (i: number, horizon: number) =>
        ended?.[data.text![i]!] === true || isHorizonObserved(data.followers[i]!, horizon, minSeen);
    const horizonOf = (i: number, h: number) => (shared != null ? shared[i]! : data.horizons[(i * layers + layer) * kvHeads + h]!);
    const keep: number[] = [];
    for (let i = 0; i < count; i++) {
        for (let h = 0; h < kvHeads; h++) {
            if (observed(i, horizonOf(i, h))) {
                keep.push(i);
                break;
            }
        }
    }
    const x = new Float32Array(keep.length * width);
    const target = new Float32Array(keep.length * kvHeads);
    const weight = new Float32Array(keep.length * kvHeads);
    let pairs = 0;
    let targetSum = 0;
    keep.forEach((i, row) => {
        x.set(data.features.subarray((i * layers + layer) * width, (i * layers + layer + 1) * width), row * width);
        for (let h = 0; h < kvHeads; h++) {
            const horizon = horizonOf(i, h);
            const counts = observed(i, horizon);
            target[row * kvHeads + h] = counts ? Math.log1p(horizon) : Number.NaN;
            weight[row * kvHeads + h] = (1 + horizon) ** power;
            if (counts) {
                pairs++;
                targetSum += Math.log1p(horizon);
            }
        }
    });
    return {rows: keep.length, x, target, weight, pairs, meanTarget: pairs > 0 ? targetSum / pairs : 0};
}
