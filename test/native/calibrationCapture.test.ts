// The calibration read-outs (native/patches 0012-0013): each layer's captured attn_norm rows are what the retention gates
// read (the gate applied to the captured row gives the engine's gate logit, in every layer; layer 0's row is the RMSNorm of
// the token's embedding), and each cell's read horizon is the last query that put at least the threshold of one head's
// attention on it, the most over the KV head's query heads, as computed here from the attention weights read back one
// query at a time; for a prefill (every row of a ubatch), decodes, reused cells and with flash attention on or off.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {readGgufFileInfo, type LlamaModel, type Token} from "node-llama-cpp";
import {getFixtureModelInfo, type FixtureName} from "../fixtures/gguf/fixtures.js";
import type {RetentionGateLayer} from "../../main/engine/retention/gateLayer.js";
import {gateLogits, writeRetentionSidecar} from "../fixtures/gguf/retentionSidecar.js";
import {float16BitsToFloat32} from "../fixtures/gguf/writeGguf.js";
import type {GeneratedModelInfo} from "../fixtures/gguf/generateModel.js";
import type {CapturedNorms} from "../../main/engine/native/types.js";
import {createTestContext, getTestLlama, randomTokens, type TestContext} from "./nativeTestUtils.js";

async function readF32Tensors(filePath: string, names: string[]): Promise<Map<string, Float32Array>> {
    const info = await readGgufFileInfo(filePath, {readTensorInfo: true, logWarnings: false, sourceType: "filesystem"});
    const handle = await fs.open(filePath, "r");
    try {
        const out = new Map<string, Float32Array>();
        for (const name of names) {
            const tensor = info.tensorInfo!.find((candidate) => candidate.name === name)!;
            const count = tensor.dimensions.reduce((product: number, dim) => product * Number(dim), 1);
            const f16 = Number(tensor.ggmlType) === 1;
            const bytes = Buffer.alloc(count * (f16 ? 2 : 4));
            await handle.read(bytes, 0, bytes.length, Number(tensor.fileOffset));
            out.set(
                name,
                Float32Array.from({length: count}, (_, i) =>
                    f16 ? float16BitsToFloat32(bytes.readUInt16LE(i * 2)) : bytes.readFloatLE(i * 4)
                )
            );
        }
        return out;
    } finally {
        await handle.close();
    }
}

const fixtures: FixtureName[] = ["tiny-qwen2", "tiny-qwen3"];

describe.each(fixtures)("calibration read-outs, %s", (fixture) => {
    let model: LlamaModel;
    let info: GeneratedModelInfo;
    let dir: string;
    let sidecar: string;
    let gates: RetentionGateLayer[];
    let embedding: Float32Array;
    let norm: Float32Array;

    beforeAll(async () => {
        info = await getFixtureModelInfo(fixture);
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-capture-"));
        sidecar = path.join(dir, "gates.retention.gguf");
        gates = await writeRetentionSidecar(sidecar, {
            modelPath: info.path,
            architecture: info.spec.arch,
            layers: info.spec.nLayer,
            width: info.spec.nEmbd,
            kvHeads: info.spec.nHeadKv,
            seed: 5
        });
        const tensors = await readF32Tensors(info.path, ["token_embd.weight", "blk.0.attn_norm.weight"]);
        embedding = tensors.get("token_embd.weight")!;
        norm = tensors.get("blk.0.attn_norm.weight")!;
        model = await (await getTestLlama()).loadModel({modelPath: info.path});
    });

    afterAll(async () => {
        await model?.dispose();
        await fs.rm(dir, {recursive: true, force: true});
    });

    test.each([false, true])(
        "the captured attn_norm rows are the gates' input, in every layer (flash attention %s)",
        async (flashAttention) => {
            const t = await createTestContext(model, {flashAttention});
            try {
                await t.kv.configureRetention(sidecar);
                await t.kv.configureNormCapture(true);
                const tokens = randomTokens(20, 3);
                await t.sequence.evaluateWithoutGeneratingNewTokens(tokens); // prefill, one ubatch
                const prefill = await t.kv.takeCapturedNorms();
                const more = randomTokens(4, 4);
                const decoded: CapturedNorms[] = [];
                for (const token of more) {
                    // decode, one token per ubatch
                    tokens.push(token);
                    await t.sequence.evaluateWithoutGeneratingNewTokens([token]);
                    decoded.push(await t.kv.takeCapturedNorms());
                }
                const {nLayer, nEmbd} = info.spec;
                expect(prefill).toMatchObject({tokens: 20, layers: nLayer, width: nEmbd});
                expect(Array.from(prefill.positions)).toEqual(Array.from({length: 20}, (_, i) => i));
                expect(prefill.rows).toHaveLength(20 * nLayer * nEmbd);
                expect(decoded.map((d) => [d.tokens, ...d.positions])).toEqual([
                    [1, 20],
                    [1, 21],
                    [1, 22],
                    [1, 23]
                ]);
                expect((await t.kv.takeCapturedNorms()).tokens).toBe(0); // taken: forgotten

                const rowOf = (position: number, layer: number): Float32Array => {
                    const source = position < 20 ? prefill : decoded[position - 20]!;
                    const i = position < 20 ? position : 0;
                    const from = (i * nLayer + layer) * nEmbd;
                    return Float32Array.from(source.rows.subarray(from, from + nEmbd), float16BitsToFloat32);
                };

                // layer 0 reads RMSNorm(embedding) * weight
                for (let position = 0; position < 24; position++) {
                    const row = embedding.subarray(tokens[position]! * nEmbd, (tokens[position]! + 1) * nEmbd);
                    const scale = 1 / Math.sqrt(row.reduce((acc, v) => acc + v * v, 0) / nEmbd + info.spec.rmsEps);
                    const captured = rowOf(position, 0);
                    for (let k = 0; k < nEmbd; k++)
                        expect(Math.abs(captured[k]! - row[k]! * scale * norm[k]!)).toBeLessThan(
                            2e-3 * Math.max(1, Math.abs(row[k]! * scale * norm[k]!))
                        );
                }

                // every layer: the gate on the captured row is the engine's gate logit of the cell (F16 rows: 1e-2)
                const retention = await t.kv.retention(0);
                const n = retention.positions.length;
                expect(n).toBe(24);
                for (let layer = 0; layer < nLayer; layer++) {
                    for (let j = 0; j < n; j++) {
                        const expected = gateLogits(gates[layer]!, rowOf(retention.positions[j]!, layer));
                        for (let h = 0; h < retention.heads; h++)
                            expect(Math.abs(retention.logits[layer]![h * n + j]! - expected[h]!)).toBeLessThan(
                                1e-2 * Math.max(1, Math.abs(expected[h]!))
                            );
                    }
                }
                // deeper layers capture other rows than layer 0
                expect(rowOf(5, 1)).not.toEqual(rowOf(5, 0));
            } finally {
                await t.dispose();
            }
        }
    );

    test("capture off keeps nothing and changes no logit", async () => {
        const t = await createTestContext(model);
        try {
            await t.kv.configureNormCapture(true);
            await t.kv.configureNormCapture(false);
            await t.sequence.evaluateWithoutGeneratingNewTokens(randomTokens(8, 6));
            expect((await t.kv.takeCapturedNorms()).tokens).toBe(0);
        } finally {
            await t.dispose();
        }
    });

    /**
     * The attention weights of every query of `tokens`, decoded one at a time with scoring on (one row): weights[t][layer]
     * is `heads * n` (head-major) over the cells in `positions` order, query at position t.
     */
    async function attentionWeights(t: TestContext, tokens: Token[]) {
        await t.kv.configureScoring({enabled: true, rows: 1});
        const weights: Float32Array[][] = [];
        let positions: Int32Array = new Int32Array(0);
        let heads = 0;
        for (const token of tokens) {
            await t.sequence.evaluateWithoutGeneratingNewTokens([token]);
            const scores = await t.kv.scores(0);
            positions = scores.positions;
            heads = scores.heads;
            weights.push(scores.layers.map((layer) => layer.last));
        }
        await t.kv.configureScoring({enabled: false});
        return {weights, positions, heads};
    }

    test.each([false, true])(
        "the read horizon is the last query reading a cell at the threshold, over the KV head's group (flash attention %s)",
        async (flashAttention) => {
            const reference = await createTestContext(model, {flashAttention});
            const t = await createTestContext(model, {flashAttention});
            try {
                const {nLayer, nHead, nHeadKv} = info.spec;
                const group = nHead / nHeadKv;
                // a first text that fills cells, cleared: its cells are reused by the second (they must restart from none)
                await t.kv.configureReadHorizon(0.3);
                await t.sequence.evaluateWithoutGeneratingNewTokens(randomTokens(30, 8));
                await t.sequence.clearHistory();

                const tokens = randomTokens(32, 9);
                const {weights, positions, heads} = await attentionWeights(reference, tokens);
                expect(heads).toBe(nHead);
                const cellOf = new Map(Array.from(positions, (position, j) => [position, j]));

                for (const threshold of [0.3, 0.6]) {
                    await t.sequence.clearHistory();
                    await t.kv.configureReadHorizon(threshold);
                    await t.sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(0, 24)); // every row of one ubatch
                    for (const token of tokens.slice(24))
                        // then one row per ubatch, merged with what is kept
                        await t.sequence.evaluateWithoutGeneratingNewTokens([token]);
                    const horizon = await t.kv.readHorizon(0);
                    const n = horizon.positions.length;
                    expect(n).toBe(32);
                    expect(horizon.heads).toBe(nHeadKv);
                    expect(horizon.last).toHaveLength(nLayer);

                    let compared = 0;
                    let readLater = 0;
                    for (let layer = 0; layer < nLayer; layer++) {
                        for (let kvHead = 0; kvHead < nHeadKv; kvHead++) {
                            for (let j = 0; j < n; j++) {
                                const position = horizon.positions[j]!;
                                const cell = cellOf.get(position)!;
                                // by hand: the last query t whose weight on the cell, in one head of the group, is >= threshold
                                let last = -1;
                                let ambiguous = false;
                                weights.forEach((step, query) => {
                                    const nCells = step[layer]!.length / nHead;
                                    for (let g = 0; g < group; g++) {
                                        const w = cell < nCells ? step[layer]![(kvHead * group + g) * nCells + cell]! : 0;
                                        if (Math.abs(w - threshold) < 1e-3) ambiguous = true;
                                        if (w >= threshold) last = Math.max(last, query);
                                    }
                                });
                                if (ambiguous) continue;
                                compared++;
                                if (last > position) readLater++;
                                expect(
                                    horizon.last[layer]![kvHead * n + j],
                                    `layer ${layer}, KV head ${kvHead}, position ${position}`
                                ).toBe(last);
                            }
                        }
                    }
                    expect(compared).toBeGreaterThan(0.9 * nLayer * nHeadKv * 32);
                    expect(readLater).toBeGreaterThan(0); // not only each token's read of itself
                }
            } finally {
                await reference.dispose();
                await t.dispose();
            }
        }
    );

    test("read horizons refuse a threshold outside (0, 1] and are off by default", async () => {
        const t = await createTestContext(model);
        try {
            await expect(t.kv.configureReadHorizon(0)).rejects.toThrow(/within \(0, 1\]/);
            await expect(t.kv.configureReadHorizon(1.5)).rejects.toThrow(/within \(0, 1\]/);
            await expect(t.kv.readHorizon(0)).rejects.toThrow(/off/);
            expect(await t.kv.stats()).toMatchObject({readHorizon: false, readHorizonBytes: 0});
        } finally {
            await t.dispose();
        }
    });
});
