import type {mulberry32} from "../../shared/mulberry32.js";
import {zeroGateLayer, type RetentionGateLayer} from "../retention/gateLayer.js";

/**
 * A layer's gate before training: both matrices normal with deviation `std`, fc1's bias 0, the per-head bias
 * `biasInit` (`"data"`: the logit whose e-folding age is the layer's mean target).
 */
export function initialGate(
    width: number,
    hidden: number,
    kvHeads: number,
    std: number,
    random: ReturnType<typeof mulberry32>,
    set: {meanTarget: number},
    biasInit: number | "data"
): RetentionGateLayer {
    const gate = zeroGateLayer(width, hidden, kvHeads);
    const normal = () => {
        // Box-Muller on two uniforms in (0, 1]
        const u = 1 - random.uniform();
        const v = random.uniform();
        return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    };
    for (let k = 0; k < gate.fc1.length; k++) gate.fc1[k] = normal() * std;
    for (let k = 0; k < gate.fc2.length; k++) gate.fc2[k] = normal() * std;
    gate.bias.fill(biasInit === "data" ? logitForAge(set.meanTarget) : biasInit);
    return gate;
}

/** The gate logit whose log(-1 / log beta) is `logAge`: softplus(-g) = exp(-logAge). */
function logitForAge(logAge: number): number {
    return -Math.log(Math.expm1(Math.exp(-logAge)));
}
