import {mulberry32} from "../../shared/mulberry32.js";
import {retentionGateTensors, zeroGateLayer, type RetentionGateLayer} from "../retention/gateLayer.js";
import {AdamW} from "./AdamW.js";
import {initialGate} from "./initialGate.js";
import {layerSet, type LayerSet} from "./layerSet.js";
import {sharedHorizons} from "./sharedHorizons.js";
import {trainSettings, type TrainSettings} from "./trainSettings.js";
import type {GateTrainingData, TrainGatesOptions} from "./types.js";

// TRIM-KV's retention gates fitted to the model's own read horizons: per layer the sidecar's
// gate g = fc2 @ silu(fc1 @ x + b1) + bias (one output per KV head), log beta = logsigmoid(g), trained with the horizon
// term of scripts/retention/train.py (`horizon_loss`): Smooth-L1 between log(-1 / log beta), the gate's e-folding age,
// and log(1 + horizon), over the tokens watched long enough that a later read would have been seen, each (token, head)
// weighed by 1 + its horizon: the loss counts a token once per step it is still read, as the cache holds it. Plain
// Float32Array loops, one layer after another (the layers share nothing), AdamW, seeded: the same data and options give
// the same bits.

export type TrainedGates = {
    layers: number;
    width: number;
    hidden: number;
    kvHeads: number;
    gates: RetentionGateLayer[];
};

export type TrainReport = {
    gates: TrainedGates;
    /** Per layer, the mean horizon loss of the last epoch. */
    loss: number[];
    /** Per layer, the (token, KV head) pairs the loss counted (censored ones are skipped). */
    counted: number[];
    seconds: number;
};

/** Training that produced a non-finite loss or weight: nothing it made may be used. */
export class TrainingDivergedError extends Error {
    override name = "TrainingDivergedError";
}

/** log(-1 / log beta) is capped here (train.py clamps log beta at -1e-6): e-folding ages past a million tokens count alike. */
const minNegLogBeta = 1e-6;

/** The gate logits g of one layer for token rows `x` ([n, width]) -> [n, kvHeads]. */
export function gateLogits(gate: RetentionGateLayer, x: Float32Array, width: number): Float32Array {
    const hidden = gate.fc1Bias.length;
    const kvHeads = gate.bias.length;
    const n = x.length / width;
    const out = new Float32Array(n * kvHeads);
    const a = new Float32Array(hidden);
    for (let i = 0; i < n; i++) {
        forwardRow(gate, x, i * width, width, hidden, a, null);
        for (let o = 0; o < kvHeads; o++) out[i * kvHeads + o] = headLogit(gate, a, o, hidden);
    }
    return out;
}

/** Fits every layer's gate; see the module's comment. Yields to the event loop between steps. */
export async function trainGates(data: GateTrainingData, options: TrainGatesOptions = {}): Promise<TrainReport> {
    const started = performance.now();
    const run = trainSettings(data, options);
    const shared = options.target === "shared" ? sharedHorizons(data) : null;
    const random = mulberry32(options.seed ?? 1);
    const pause = pauser(options.signal);
    const gates: RetentionGateLayer[] = [];
    const loss: number[] = [];
    const counted: number[] = [];
    for (let layer = 0; layer < run.layers; layer++) {
        const set = layerSet(data, layer, run.minSeen, shared, options.horizonWeight ?? 1);
        const gate = initialGate(run.width, run.hidden, run.kvHeads, run.initStd, random, set, options.biasInit ?? "data");
        counted.push(set.pairs);
        loss.push(await fitLayer(gate, set, layer, run, random, pause, options.onProgress));
        gates.push(gate);
    }
    const {layers, width, hidden, kvHeads} = run;
    return {gates: {layers, width, hidden, kvHeads, gates}, loss, counted, seconds: (performance.now() - started) / 1000};
}

/** Yields to the event loop when 50 ms have passed since it last did, then stops if `signal` is aborted. */
function pauser(signal: AbortSignal | undefined): () => Promise<void> {
    let lastYield = performance.now();
    return async () => {
        if (performance.now() - lastYield <= 50) return;
        await new Promise((resolve) => setImmediate(resolve));
        lastYield = performance.now();
        signal?.throwIfAborted();
    };
}

/**
 * One row's pass through the gate: the hidden layer's pre-activations z and activations a, the loss's slope in each
 * head's logit (dg, in doubles as computed) and in the activations (da).
 */
type RowScratch = {z: Float32Array; a: Float32Array; dg: Float64Array; da: Float32Array};

/** A batch's running sums: the weighed loss and the weight of the (token, head) pairs it counted. */
type BatchSums = {loss: number; pairs: number};

/** Trains one layer's gate in place over `epochs` shuffled passes; returns the mean loss of the last. */
async function fitLayer(
    gate: RetentionGateLayer,
    set: LayerSet,
    layer: number,
    run: TrainSettings,
    random: ReturnType<typeof mulberry32>,
    pause: () => Promise<void>,
    onProgress: TrainGatesOptions["onProgress"]
): Promise<number> {
    const {width, hidden, kvHeads, epochs, batch} = run;
    const adam = new AdamW(gate, run.weightDecay);
    const grad = zeroGateLayer(width, hidden, kvHeads);
    const order = Uint32Array.from({length: set.rows}, (_, i) => i);
    const totalSteps = Math.ceil(set.rows / batch) * epochs;
    const warmup = Math.max(1, Math.round(totalSteps * 0.05));
    const scratch: RowScratch = {
        z: new Float32Array(hidden),
        a: new Float32Array(hidden),
        dg: new Float64Array(kvHeads),
        da: new Float32Array(hidden)
    };
    let step = 0;
    let epochLoss = 0;
    for (let epoch = 0; epoch < epochs; epoch++) {
        shuffle(order, random);
        let lossSum = 0;
        let pairSum = 0;
        for (let start = 0; start < set.rows; start += batch) {
            const sums = batchGradient(gate, set, order.subarray(start, Math.min(set.rows, start + batch)), width, grad, scratch);
            if (!Number.isFinite(sums.loss))
                throw new TrainingDivergedError(`Training diverged: layer ${layer}, epoch ${epoch + 1}: the loss is ${sums.loss}`);
            step++;
            if (sums.pairs > 0) adam.step(grad, 1 / sums.pairs, scheduledRate(run.learningRate, step, totalSteps, warmup));
            lossSum += sums.loss;
            pairSum += sums.pairs;
            await pause();
        }
        epochLoss = pairSum > 0 ? lossSum / pairSum : 0;
        const bad = firstNonFinite(gate);
        if (bad != null)
            throw new TrainingDivergedError(`Training diverged: layer ${layer}, epoch ${epoch + 1}: a weight of ${bad} is not finite`);
        onProgress?.({layer, layers: run.layers, epoch: epoch + 1, epochs, loss: epochLoss});
    }
    return epochLoss;
}

/** The learning rate at `step` (from 1): linear warm-up over `warmup` steps, then cosine down to 10% at `totalSteps`. */
function scheduledRate(learningRate: number, step: number, totalSteps: number, warmup: number): number {
    const progress = step / totalSteps;
    return learningRate * Math.min(1, step / warmup) * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * progress)));
}

/** The gradient of the batch's `rows` summed into `grad` (cleared first): forward, loss slope, then backward per layer. */
function batchGradient(
    gate: RetentionGateLayer,
    set: LayerSet,
    rows: Uint32Array,
    width: number,
    grad: RetentionGateLayer,
    scratch: RowScratch
): BatchSums {
    clearGate(grad);
    const sums: BatchSums = {loss: 0, pairs: 0};
    for (const row of rows) {
        forwardRow(gate, set.x, row * width, width, scratch.a.length, scratch.a, scratch.z);
        lossGradient(gate, set, row, scratch, sums);
        outputBackward(gate, set, row, scratch, grad);
        hiddenBackward(set.x, row * width, width, scratch, grad);
    }
    return sums;
}

/**
 * The weighed loss of each head of the row the loss counts (not censored), added to `sums`, and its slope in the head's
 * logit g, set in `scratch.dg`.
 */
function lossGradient(gate: RetentionGateLayer, set: LayerSet, row: number, scratch: RowScratch, sums: BatchSums): void {
    const {a, dg} = scratch;
    const kvHeads = dg.length;
    for (let o = 0; o < kvHeads; o++) {
        const target = set.target[row * kvHeads + o]!;
        if (Number.isNaN(target)) continue;
        const weight = set.weight[row * kvHeads + o]!;
        const [term, slope] = horizonTerm(headLogit(gate, a, o, a.length), target);
        sums.loss += term * weight;
        sums.pairs += weight;
        dg[o] = slope * weight;
    }
}

/**
 * Backward through fc2 and the bias for the heads the loss counts: their gradients added to `grad`, the slope in the
 * activations a set in `scratch.da`.
 */
function outputBackward(gate: RetentionGateLayer, set: LayerSet, row: number, scratch: RowScratch, grad: RetentionGateLayer): void {
    const {a, da, dg} = scratch;
    const hidden = a.length;
    const kvHeads = dg.length;
    da.fill(0);
    for (let o = 0; o < kvHeads; o++) {
        if (Number.isNaN(set.target[row * kvHeads + o]!)) continue;
        const slope = dg[o]!;
        grad.bias[o]! += slope;
        const w2 = o * hidden;
        for (let j = 0; j < hidden; j++) {
            grad.fc2[w2 + j]! += slope * a[j]!;
            da[j]! += slope * gate.fc2[w2 + j]!;
        }
    }
}

/** Backward through the SiLU and fc1 for the row at `offset` of `x`: fc1's and its bias's gradients added to `grad`. */
function hiddenBackward(x: Float32Array, offset: number, width: number, scratch: RowScratch, grad: RetentionGateLayer): void {
    const {z, da} = scratch;
    for (let j = 0; j < da.length; j++) {
        const dz = da[j]! * siluSlope(z[j]!);
        if (dz === 0) continue;
        grad.fc1Bias[j]! += dz;
        const w1 = j * width;
        for (let c = 0; c < width; c++) grad.fc1[w1 + c]! += dz * x[offset + c]!;
    }
}

/**
 * One (token, head)'s Smooth-L1 (beta 1) between log(-1 / log beta) and the target log(1 + horizon), and its slope in g.
 * -log beta = softplus(-g); d log(-1 / log beta) / dg = sigmoid(-g) / softplus(-g).
 */
export function horizonTerm(g: number, target: number): [number, number] {
    const softplus = g >= 0 ? Math.log1p(Math.exp(-g)) : -g + Math.log1p(Math.exp(g));
    const clamped = softplus < minNegLogBeta;
    const predicted = -Math.log(clamped ? minNegLogBeta : softplus);
    const diff = predicted - target;
    const abs = Math.abs(diff);
    const value = abs < 1 ? 0.5 * diff * diff : abs - 0.5;
    if (clamped) return [value, 0];
    const dLoss = abs < 1 ? diff : Math.sign(diff);
    const sigmoidNeg = g >= 0 ? Math.exp(-g) / (1 + Math.exp(-g)) : 1 / (1 + Math.exp(g));
    return [value, (dLoss * sigmoidNeg) / softplus];
}

function clearGate(gate: RetentionGateLayer): void {
    for (const key of retentionGateTensors) gate[key].fill(0);
}

/** a = silu(fc1 @ x + b1) for the row at `offset`; z (pre-activation) kept when given. */
function forwardRow(
    gate: RetentionGateLayer,
    x: Float32Array,
    offset: number,
    width: number,
    hidden: number,
    a: Float32Array,
    z: Float32Array | null
): void {
    const w = gate.fc1;
    for (let j = 0; j < hidden; j++) {
        const row = j * width;
        let s0 = 0;
        let s1 = 0;
        let s2 = 0;
        let s3 = 0;
        let c = 0;
        for (; c + 3 < width; c += 4) {
            s0 += w[row + c]! * x[offset + c]!;
            s1 += w[row + c + 1]! * x[offset + c + 1]!;
            s2 += w[row + c + 2]! * x[offset + c + 2]!;
            s3 += w[row + c + 3]! * x[offset + c + 3]!;
        }
        for (; c < width; c++) s0 += w[row + c]! * x[offset + c]!;
        const pre = gate.fc1Bias[j]! + (s0 + s1) + (s2 + s3);
        if (z != null) z[j] = pre;
        a[j] = pre / (1 + Math.exp(-pre));
    }
}

function headLogit(gate: RetentionGateLayer, a: Float32Array, o: number, hidden: number): number {
    let g = gate.bias[o]!;
    const row = o * hidden;
    for (let j = 0; j < hidden; j++) g += gate.fc2[row + j]! * a[j]!;
    return g;
}

/** d silu(z) / dz = s (1 + z (1 - s)), s = sigmoid(z). */
function siluSlope(z: number): number {
    const s = 1 / (1 + Math.exp(-z));
    return s * (1 + z * (1 - s));
}

function shuffle(order: Uint32Array, random: ReturnType<typeof mulberry32>): void {
    for (let i = order.length - 1; i > 0; i--) {
        const j = random.int(i + 1);
        const t = order[i]!;
        order[i] = order[j]!;
        order[j] = t;
    }
}

function firstNonFinite(gate: RetentionGateLayer): string | null {
    for (const [name, values] of Object.entries(gate) as [string, Float32Array][]) {
        for (const v of values) {
            if (!Number.isFinite(v)) return name;
        }
    }
    return null;
}
