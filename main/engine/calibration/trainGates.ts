import {mulberry32} from "../../demo/mulberry32.js";
import {isHorizonObserved} from "./isHorizonObserved.js";
import type {CalibrationDataset, CalibrationText} from "./types.js";

// TRIM-KV's retention gates fitted to the model's own read horizons: per layer the sidecar's
// gate g = fc2 @ silu(fc1 @ x + b1) + bias (one output per KV head), log beta = logsigmoid(g), trained with the horizon
// term of scripts/retention/train.py (`horizon_loss`): Smooth-L1 between log(-1 / log beta), the gate's e-folding age,
// and log(1 + horizon), over the tokens watched long enough that a later read would have been seen, each (token, head)
// weighed by 1 + its horizon: the loss counts a token once per step it is still read, as the cache holds it. Plain
// Float32Array loops, one layer after another (the layers share nothing), AdamW, seeded: the same data and options give
// the same bits.

/**
 * What the trainer reads of the calibration data: per sampled token, each layer's gate input, each layer's and KV head's
 * read horizon, and how many tokens followed it (censoring).
 */
export type GateTrainingData = Pick<
    CalibrationDataset,
    "layers" | "embeddingLength" | "headCountKv" | "tokens" | "features" | "horizons" | "followers"
> &
    Partial<Pick<CalibrationDataset, "minWatched" | "text">> & {texts?: readonly Pick<CalibrationText, "stop">[]};

/** One layer's gate, in the sidecar's (torch) layout. */
export type GateLayerWeights = {
    /** [hidden, width], row-major. */
    fc1: Float32Array;
    fc1Bias: Float32Array;
    /** [kvHeads, hidden], row-major. */
    fc2: Float32Array;
    /** Per KV head. */
    bias: Float32Array;
};

export type TrainedGates = {
    layers: number;
    width: number;
    hidden: number;
    kvHeads: number;
    gates: GateLayerWeights[];
};

export type TrainGatesOptions = {
    /** Width of the gate's hidden layer. Defaults to `64`. */
    hidden?: number;
    /** Passes over the tokens. Defaults to `12`. */
    epochs?: number;
    /** Tokens per optimizer step. Defaults to `128`. */
    batch?: number;
    /** AdamW's learning rate (linear warm-up over the first 5% of the steps, then cosine to 10%). Defaults to `3e-3`. */
    learningRate?: number;
    /** AdamW's decoupled weight decay on the two weight matrices. Defaults to `1e-4`. */
    weightDecay?: number;
    /**
     * The per-head bias at the start: a number (the authors' `retention_gate_bias_init` is 8, an e-folding age near
     * 3,000 tokens), or `"data"`: the bias whose e-folding age is the mean target of the layer's tokens. Defaults to `"data"`.
     */
    biasInit?: number | "data";
    /** Standard deviation of the initial weights (the authors' 0.02). Defaults to `0.02`. */
    initStd?: number;
    /**
     * Tokens count only when watched at least max(minSeen, 2 x horizon) tokens after writing (train.py). Defaults to the
     * data's `minWatched`, else `16`.
     */
    minSeen?: number;
    /**
     * What each gate learns: `"head"`, its own layer's and KV head's read horizon; `"shared"`, the longest over every
     * layer and KV head (what the engine's shared ranking, the max over layers and heads of log beta, needs of a cell).
     * Measured on the demo model (16 held-out problems, answers right at 25% / 50% of the cells): head 0.69 / 1.00,
     * shared 0.31 / 1.00. Defaults to `"head"`.
     */
    target?: "head" | "shared";
    /**
     * Each (token, head)'s loss weighs (1 + horizon)^horizonWeight. With 0 (train.py's unweighted mean) the few tokens
     * read hundreds of tokens on (a question's numbers, a mark the answer copies) are outweighed by the many read for a
     * step or two, and their ages come out 10x too short; with 1 each step a token is still read counts once. Measured
     * with scripts/calibration/simulateGates.ts (12 held-out merge-task thoughts, 36 training thoughts, pruned every 8
     * tokens by the gates' ranking): thoughts whose every later-read token was kept at 25% / 50% of the cells, 0 / 2
     * unweighted, 7 / 11 at 1, 10 / 11 at 1.5; demo task: 0 / 3, 1 / 7, 1 / 8. Defaults to `1`.
     */
    horizonWeight?: number;
    /** Seed of the initial weights and of the token order. Defaults to `1`. */
    seed?: number;
    /** After each epoch of each layer. */
    onProgress?: (progress: TrainProgress) => void;
    /** Stops between steps with an `AbortError`. */
    signal?: AbortSignal;
};

export type TrainProgress = {layer: number; layers: number; epoch: number; epochs: number; loss: number};

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
export function gateLogits(gate: GateLayerWeights, x: Float32Array, width: number): Float32Array {
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
    const hidden = options.hidden ?? 64;
    const epochs = options.epochs ?? 12;
    const batch = options.batch ?? 128;
    const learningRate = options.learningRate ?? 3e-3;
    const weightDecay = options.weightDecay ?? 1e-4;
    const initStd = options.initStd ?? 0.02;
    const minSeen = options.minSeen ?? data.minWatched ?? 16;
    const seed = options.seed ?? 1;
    const {layers, embeddingLength: width, headCountKv: kvHeads, tokens: count} = data;
    if (
        data.features.length !== count * layers * width ||
        data.horizons.length !== count * layers * kvHeads ||
        data.followers.length !== count
    )
        throw new RangeError("The calibration data's arrays do not match its layers, width, KV heads and token count");
    if (!(hidden >= 1 && epochs >= 1 && batch >= 1 && learningRate > 0))
        throw new RangeError("hidden, epochs and batch must be at least 1, the learning rate above 0");

    const shared = options.target === "shared" ? sharedHorizons(data) : null;
    const random = mulberry32(seed);
    const gates: GateLayerWeights[] = [];
    const loss: number[] = [];
    const counted: number[] = [];
    let lastYield = performance.now();
    for (let layer = 0; layer < layers; layer++) {
        const set = layerSet(data, layer, minSeen, shared, options.horizonWeight ?? 1);
        const gate = initialGate(width, hidden, kvHeads, initStd, random, set, options.biasInit ?? "data");
        counted.push(set.pairs);
        const adam = new AdamW(gate, learningRate, weightDecay);
        const grad = zeroGate(width, hidden, kvHeads);
        const order = Uint32Array.from({length: set.rows}, (_, i) => i);
        const stepsPerEpoch = Math.ceil(set.rows / batch);
        const totalSteps = stepsPerEpoch * epochs;
        const warmup = Math.max(1, Math.round(totalSteps * 0.05));
        const z = new Float32Array(hidden);
        const a = new Float32Array(hidden);
        const da = new Float32Array(hidden);
        let step = 0;
        let epochLoss = 0;
        for (let epoch = 0; epoch < epochs; epoch++) {
            shuffle(order, random);
            let lossSum = 0;
            let pairSum = 0;
            for (let start = 0; start < set.rows; start += batch) {
                const end = Math.min(set.rows, start + batch);
                clearGate(grad);
                let batchLoss = 0;
                let batchPairs = 0;
                for (let k = start; k < end; k++) {
                    const row = order[k]!;
                    const offset = row * width;
                    forwardRow(gate, set.x, offset, width, hidden, a, z);
                    da.fill(0);
                    for (let o = 0; o < kvHeads; o++) {
                        const target = set.target[row * kvHeads + o]!;
                        if (Number.isNaN(target)) continue;
                        const g = headLogit(gate, a, o, hidden);
                        const weight = set.weight[row * kvHeads + o]!;
                        const [term, rawSlope] = horizonTerm(g, target);
                        const value = term * weight;
                        const slope = rawSlope * weight;
                        batchLoss += value;
                        batchPairs += weight;
                        grad.bias[o]! += slope;
                        const w2 = o * hidden;
                        for (let j = 0; j < hidden; j++) {
                            grad.fc2[w2 + j]! += slope * a[j]!;
                            da[j]! += slope * gate.fc2[w2 + j]!;
                        }
                    }
                    for (let j = 0; j < hidden; j++) {
                        const dz = da[j]! * siluSlope(z[j]!);
                        if (dz === 0) continue;
                        grad.fc1Bias[j]! += dz;
                        const w1 = j * width;
                        const g1 = grad.fc1;
                        const x = set.x;
                        for (let c = 0; c < width; c++) g1[w1 + c]! += dz * x[offset + c]!;
                    }
                }
                if (!Number.isFinite(batchLoss))
                    throw new TrainingDivergedError(`Training diverged: layer ${layer}, epoch ${epoch + 1}: the loss is ${batchLoss}`);
                step++;
                if (batchPairs > 0) {
                    const progress = step / totalSteps;
                    const rate = learningRate * Math.min(1, step / warmup) * (0.1 + 0.9 * 0.5 * (1 + Math.cos(Math.PI * progress)));
                    adam.step(grad, 1 / batchPairs, rate);
                }
                lossSum += batchLoss;
                pairSum += batchPairs;
                if (performance.now() - lastYield > 50) {
                    await new Promise((resolve) => setImmediate(resolve));
                    lastYield = performance.now();
                    options.signal?.throwIfAborted();
                }
            }
            epochLoss = pairSum > 0 ? lossSum / pairSum : 0;
            const bad = firstNonFinite(gate);
            if (bad != null)
                throw new TrainingDivergedError(`Training diverged: layer ${layer}, epoch ${epoch + 1}: a weight of ${bad} is not finite`);
            options.onProgress?.({layer, layers, epoch: epoch + 1, epochs, loss: epochLoss});
        }
        gates.push(gate);
        loss.push(epochLoss);
    }
    return {gates: {layers, width, hidden, kvHeads, gates}, loss, counted, seconds: (performance.now() - started) / 1000};
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

/** Per token, the longest read horizon over every layer and KV head. */
function sharedHorizons(data: GateTrainingData): Float32Array {
    const per = data.layers * data.headCountKv;
    const out = new Float32Array(data.tokens);
    for (let i = 0; i < data.tokens; i++) {
        let best = 0;
        for (let k = 0; k < per; k++) best = Math.max(best, data.horizons[i * per + k]!);
        out[i] = best;
    }
    return out;
}

/**
 * The rows of one layer the loss can count: inputs copied contiguous, targets log(1 + horizon) or NaN where censored;
 * with `shared`, every head's horizon is the token's longest.
 */
function layerSet(data: GateTrainingData, layer: number, minSeen: number, shared: Float32Array | null, power: number) {
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

function initialGate(
    width: number,
    hidden: number,
    kvHeads: number,
    std: number,
    random: ReturnType<typeof mulberry32>,
    set: {meanTarget: number},
    biasInit: number | "data"
): GateLayerWeights {
    const gate = zeroGate(width, hidden, kvHeads);
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

function zeroGate(width: number, hidden: number, kvHeads: number): GateLayerWeights {
    return {
        fc1: new Float32Array(hidden * width),
        fc1Bias: new Float32Array(hidden),
        fc2: new Float32Array(kvHeads * hidden),
        bias: new Float32Array(kvHeads)
    };
}

function clearGate(gate: GateLayerWeights): void {
    gate.fc1.fill(0);
    gate.fc1Bias.fill(0);
    gate.fc2.fill(0);
    gate.bias.fill(0);
}

/** a = silu(fc1 @ x + b1) for the row at `offset`; z (pre-activation) kept when given. */
function forwardRow(
    gate: GateLayerWeights,
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

function headLogit(gate: GateLayerWeights, a: Float32Array, o: number, hidden: number): number {
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

function firstNonFinite(gate: GateLayerWeights): string | null {
    for (const [name, values] of Object.entries(gate) as [string, Float32Array][]) {
        for (const v of values) {
            if (!Number.isFinite(v)) return name;
        }
    }
    return null;
}

/** AdamW (decoupled weight decay on the two matrices), betas 0.9 / 0.999, eps 1e-8. */
class AdamW {
    private readonly _m: GateLayerWeights;
    private readonly _v: GateLayerWeights;
    private _t = 0;

    constructor(
        private readonly _gate: GateLayerWeights,
        _rate: number,
        private readonly _decay: number
    ) {
        const width = _gate.fc1.length / _gate.fc1Bias.length;
        this._m = zeroGate(width, _gate.fc1Bias.length, _gate.bias.length);
        this._v = zeroGate(width, _gate.fc1Bias.length, _gate.bias.length);
    }

    step(grad: GateLayerWeights, scale: number, rate: number): void {
        this._t++;
        const b1 = 0.9;
        const b2 = 0.999;
        const c1 = 1 - b1 ** this._t;
        const c2 = 1 - b2 ** this._t;
        for (const key of ["fc1", "fc1Bias", "fc2", "bias"] as const) {
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
