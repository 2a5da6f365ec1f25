// Learned retention gates (TRIM-KV, native/patches 0007-0008): the engine's gate logit of each cell equals the gate
// applied to the layer's attention input (computed here for layer 0, whose input is the token's embedding), on every
// cell a token is written to (prefill, decode, reused cells) and with flash attention on or off; cells written before
// the gates were loaded stay never forgotten; a refused file leaves the context working; values write back exactly.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {readGgufFileInfo, type LlamaModel} from "node-llama-cpp";
import {getFixtureModelInfo, type FixtureName} from "../fixtures/gguf/fixtures.js";
import type {RetentionGateLayer} from "../../main/engine/retention/gateLayer.js";
import {gateLogits, writeRetentionSidecar, type SidecarSpec} from "../fixtures/gguf/retentionSidecar.js";
import {float16BitsToFloat32, gguf} from "../fixtures/gguf/writeGguf.js";
import type {GeneratedModelInfo} from "../fixtures/gguf/generateModel.js";
import {KvController} from "../../main/engine/pruning/KvController.js";
import {gateSequenceDecodes} from "../../main/engine/native/ponderAddon.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {createTestContext, evaluateForLogits, getTestLlama, maxAbsDifference, randomTokens} from "./nativeTestUtils.js";

/** Cells never written by the gates hold 0x7f7f7f7f. */
const NEVER_FORGOTTEN = 3.3e38;

/** Reads whole F32 or F16 tensors of a GGUF file as float32. */
async function readTensors(filePath: string, names: string[]): Promise<Map<string, Float32Array>> {
    const info = await readGgufFileInfo(filePath, {readTensorInfo: true, logWarnings: false, sourceType: "filesystem"});
    const handle = await fs.open(filePath, "r");
    try {
        const out = new Map<string, Float32Array>();
        for (const name of names) {
            const tensor = info.tensorInfo?.find((candidate) => candidate.name === name);
            if (tensor == null) throw new Error(`no tensor ${name} in ${filePath}`);
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

/** Layer 0's attention input for a token: RMSNorm of its embedding times the norm's weight. */
function layer0Input(embedding: Float32Array, norm: Float32Array, width: number, token: number, eps: number): Float64Array {
    const row = embedding.subarray(token * width, (token + 1) * width);
    let meanSquare = 0;
    for (const value of row) meanSquare += value * value;
    const scale = 1 / Math.sqrt(meanSquare / width + eps);
    return Float64Array.from(row, (value, i) => value * scale * norm[i]!);
}

const shapes: FixtureName[] = ["tiny-qwen2", "tiny-llama"];

describe.each(shapes)("retention gates, %s", (fixture) => {
    let model: LlamaModel;
    let info: GeneratedModelInfo;
    let dir: string;
    let sidecar: string;
    let gates: RetentionGateLayer[];
    let embedding: Float32Array;
    let norm: Float32Array;
    let spec: SidecarSpec;

    /** The engine's layer-0 logits of cell j must be the gate of the token at that cell. */
    function expectLayer0(logits: Float32Array, heads: number, tokenAt: (j: number) => number, n: number, firstHead = 0) {
        for (let j = 0; j < n; j++) {
            const expected = gateLogits(gates[0]!, layer0Input(embedding, norm, info.spec.nEmbd, tokenAt(j), info.spec.rmsEps));
            for (let h = 0; h < heads; h++) {
                const want = expected[firstHead + h]!;
                expect(Math.abs(logits[h * n + j]! - want)).toBeLessThan(2e-3 * Math.max(1, Math.abs(want)));
            }
        }
    }

    beforeAll(async () => {
        info = await getFixtureModelInfo(fixture);
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-retention-"));
        sidecar = path.join(dir, "gates.retention.gguf");
        spec = {
            modelPath: info.path,
            architecture: info.spec.arch,
            layers: info.spec.nLayer,
            width: info.spec.nEmbd,
            kvHeads: info.spec.nHeadKv,
            seed: 11
        };
        gates = await writeRetentionSidecar(sidecar, spec);
        const tensors = await readTensors(info.path, ["token_embd.weight", "blk.0.attn_norm.weight"]);
        embedding = tensors.get("token_embd.weight")!;
        norm = tensors.get("blk.0.attn_norm.weight")!;
        const llama = await getTestLlama();
        model = await llama.loadModel({modelPath: info.path});
    });

    afterAll(async () => {
        await model?.dispose();
        await fs.rm(dir, {recursive: true, force: true});
    });

    test.each([false, true])(
        "each written cell holds the gate of its token's attention input (flash attention %s)",
        async (flashAttention) => {
            const t = await createTestContext(model, {flashAttention});
            try {
                const loaded = await t.kv.configureRetention(sidecar);
                expect(loaded).toMatchObject({layers: info.spec.nLayer, heads: info.spec.nHeadKv});
                expect(loaded!.bytes).toBeGreaterThan(0);

                const tokens = randomTokens(20, 3);
                await evaluateForLogits(t.sequence, tokens); // prefill, one ubatch
                for (const token of randomTokens(4, 4)) {
                    // decode, one token per ubatch
                    tokens.push(token);
                    await evaluateForLogits(t.sequence, [token]);
                }

                const snapshot = await t.kv.retention(0);
                const n = snapshot.positions.length;
                expect(n).toBe(24);
                expect(snapshot.heads).toBe(info.spec.nHeadKv);
                expect(snapshot.logits).toHaveLength(info.spec.nLayer);
                expectLayer0(snapshot.logits[0]!, snapshot.heads, (j) => tokens[snapshot.positions[j]!]!, n);
                for (const layer of snapshot.logits) {
                    expect(layer).toHaveLength(snapshot.heads * n);
                    for (const value of layer) expect(Number.isFinite(value) && Math.abs(value) < 1e4).toBe(true);
                }
                // deeper layers see other inputs: their logits differ from layer 0's gate applied to the embedding
                expect(maxAbsDifference(snapshot.logits[0]!, snapshot.logits[1]!)).toBeGreaterThan(1e-3);
            } finally {
                await t.dispose();
            }
        }
    );

    test("the gates change no logit of the model", async () => {
        const plain = await createTestContext(model);
        const gated = await createTestContext(model);
        try {
            await gated.kv.configureRetention(sidecar);
            const tokens = randomTokens(16, 5);
            const a = await evaluateForLogits(plain.sequence, tokens);
            const b = await evaluateForLogits(gated.sequence, tokens);
            expect(maxAbsDifference(a, b)).toBe(0);
        } finally {
            await plain.dispose();
            await gated.dispose();
        }
    });

    test("cells written before the gates were loaded are never forgotten; a reused cell gets its new token's gate", async () => {
        const t = await createTestContext(model, {contextSize: 256});
        try {
            const before = randomTokens(8, 6);
            await evaluateForLogits(t.sequence, before);
            await t.kv.configureRetention(sidecar);
            const after = randomTokens(4, 7);
            await evaluateForLogits(t.sequence, after);

            let snapshot = await t.kv.retention(0);
            const tokenAt = (position: number) => (position < 8 ? before[position]! : after[position - 8]!);
            let n = snapshot.positions.length;
            for (let j = 0; j < n; j++) {
                if (snapshot.positions[j]! < 8) {
                    for (const layer of snapshot.logits) expect(layer[j]).toBeGreaterThan(NEVER_FORGOTTEN);
                }
            }

            // free cells in the middle, then write more tokens: llama.cpp reuses the freed cells
            await t.kv.evict(0, [2, 3, 4, 5]);
            const more = randomTokens(4, 8);
            await evaluateForLogits(t.sequence, more);
            snapshot = await t.kv.retention(0);
            n = snapshot.positions.length;
            expect(n).toBe(12);
            const allTokens = (position: number) => (position < 12 ? tokenAt(position) : more[position - 12]!);
            const fresh = Array.from(snapshot.positions)
                .map((position, j) => ({position, j}))
                .filter(({position}) => position >= 8);
            const layer0 = snapshot.logits[0]!;
            for (const {position, j} of fresh) {
                const expected = gateLogits(
                    gates[0]!,
                    layer0Input(embedding, norm, info.spec.nEmbd, allTokens(position), info.spec.rmsEps)
                );
                for (let h = 0; h < snapshot.heads; h++)
                    expect(Math.abs(layer0[h * n + j]! - expected[h]!)).toBeLessThan(2e-3 * Math.max(1, Math.abs(expected[h]!)));
            }
        } finally {
            await t.dispose();
        }
    });

    test("gate logits and attention scores write back at their positions", async () => {
        const t = await createTestContext(model);
        try {
            await t.kv.configureRetention(sidecar);
            await t.kv.configureScoring({enabled: true, gamma: 0.9});
            await evaluateForLogits(t.sequence, randomTokens(12, 9));
            const snapshot = await t.kv.retention(0);
            const n = snapshot.positions.length;
            const written = snapshot.logits.map((_, layer) =>
                Float32Array.from({length: snapshot.heads * n}, (__, i) => layer * 100 + i * 0.5)
            );
            expect(await t.kv.restoreRetention(0, snapshot.positions, snapshot.heads, written)).toBe(n);
            const back = await t.kv.retention(0);
            for (let layer = 0; layer < written.length; layer++)
                expect(Array.from(back.logits[layer]!)).toEqual(Array.from(written[layer]!));

            const scores = await t.kv.scores(0);
            const layers = scores.layers.map(
                (layer, index) =>
                    [
                        Float32Array.from(layer.accumulated, (_, i) => index + i * 0.25),
                        Float32Array.from(layer.last, (_, i) => index - i * 0.125)
                    ] as [Float32Array, Float32Array]
            );
            expect(await t.kv.restoreScores(0, scores.positions, scores.heads, layers)).toBe(n);
            const scoresBack = await t.kv.scores(0);
            scoresBack.layers.forEach((layer, index) => {
                expect(Array.from(layer.accumulated)).toEqual(Array.from(layers[index]![0]));
                expect(Array.from(layer.last)).toEqual(Array.from(layers[index]![1]));
            });
        } finally {
            await t.dispose();
        }
    });

    test.each([
        ["another layer count", {overrides: {"ponder.retention.model.block_count": gguf.u32(99)}}, /99 layers/],
        ["another width", {overrides: {"ponder.retention.model.embedding_length": gguf.u32(7)}}, /width 7/],
        ["a missing tensor", {omit: ["blk.1.retention.fc2.weight"]}, /missing tensor blk\.1\.retention\.fc2\.weight/],
        ["another gate", {overrides: {"ponder.retention.gate": gguf.string("trimkv-rg3")}}, /unsupported gate type/],
        ["the wrong number of KV heads", {kvHeads: 3}, /shape/]
    ] as [string, Partial<SidecarSpec>, RegExp][])(
        "a file with %s is refused with the reason, and the context goes on",
        async (_, change, reason) => {
            const bad = path.join(dir, `bad-${Math.random().toString(36).slice(2)}.gguf`);
            await writeRetentionSidecar(bad, {...spec, ...change});
            const t = await createTestContext(model);
            try {
                await expect(t.kv.configureRetention(bad)).rejects.toThrow(reason);
                await expect(t.kv.retention(0)).rejects.toThrow(/No retention gates are loaded/);
                await evaluateForLogits(t.sequence, randomTokens(8, 10));
                expect((await t.kv.stats()).cellsUsed).toBe(8);
            } finally {
                await t.dispose();
            }
        }
    );

    test("per-head cells: after TRIM-KV rounds that move heads, every head's layer-0 gate in each cell is that of the token the table names", async () => {
        const t = await createTestContext(model);
        try {
            const cells = 48;
            const controller = new KvController({
                kv: t.kv,
                sequenceId: 0,
                compression: {...defaultCompressionSettings, policy: "trimkv", combine: "heads", pruneEvery: 8},
                cells,
                tokensSeen: () => t.sequence.nextTokenIndex,
                now: () => performance.now(),
                retentionGates: sidecar,
                retentionReduction: "per-head"
            });
            await controller.start();
            gateSequenceDecodes(t.sequence, (count, first) => controller.beforeDecode(count, first));
            const tokens = randomTokens(40, 13);
            await evaluateForLogits(t.sequence, tokens);
            controller.beginAnswer();
            for (const token of randomTokens(80, 14)) {
                tokens.push(token);
                await evaluateForLogits(t.sequence, [token]);
                controller.onTokens(1);
                expect((await t.kv.stats()).cellsUsed).toBeLessThanOrEqual(cells);
            }

            const table = t.kv.existingHeadSlots(0)!;
            expect(table.movedSlots).toBeGreaterThan(0);
            const snapshot = await t.kv.retention(0);
            const n = snapshot.positions.length;
            for (let h = 0; h < snapshot.heads; h++) {
                const held = table.tokensOf(snapshot.positions, 0, h);
                expectLayer0(snapshot.logits[0]!.subarray(h * n, (h + 1) * n), 1, (j) => tokens[held[j]!]!, n, h);
            }
            // the heads keep different tokens: cells of their own
            const heldBy = (layer: number, head: number) =>
                [...table.tokensOf(snapshot.positions, layer, head)].sort((a, b) => a - b).join();
            const sets = new Set<string>();
            for (let l = 0; l < info.spec.nLayer; l++) for (let h = 0; h < info.spec.nHeadKv; h++) sets.add(heldBy(l, h));
            expect(sets.size).toBeGreaterThan(1);
        } finally {
            await t.dispose();
        }
    });

    test("a truncated or garbage file is refused, not read past its end", async () => {
        const full = await fs.readFile(sidecar);
        const t = await createTestContext(model);
        try {
            // the last cut is inside the last tensor: the writer pads the file to 32 bytes after it
            for (const cut of [16, Math.floor(full.length / 2), full.length - 33]) {
                const truncated = path.join(dir, `cut-${cut}.gguf`);
                await fs.writeFile(truncated, full.subarray(0, cut));
                await expect(t.kv.configureRetention(truncated)).rejects.toThrow(/could not be loaded/);
            }
            const garbage = path.join(dir, "garbage.gguf");
            await fs.writeFile(garbage, Buffer.from(Array.from({length: 4096}, (_, i) => (i * 2654435761) & 0xff)));
            await expect(t.kv.configureRetention(garbage)).rejects.toThrow(/not a readable GGUF/);
            await expect(t.kv.configureRetention(path.join(dir, "missing.gguf"))).rejects.toThrow(/could not be loaded/);
            await evaluateForLogits(t.sequence, randomTokens(8, 12));
        } finally {
            await t.dispose();
        }
    });
});

describe.each(shapes)("value norms (LAVa), %s", (fixture) => {
    let model: LlamaModel;
    let info: GeneratedModelInfo;
    let tensors: Map<string, Float32Array>;

    beforeAll(async () => {
        info = await getFixtureModelInfo(fixture);
        const names = ["token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_v.weight"];
        const bias =
            (await readGgufFileInfo(info.path, {readTensorInfo: true, logWarnings: false, sourceType: "filesystem"})).tensorInfo?.some(
                (tensor) => tensor.name === "blk.0.attn_v.bias"
            ) === true;
        tensors = await readTensors(info.path, bias ? [...names, "blk.0.attn_v.bias"] : names);
        model = await (await getTestLlama()).loadModel({modelPath: info.path});
    });

    afterAll(async () => {
        await model?.dispose();
    });

    /** ||V_h||_1 of layer 0 for a token: the value projection of its attention input, per KV head. */
    function layer0Norms(token: number): number[] {
        const {nEmbd, nHeadKv, rmsEps} = info.spec;
        const x = layer0Input(tensors.get("token_embd.weight")!, tensors.get("blk.0.attn_norm.weight")!, nEmbd, token, rmsEps);
        const weight = tensors.get("blk.0.attn_v.weight")!;
        const bias = tensors.get("blk.0.attn_v.bias");
        const width = weight.length / nEmbd;
        const headDim = width / nHeadKv;
        const norms = new Array<number>(nHeadKv).fill(0);
        for (let o = 0; o < width; o++) {
            let value = bias?.[o] ?? 0;
            for (let k = 0; k < nEmbd; k++) value += weight[o * nEmbd + k]! * x[k]!;
            norms[Math.floor(o / headDim)]! += Math.abs(value);
        }
        return norms;
    }

    test.each([false, true])(
        "each written cell holds its value vector's L1 norm per KV head; flash attention %s",
        async (flashAttention) => {
            const t = await createTestContext(model, {flashAttention});
            try {
                const before = randomTokens(4, 21);
                await evaluateForLogits(t.sequence, before);
                await t.kv.configureValueNorms(true);
                const tokens = randomTokens(12, 22);
                await evaluateForLogits(t.sequence, tokens.slice(0, 8));
                for (const token of tokens.slice(8)) await evaluateForLogits(t.sequence, [token]);

                const snapshot = await t.kv.valueNorms(0);
                const n = snapshot.positions.length;
                expect(n).toBe(16);
                expect(snapshot.heads).toBe(info.spec.nHeadKv);
                const layer0 = snapshot.norms[0]!;
                for (let j = 0; j < n; j++) {
                    const position = snapshot.positions[j]!;
                    const expected = position < 4 ? new Array<number>(snapshot.heads).fill(0) : layer0Norms(tokens[position - 4]!);
                    for (let h = 0; h < snapshot.heads; h++)
                        expect(Math.abs(layer0[h * n + j]! - expected[h]!)).toBeLessThan(2e-3 * Math.max(1, expected[h]!));
                }
                for (const layer of snapshot.norms.slice(1)) expect(Math.max(...layer)).toBeGreaterThan(0);

                const written = snapshot.norms.map((_, layer) =>
                    Float32Array.from({length: snapshot.heads * n}, (__, i) => layer + i * 0.5)
                );
                expect(await t.kv.restoreValueNorms(0, snapshot.positions, snapshot.heads, written)).toBe(n);
                expect((await t.kv.valueNorms(0)).norms.map((layer) => Array.from(layer))).toEqual(
                    written.map((layer) => Array.from(layer))
                );

                await t.kv.configureValueNorms(false);
                await expect(t.kv.valueNorms(0)).rejects.toThrow(/Value norms are off/);
            } finally {
                await t.dispose();
            }
        }
    );
});
