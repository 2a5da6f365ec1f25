// TRIM-KV through the engine, on generated models with random retention gates beside them (test/fixtures/gguf/
// fixtureRetention.ts).
//
// A model without gates, or with a corrupt or foreign gate file, loads and answers under the other policies, and TRIM-KV
// is refused with the reason; with valid gates, TRIM-KV loads them, prunes by them within the budget and counts them.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type {LlamaContext, LlamaModel, Token} from "node-llama-cpp";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {AppError} from "../../main/AppError.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {logSigmoid} from "../../main/engine/policies/scoreMath.js";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import {writeFixtureWithGates} from "../fixtures/gguf/fixtureRetention.js";
import {generateRun} from "./generateRun.js";

const modelInfo = (p: string) => ({
    id: p,
    path: p,
    name: "fixture",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});

let dir: string;
beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-trimkv-"));
});
afterAll(async () => {
    await fs.rm(dir, {recursive: true, force: true});
});

const generate = generateRun;

describe("TRIM-KV for a model without valid gates (any patched build)", () => {
    const engine = new Engine({loadLlama: loadRuntime, threads: 1});
    afterAll(() => engine.dispose());

    it("refuses TRIM-KV with the reason when no gate file sits beside the model, and answers under the other policies", async () => {
        // "endless" never closes its thought: every answer runs to its token limit.
        const info = await getFixtureModelInfo("endless");
        const modelPath = path.join(dir, "bare.gguf");
        await fs.copyFile(info.path, modelPath);
        await engine.loadModel(modelPath, modelInfo(modelPath));
        const refused = await generate(engine, {policy: "trimkv"}, 256, 16).catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(AppError);
        expect(refused).toMatchObject({
            code: "POLICY_UNAVAILABLE",
            message:
                `TRIM-KV needs retention gates trained for this model: no retention ` +
                `gates beside this model (expected ${path.join(dir, "bare.retention.gguf")})`
        });
        expect((await generate(engine, {policy: "lethe"}, 256, 16)).result.stopReason).toBe("maxTokens");
    });

    it("loads a model whose gate file is corrupt or foreign, and refuses TRIM-KV on it saying why", async () => {
        const broken = await writeFixtureWithGates("endless", path.join(dir, "broken"), {omit: ["blk.2.retention.bias"]});
        await engine.loadModel(broken.modelPath, modelInfo(broken.modelPath));
        await expect(generate(engine, {policy: "trimkv"}, 256, 16)).rejects.toMatchObject({
            code: "POLICY_UNAVAILABLE",
            message: /corrupt: .*the tensor blk\.2\.retention\.bias is missing/
        });

        const garbage = await writeFixtureWithGates("endless", path.join(dir, "garbage"));
        await fs.writeFile(garbage.sidecarPath, Buffer.alloc(4096, 0x5a));
        await engine.loadModel(garbage.modelPath, modelInfo(garbage.modelPath));
        expect((await generate(engine, {policy: "streamingllm"}, 256, 16)).result.stopReason).toBe("maxTokens");
        await expect(generate(engine, {policy: "trimkv"}, 256, 16)).rejects.toMatchObject({
            code: "POLICY_UNAVAILABLE",
            message: /corrupt: /
        });

        // Gates of another model: tiny-llama's, copied beside a copy of endless.
        const other = await writeFixtureWithGates("tiny-llama", path.join(dir, "other"));
        const qwen = await getFixtureModelInfo("endless");
        const foreignModel = path.join(dir, "other", "qwen-with-llama-gates.gguf");
        await fs.copyFile(qwen.path, foreignModel);
        await fs.copyFile(other.sidecarPath, foreignModel.replace(/\.gguf$/, ".retention.gguf"));
        await engine.loadModel(foreignModel, modelInfo(foreignModel));
        await expect(generate(engine, {policy: "trimkv"}, 256, 16)).rejects.toMatchObject({
            code: "POLICY_UNAVAILABLE",
            message: /the gates were trained for another model file/
        });
    });

    it("refuses TRIM-KV on gates with a NaN weight, naming the tensor, and answers under the other policies", async () => {
        const nan = await writeFixtureWithGates("endless", path.join(dir, "nan"), {
            edit: (gates) => {
                gates[2]!.fc2[5] = NaN;
            }
        });
        await engine.loadModel(nan.modelPath, modelInfo(nan.modelPath));
        await expect(generate(engine, {policy: "trimkv"}, 256, 16)).rejects.toMatchObject({
            code: "POLICY_UNAVAILABLE",
            message: /cannot run: the tensor blk\.2\.retention\.fc2\.weight holds NaN at \[0, 5\]$/
        });
        expect((await generate(engine, {policy: "streamingllm"}, 256, 16)).result.stopReason).toBe("maxTokens");
    });
});

describe("TRIM-KV's gates in the engine", () => {
    let model: LlamaModel;
    let context: LlamaContext;
    let kv: NativeKv;
    let gates: Awaited<ReturnType<typeof writeFixtureWithGates>>;
    let zeroGates: Awaited<ReturnType<typeof writeFixtureWithGates>>;
    const contextSize = 256;

    beforeAll(async () => {
        gates = await writeFixtureWithGates("tiny-qwen2", path.join(dir, "native"), {seed: 3, hidden: 16});
        // fc1 and fc2 all zero: every cell's logit is its layer's per-head bias, whatever the hidden state.
        zeroGates = await writeFixtureWithGates("tiny-qwen2", path.join(dir, "native-zero"), {seed: 4, hidden: 16, weightScale: 0});
        expect(
            await findRetentionGates({path: gates.modelPath, architecture: "qwen2", layers: 4, embeddingLength: 64, headCountKv: 2})
        ).toMatchObject({available: true});
        const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
        model = await llama.loadModel({modelPath: gates.modelPath});
    });
    afterAll(async () => {
        await kv?.dispose();
        await context?.dispose();
        await model?.dispose();
    });

    async function freshContext(): Promise<NativeKv> {
        await kv?.dispose();
        await context?.dispose();
        context = await model.createContext({contextSize, threads: 1});
        kv = new NativeKv(context);
        return kv;
    }

    const tokens = (count: number, seed: number) =>
        Array.from({length: count}, (_, i) => (40 + ((i * 7919 + seed * 104_729) % 210)) as Token);

    it("loads the gates, saying their layers, KV heads and device bytes (weights and 4 bytes per cell, layer and KV head)", async () => {
        const native = await freshContext();
        const loaded = await native.configureRetention(gates.sidecarPath);
        expect(loaded).toMatchObject({path: gates.sidecarPath, layers: 4, heads: 2});
        const weights = await findRetentionGates({
            path: gates.modelPath,
            architecture: "qwen2",
            layers: 4,
            embeddingLength: 64,
            headCountKv: 2
        });
        const weightBytes = weights.available ? weights.info.weightBytes : 0;
        expect(loaded!.bytes).toBeGreaterThanOrEqual(weightBytes + 4 * 4 * 2 * contextSize);
        // The same file again keeps them; off frees them, and reading them then throws.
        expect(await native.configureRetention(gates.sidecarPath)).toBe(loaded);
        await native.configureRetention(null);
        expect(native.retentionGates).toBeNull();
        await expect(native.retention(0)).rejects.toThrow();
    });

    it("gives every cell written with zero weights its layer's bias per KV head, head-major per layer", async () => {
        const native = await freshContext();
        await native.configureRetention(zeroGates.sidecarPath);
        await context.getSequence().evaluateWithoutGeneratingNewTokens(tokens(40, 1));
        const read = await native.retention(0);
        const n = read.positions.length;
        expect(n).toBe(40);
        expect(read.heads).toBe(2);
        expect(read.logits).toHaveLength(4);
        for (let l = 0; l < 4; l++) {
            expect(read.logits[l]).toHaveLength(2 * n);
            for (let h = 0; h < 2; h++) {
                for (let j = 0; j < n; j++) expect(read.logits[l]![h * n + j]).toBeCloseTo(zeroGates.gates[l]!.bias[h]!, 4);
            }
        }
    });

    it("reads layer 0's gate from the token's own vector: the same token gives the same logits wherever it stands", async () => {
        const native = await freshContext();
        await native.configureRetention(gates.sidecarPath);
        const input = [...tokens(12, 2), ...tokens(12, 2)];
        await context.getSequence().evaluateWithoutGeneratingNewTokens(input);
        const read = await native.retention(0);
        const n = read.positions.length;
        const at = (position: number, h: number) => read.logits[0]![h * n + read.positions.indexOf(position)]!;
        for (let i = 0; i < 12; i++) {
            for (let h = 0; h < 2; h++) expect(at(i, h)).toBeCloseTo(at(i + 12, h), 3);
        }
        // Not all alike: the gates read the hidden state.
        expect(new Set(Array.from({length: 12}, (_, i) => at(i, 0).toFixed(3))).size).toBeGreaterThan(1);
    });

    it("marks cells written while the gates were off as never forgotten (a huge positive logit)", async () => {
        const native = await freshContext();
        const sequence = context.getSequence();
        await sequence.evaluateWithoutGeneratingNewTokens(tokens(10, 3));
        await native.configureRetention(gates.sidecarPath);
        await sequence.evaluateWithoutGeneratingNewTokens(tokens(10, 4));
        const read = await native.retention(0);
        const n = read.positions.length;
        for (let j = 0; j < n; j++) {
            const before = read.positions[j]! < 10;
            for (let l = 0; l < 4; l++) {
                const logit = read.logits[l]![j]!;
                expect(logit > 1e38).toBe(before);
                if (before) expect(logSigmoid(logit) === 0).toBe(true);
            }
        }
    });

    it("refuses a gate file the model cannot take, with the engine's reason", async () => {
        const native = await freshContext();
        const llamaGates = await writeFixtureWithGates("tiny-llama", path.join(dir, "native-llama"));
        // tiny-llama has 4 KV heads: its gates' fc2 is [H, 4] where this model has 2.
        await expect(native.configureRetention(llamaGates.sidecarPath)).rejects.toThrow(/.+/);
        expect(native.retentionGates).toBeNull();
    });

    it("runs TRIM-KV through the engine within the budget, pruning by the gates, its gates counted in the samples", async () => {
        const engine = new Engine({loadLlama: loadRuntime, threads: 1});
        try {
            // "endless" (tiny-qwen2's shape) never closes its thought: the answer runs to its token limit.
            const endless = await writeFixtureWithGates("endless", path.join(dir, "native-endless"), {seed: 5, hidden: 16});
            await engine.loadModel(endless.modelPath, modelInfo(endless.modelPath));
            for (const combine of ["aggregate", "quota", "union"] as const) {
                const cells = 160;
                const {result, samples, last} = await generate(engine, {policy: "trimkv", combine}, cells, 3 * cells);
                expect(result.stopReason).toBe("maxTokens");
                for (const sample of samples) expect(sample.cellsLive).toBeLessThanOrEqual(cells);
                expect(last.pruneRounds).toBeGreaterThan(0);
                expect(last.cellsLive + last.tokensEvicted).toBe(last.tokensSeen);
                expect(last.retentionBytes).toBeGreaterThan(4 * 4 * 2 * cells);
                const tokens = samples.findLast((sample) => sample.tokens != null)?.tokens;
                expect(tokens).toMatchObject({kind: "retention", layers: 4});
                expect(tokens!.scores.every((score) => score != null && score >= 0 && score <= 1)).toBe(true);
            }
            // Another policy turns the gates off again.
            const lethe = await generate(engine, {policy: "lethe"}, 160, 32);
            expect(lethe.last.retentionBytes).toBeUndefined();
        } finally {
            await engine.dispose();
        }
    });
});
