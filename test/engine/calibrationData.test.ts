// collectCalibrationData on the demo model: the model thinks greedily with Full KV on two demo problems; each sample's
// features are what the shipped retention gates read (the gate MLP on them gives the engine's gate logit of the token),
// its horizons are the engine's read horizons of the token when its text is decoded again, its followers count the
// tokens after it; the sample is seeded (same seed, same sample) and bounded.
import fs from "node:fs/promises";
import {describe, expect, test} from "vitest";
import {readGgufFileInfo, type Token} from "node-llama-cpp";
import {collectCalibrationData} from "../../main/engine/calibration/collectCalibrationData.js";
import {isHorizonObserved} from "../../main/engine/calibration/isHorizonObserved.js";
import type {CalibrationDataset} from "../../main/engine/calibration/types.js";
import {heldOutDemoProblems} from "../../main/demo/demoTask.js";
import {demoGatesPath as demoGates, openKvContext, useDemoModel} from "../fixtures/demoModel.js";
import type {RetentionGateLayer} from "../../main/engine/retention/gateLayer.js";
import {gateLogits} from "../fixtures/gguf/retentionSidecar.js";
import {float16BitsToFloat32} from "../fixtures/gguf/writeGguf.js";

async function readGates(filePath: string, layers: number): Promise<RetentionGateLayer[]> {
    const info = await readGgufFileInfo(filePath, {readTensorInfo: true, logWarnings: false, sourceType: "filesystem"});
    const handle = await fs.open(filePath, "r");
    const read = async (name: string) => {
        const tensor = info.tensorInfo!.find((candidate) => candidate.name === name)!;
        const count = tensor.dimensions.reduce((product: number, dim) => product * Number(dim), 1);
        const f16 = Number(tensor.ggmlType) === 1;
        const bytes = Buffer.alloc(count * (f16 ? 2 : 4));
        await handle.read(bytes, 0, bytes.length, Number(tensor.fileOffset));
        return Float32Array.from({length: count}, (_, i) =>
            f16 ? float16BitsToFloat32(bytes.readUInt16LE(i * 2)) : bytes.readFloatLE(i * 4)
        );
    };
    try {
        const gates: RetentionGateLayer[] = [];
        for (let layer = 0; layer < layers; layer++) {
            const prefix = `blk.${layer}.retention.`;
            gates.push({
                fc1: await read(prefix + "fc1.weight"),
                fc1Bias: await read(prefix + "fc1.bias"),
                fc2: await read(prefix + "fc2.weight"),
                bias: await read(prefix + "bias")
            });
        }
        return gates;
    } finally {
        await handle.close();
    }
}

describe("calibration data on the demo model", () => {
    const demo = useDemoModel();
    const prompts = heldOutDemoProblems(2, {minSteps: 8, maxSteps: 12}).map((problem) => ({user: problem.question}));

    async function collect(seed: number, maxSamples: number, withGates: boolean, moreReadThresholds: number[] = []) {
        const {model, chatWrapper} = demo;
        const run = await openKvContext(model, {contextSize: 1024, threads: 2});
        const {kv, sequence} = run;
        try {
            if (withGates) await kv.configureRetention(demoGates);
            const dataset = await collectCalibrationData({model, chatWrapper, sequence, kv}, prompts, {
                maxTokens: 96,
                maxSamples,
                seed,
                moreReadThresholds
            });
            return {dataset, ...run};
        } catch (err) {
            await run.dispose();
            throw err;
        }
    }

    test("samples carry the gates' input and the engine's read horizons, with their followers", async () => {
        const {model} = demo;
        const {dataset, kv, sequence, dispose} = await collect(3, 40, true);
        try {
            const {layers} = await kv.stats();
            expect(dataset).toMatchObject({
                layers,
                embeddingLength: model.embeddingVectorSize,
                readThreshold: 0.5,
                minWatched: 16,
                seed: 3
            });
            expect(dataset.texts).toHaveLength(2);
            const written = dataset.texts.reduce((acc, text) => acc + text.promptTokens + text.generatedTokens, 0);
            expect(dataset.tokensSeen).toBe(written);
            expect(dataset.tokens).toBe(40);
            expect(dataset.features).toHaveLength(40 * layers * dataset.embeddingLength);
            expect(dataset.horizons).toHaveLength(40 * layers * dataset.headCountKv);
            for (const text of dataset.texts) {
                expect(text.tokens).toHaveLength(text.promptTokens + text.generatedTokens);
                expect(text.generatedTokens).toBeGreaterThan(20); // the model thought
            }

            const gates = await readGates(demoGates, layers);
            const d = dataset.embeddingLength;
            const nKv = dataset.headCountKv;
            for (const textIndex of [0, 1]) {
                // decode the text again with the gates and the horizons on: the engine's values for each sample's token
                const text = dataset.texts[textIndex]!;
                await sequence.clearHistory();
                await kv.configureReadHorizon(dataset.readThreshold);
                await sequence.evaluateWithoutGeneratingNewTokens(Array.from(text.tokens) as Token[]);
                const retention = await kv.retention(0);
                const horizon = await kv.readHorizon(0);
                await kv.configureReadHorizon(null);
                const n = retention.positions.length;
                expect(n).toBe(text.tokens.length);
                const cellOf = new Map(Array.from(retention.positions, (position, j) => [position, j]));
                const lastPosition = text.tokens.length - 1;

                let samples = 0;
                for (let i = 0; i < dataset.tokens; i++) {
                    if (dataset.text[i] !== textIndex) continue;
                    samples++;
                    const position = dataset.positions[i]!;
                    const j = cellOf.get(position)!;
                    expect(dataset.tokenIds[i]).toBe(text.tokens[position]);
                    expect(dataset.generated[i]).toBe(position >= text.promptTokens ? 1 : 0);
                    expect(dataset.followers[i]).toBe(lastPosition - position);
                    for (let layer = 0; layer < layers; layer++) {
                        const row = dataset.features.subarray((i * layers + layer) * d, (i * layers + layer + 1) * d);
                        const expected = gateLogits(gates[layer]!, row);
                        for (let h = 0; h < retention.heads; h++) {
                            const engine = retention.logits[layer]![h * n + j]!;
                            expect(Math.abs(engine - expected[h]!), `sample ${i}, layer ${layer}, head ${h}`).toBeLessThan(
                                2e-2 * Math.max(1, Math.abs(expected[h]!))
                            );
                            const last = horizon.last[layer]![h * n + j]!;
                            expect(dataset.horizons[(i * layers + layer) * nKv + h]).toBe(Math.max(0, last - position));
                        }
                    }
                }
                expect(samples).toBeGreaterThan(0);
            }
            // the labels say something: some tokens are read well after they are written, and some are uncensored
            expect(Math.max(...dataset.horizons)).toBeGreaterThan(4);
            let observed = 0;
            for (let i = 0; i < dataset.tokens; i++)
                observed += isHorizonObserved(
                    dataset.followers[i]!,
                    Math.max(...dataset.horizons.subarray(i * layers * nKv, (i + 1) * layers * nKv))
                )
                    ? 1
                    : 0;
            expect(observed).toBeGreaterThan(0);
            expect(await kv.stats()).toMatchObject({readHorizon: false, attnNormCapture: false});
        } finally {
            await dispose();
        }
    });

    test("other read thresholds label the same samples: the same threshold read again gives the same horizons, a lower one longer ones", async () => {
        const plain = await collect(5, 48, false);
        const more = await collect(5, 48, false, [0.5, 0.2]);
        try {
            const a = plain.dataset;
            const b = more.dataset;
            // the text read again changes nothing of the sample, its inputs or its first labels
            expect(Array.from(b.positions)).toEqual(Array.from(a.positions));
            expect(Array.from(b.features)).toEqual(Array.from(a.features));
            expect(Array.from(b.horizons)).toEqual(Array.from(a.horizons));
            expect(b.texts.map((t) => Array.from(t.tokens))).toEqual(a.texts.map((t) => Array.from(t.tokens)));
            expect(b.alternatives?.map((alt) => alt.readThreshold)).toEqual([0.5, 0.2]);
            expect(Array.from(b.alternatives![0]!.horizons)).toEqual(Array.from(a.horizons));
            const lower = b.alternatives![1]!.horizons;
            let longer = 0;
            for (let k = 0; k < lower.length; k++) {
                expect(lower[k]).toBeGreaterThanOrEqual(a.horizons[k]!);
                if (lower[k]! > a.horizons[k]!) longer++;
            }
            expect(longer).toBeGreaterThan(0);
            expect(a.alternatives).toEqual([]);
        } finally {
            for (const run of [plain, more]) await run.dispose();
        }
    });

    test("the sample is seeded and bounded by maxSamples", async () => {
        const runs: CalibrationDataset[] = [];
        for (const seed of [7, 7, 8]) {
            const {dataset, dispose} = await collect(seed, 24, false);
            runs.push(dataset);
            await dispose();
        }
        const key = (dataset: CalibrationDataset) => Array.from(dataset.positions, (position, i) => `${dataset.text[i]}:${position}`);
        expect(runs[0]!.tokens).toBe(24);
        expect(key(runs[1]!)).toEqual(key(runs[0]!));
        expect(Array.from(runs[1]!.features)).toEqual(Array.from(runs[0]!.features));
        expect(key(runs[2]!)).not.toEqual(key(runs[0]!));
    });
});
