import {describe, expect, it} from "vitest";
import {gateLogits, horizonTerm, trainGates, TrainingDivergedError} from "../../../../main/engine/calibration/trainGates.js";
import {mulberry32} from "../../../../main/shared/mulberry32.js";
import type {GateTrainingData} from "../../../../main/engine/calibration/types.js";
import type {RetentionGateLayer} from "../../../../main/engine/retention/gateLayer.js";

const layers = 2;
const width = 24;
const kvHeads = 2;

function normal(random: ReturnType<typeof mulberry32>): number {
    return Math.sqrt(-2 * Math.log(1 - random.uniform())) * Math.cos(2 * Math.PI * random.uniform());
}

/** A known gate per layer (hidden 8) whose e-folding ages spread from under 1 to a few hundred tokens. */
function teacherGates(seed: number): RetentionGateLayer[] {
    const random = mulberry32(seed);
    return Array.from({length: layers}, () => ({
        fc1: Float32Array.from({length: 8 * width}, () => normal(random) * 0.4),
        fc1Bias: Float32Array.from({length: 8}, () => normal(random) * 0.2),
        fc2: Float32Array.from({length: kvHeads * 8}, () => normal(random) * 0.8),
        bias: Float32Array.from({length: kvHeads}, () => 2)
    }));
}

/** Tokens with random inputs whose horizons are the teacher's e-folding ages less one (train.py's target, inverted). */
function dataset(teacher: RetentionGateLayer[], count: number, seed: number): GateTrainingData {
    const random = mulberry32(seed);
    const features = Float32Array.from({length: count * layers * width}, () => normal(random));
    const horizons = new Float32Array(count * layers * kvHeads);
    for (let l = 0; l < layers; l++) {
        const x = new Float32Array(count * width);
        for (let i = 0; i < count; i++) x.set(features.subarray((i * layers + l) * width, (i * layers + l + 1) * width), i * width);
        const g = gateLogits(teacher[l]!, x, width);
        for (let i = 0; i < count; i++) {
            for (let h = 0; h < kvHeads; h++) {
                const negLogBeta = Math.log1p(Math.exp(-g[i * kvHeads + h]!));
                horizons[(i * layers + l) * kvHeads + h] = Math.max(0, Math.round(1 / negLogBeta - 1));
            }
        }
    }
    // texts of 2,000 tokens: the last ones are censored (watched too briefly for their horizon)
    const followers = Int32Array.from({length: count}, (_, i) => 1999 - (i % 2000));
    return {layers, embeddingLength: width, headCountKv: kvHeads, tokens: count, features, horizons, followers};
}

/** Spearman's rank correlation. */
function rankCorrelation(a: ArrayLike<number>, b: ArrayLike<number>): number {
    const ranks = (v: ArrayLike<number>) => {
        const order = Array.from({length: v.length}, (_, i) => i).sort((i, j) => v[i]! - v[j]!);
        const r = new Float64Array(v.length);
        order.forEach((i, k) => (r[i] = k));
        return r;
    };
    const ra = ranks(a);
    const rb = ranks(b);
    const n = ra.length;
    const mean = (n - 1) / 2;
    let num = 0;
    let da = 0;
    let db = 0;
    for (let i = 0; i < n; i++) {
        num += (ra[i]! - mean) * (rb[i]! - mean);
        da += (ra[i]! - mean) ** 2;
        db += (rb[i]! - mean) ** 2;
    }
    return num / Math.sqrt(da * db);
}

function heldOutCorrelation(trained: RetentionGateLayer[], teacher: RetentionGateLayer[], test: GateTrainingData): number[] {
    const out: number[] = [];
    for (let l = 0; l < layers; l++) {
        const x = new Float32Array(test.tokens * width);
        for (let i = 0; i < test.tokens; i++)
            x.set(test.features.subarray((i * layers + l) * width, (i * layers + l + 1) * width), i * width);
        const want = gateLogits(teacher[l]!, x, width);
        const got = gateLogits(trained[l]!, x, width);
        for (let h = 0; h < kvHeads; h++) {
            const pick = (v: Float32Array) => Float32Array.from({length: test.tokens}, (_, i) => v[i * kvHeads + h]!);
            out.push(rankCorrelation(pick(want), pick(got)));
        }
    }
    return out;
}

describe("trainGates", () => {
    const teacher = teacherGates(7);
    const train = dataset(teacher, 3000, 11);
    const test = dataset(teacher, 600, 12);

    it("recovers the ranking of a known gate from the horizons it generates, on tokens it never saw", async () => {
        const untrained = await trainGates(train, {hidden: 16, epochs: 1, learningRate: 1e-12, seed: 3});
        const before = heldOutCorrelation(untrained.gates.gates, teacher, test);
        const options = {hidden: 16, epochs: 15, batch: 64, learningRate: 1e-2, seed: 3};
        const report = await trainGates(train, {...options, horizonWeight: 0});
        const after = heldOutCorrelation(report.gates.gates, teacher, test);
        expect(Math.max(...before.map(Math.abs))).toBeLessThan(0.6);
        for (const r of after) expect(r).toBeGreaterThan(0.9);
        // weighted by horizon (the default), the fit spends some of its accuracy on the long-read tokens
        const weighted = heldOutCorrelation((await trainGates(train, options)).gates.gates, teacher, test);
        for (const r of weighted) expect(r).toBeGreaterThan(0.85);
        // censored tokens (the end of each text) were left out of the loss
        expect(report.counted[0]!).toBeLessThan(train.tokens * kvHeads);
        expect(report.counted[0]!).toBeGreaterThan(train.tokens * kvHeads * 0.8);
    });

    it("censors only texts the token limit cut: a text the model ended has every read seen", async () => {
        const texts = [
            {prompt: 0, promptTokens: 10, generatedTokens: 1990, stop: "eog" as const},
            {prompt: 1, promptTokens: 10, generatedTokens: 990, stop: "limit" as const}
        ];
        const text = Int32Array.from({length: train.tokens}, (_, i) => (i < 2000 ? 0 : 1));
        const report = await trainGates({...train, text, texts}, {hidden: 4, epochs: 1, seed: 1});
        const cut = await trainGates(train, {hidden: 4, epochs: 1, seed: 1});
        let expected = 2000 * kvHeads;
        for (let i = 2000; i < train.tokens; i++) {
            for (let h = 0; h < kvHeads; h++)
                expected += train.followers[i]! >= Math.max(16, 2 * train.horizons[i * layers * kvHeads + h]!) ? 1 : 0;
        }
        expect(report.counted[0]).toBe(expected);
        expect(cut.counted[0]).toBeLessThan(expected);
    });

    it("weighs each token by how long it is read: inputs read far ahead in a few texts keep a long age", async () => {
        // tokens whose first input is high are read 400 tokens on in one text of five and for 1 token in the others;
        // the rest for 1 token. Missing a far read costs more than keeping a token too long, so the gate must keep them.
        const random = mulberry32(21);
        const count = 3000;
        const features = Float32Array.from({length: count * layers * width}, () => normal(random));
        const special = (i: number) => features[i * layers * width]! > 1;
        const horizons = new Float32Array(count * layers * kvHeads);
        for (let i = 0; i < count; i++)
            horizons.fill(special(i) && i % 5 === 0 ? 400 : 1, i * layers * kvHeads, (i + 1) * layers * kvHeads);
        const data: GateTrainingData = {
            layers,
            embeddingLength: width,
            headCountKv: kvHeads,
            tokens: count,
            features,
            horizons,
            followers: new Int32Array(count).fill(1000)
        };
        const meanAge = async (horizonWeight: number | undefined) => {
            const report = await trainGates(data, {hidden: 16, epochs: 10, seed: 2, ...(horizonWeight != null ? {horizonWeight} : {})});
            const x = new Float32Array(count * width);
            for (let i = 0; i < count; i++) x.set(features.subarray(i * layers * width, i * layers * width + width), i * width);
            const g = gateLogits(report.gates.gates[0]!, x, width);
            let sum = 0;
            let n = 0;
            for (let i = 0; i < count; i++) {
                if (!special(i)) continue;
                sum += 1 / Math.log1p(Math.exp(-g[i * kvHeads]!)); // e-folding age: -1 / log beta
                n++;
            }
            return sum / n;
        };
        expect(await meanAge(undefined)).toBeGreaterThan(100);
        expect(await meanAge(0)).toBeLessThan(10);
    });

    it("gives the same bits for the same seed, other bits for another", async () => {
        const options = {hidden: 8, epochs: 2, seed: 5};
        const a = await trainGates(train, options);
        const b = await trainGates(train, options);
        const c = await trainGates(train, {...options, seed: 6});
        const bytes = (r: typeof a) =>
            Buffer.concat(r.gates.gates.flatMap((g) => [g.fc1, g.fc1Bias, g.fc2, g.bias].map((v) => Buffer.from(v.buffer))));
        expect(bytes(a).equals(bytes(b))).toBe(true);
        expect(bytes(a).equals(bytes(c))).toBe(false);
    });

    it("stops with a clear error when training diverges", async () => {
        await expect(trainGates(train, {hidden: 8, epochs: 3, learningRate: 1e38, seed: 1})).rejects.toThrow(TrainingDivergedError);
        await expect(trainGates(train, {hidden: 8, epochs: 3, learningRate: 1e38, seed: 1})).rejects.toThrow(/diverged: layer 0/);
    });

    it("refuses arrays that do not match the declared shape", async () => {
        await expect(trainGates({...train, tokens: train.tokens + 1})).rejects.toThrow(RangeError);
    });

    it("the horizon term's slope is its derivative in g", () => {
        for (const [g, target] of [
            [-3, 0.5],
            [0, 2],
            [4, 1],
            [9, 5.5],
            [2, 6]
        ] as const) {
            const [, slope] = horizonTerm(g, target);
            const eps = 1e-5;
            const numeric = (horizonTerm(g + eps, target)[0] - horizonTerm(g - eps, target)[0]) / (2 * eps);
            expect(slope).toBeCloseTo(numeric, 5);
        }
    });
});
