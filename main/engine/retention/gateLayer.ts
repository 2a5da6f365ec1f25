/** One layer's TRIM-KV retention gate ("rg"): g = fc2 @ silu(fc1 @ x + fc1Bias) + bias, one logit per KV head. */
export type RetentionGateLayer = {
    /** fc1 weight, `hidden` rows of the model's width (torch layout [hidden, width], row-major). */
    fc1: Float32Array;
    /** fc1 bias, `hidden` values. */
    fc1Bias: Float32Array;
    /** fc2 weight, one row of `hidden` per KV head (torch layout [kvHeads, hidden]). */
    fc2: Float32Array;
    /** The per-KV-head bias added last. */
    bias: Float32Array;
};

/** The names of a gate's tensors, for what treats them all alike (an optimiser's step, clearing a gradient). */
export const retentionGateTensors = ["fc1", "fc1Bias", "fc2", "bias"] as const satisfies readonly (keyof RetentionGateLayer)[];

/** A gate of zeros for a model `width` wide with `kvHeads` KV heads, `hidden` units between its two layers. */
export function zeroGateLayer(width: number, hidden: number, kvHeads: number): RetentionGateLayer {
    return {
        fc1: new Float32Array(hidden * width),
        fc1Bias: new Float32Array(hidden),
        fc2: new Float32Array(kvHeads * hidden),
        bias: new Float32Array(kvHeads)
    };
}
