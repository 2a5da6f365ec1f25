import {retentionGateTensors, type RetentionGateLayer} from "../retention/gateLayer.js";

/**
 * AdamW over one layer's gate (decoupled weight decay on the two matrices), betas 0.9 / 0.999, eps 1e-8. The learning
 * rate is each step's: the trainer's schedule changes it every step.
 */
export class AdamW {
    private readonly _m: RetentionGateLayer;
    private readonly _v: RetentionGateLayer;
    private _t = 0;

    constructor(
        private readonly _gate: RetentionGateLayer,
        private readonly _decay: number
    ) {
        this._m = zerosLike(_gate);
        this._v = zerosLike(_gate);
    }

    /** Moves the gate against `grad` times `scale` (the batch's mean), at learning rate `rate`. */
    step(grad: RetentionGateLayer, scale: number, rate: number): void {
        this._t++;
        const b1 = 0.9;
        const b2 = 0.999;
        const c1 = 1 - b1 ** this._t;
        const c2 = 1 - b2 ** this._t;
        for (const key of retentionGateTensors) {
            const p = this._gate[key];
            const g = grad[key];
            const m = this._m[key];
            const v = this._v[key];
            const decay = key === "fc1" || key === "fc2" ? 1 - rate * this._decay : 1;
            for (let k = 0; k < p.length; k++) {
                const gk = g[k]! * scale;
                const mk = b1 * m[k]! + (1 - b1) * gk;
                const vk = b2 * v[k]! + (1 - b2) * gk * gk;
                m[k] = mk;
                v[k] = vk;
                p[k] = p[k]! * decay - (rate * (mk / c1)) / (Math.sqrt(vk / c2) + 1e-8);
            }
        }
    }
}

function zerosLike(gate: RetentionGateLayer): RetentionGateLayer {
    return {
        fc1: new Float32Array(gate.fc1.length),
        fc1Bias: new Float32Array(gate.fc1Bias.length),
        fc2: new Float32Array(gate.fc2.length),
        bias: new Float32Array(gate.bias.length)
    };
}
