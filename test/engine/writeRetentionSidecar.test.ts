// The app's own sidecar writer (calibration and the TypeScript converter write through it) against the format's
// reference, scripts/retention/sidecar.py: the same gates give the same bytes, F32 and F16; the written file is one
// findRetentionGates accepts; gates that do not fit the model, or hold a NaN, are refused and an existing sidecar is
// left as it was. Needs Python with torch (Debian's python3-torch).
import {execFileSync} from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import type {RetentionGateLayer} from "../../main/engine/retention/gateLayer.js";
import {writeRetentionSidecar} from "../../main/engine/retention/writeRetentionSidecar.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import type {GeneratedModelInfo} from "../fixtures/gguf/generateModel.js";
import {torchPython} from "../fixtures/torchPython.js";

const scripts = path.resolve(import.meta.dirname, "../../scripts/retention");

// Random gates for the model, written by sidecar.py, and their raw float32 values (fc1, fc1 bias, fc2, bias per layer).
const pythonWriter = `
import sys, numpy as np, torch
sys.path.insert(0, sys.argv[1])
from sidecar import RetentionGates, write_sidecar
from ggufModel import model_summary
model, out, raw, matrix = sys.argv[2:6]
s = model_summary(model)
gates = RetentionGates(int(s["block_count"]), int(s["embedding_length"]), 24, int(s["head_count_kv"]))
gates.init_(torch.Generator().manual_seed(5), 6.0, std=0.3)
with torch.no_grad():
    for g in gates.layers:
        g.fc1.bias.normal_(0.0, 0.5)
write_sidecar(out, gates, model, budget=512, reduction="per-head", source="test gates", matrix_type=matrix)
with open(raw, "wb") as f:
    for g in gates.layers:
        for t in (g.fc1.weight, g.fc1.bias, g.fc2.weight, g.bias):
            f.write(t.detach().numpy().astype(np.float32).tobytes())
`;

describe("writeRetentionSidecar", () => {
    let dir: string;
    let python: string;
    let modelPath: string;
    let info: GeneratedModelInfo;

    beforeAll(async () => {
        python = torchPython();
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-sidecar-writer-"));
        info = await getFixtureModelInfo("tiny-qwen3");
        modelPath = path.join(dir, "model.gguf");
        await fs.copyFile(info.path, modelPath);
    });

    afterAll(async () => {
        await fs.rm(dir, {recursive: true, force: true});
    });

    async function referenceGates(matrix: "f32" | "f16"): Promise<{reference: Buffer; layers: RetentionGateLayer[]}> {
        const out = path.join(dir, `reference-${matrix}.gguf`);
        const raw = path.join(dir, `reference-${matrix}.bin`);
        execFileSync(python, ["-c", pythonWriter, scripts, modelPath, out, raw, matrix], {timeout: 120_000});
        const values = new Float32Array(new Uint8Array(await fs.readFile(raw)).buffer);
        const d = info.spec.nEmbd;
        const kv = info.spec.nHeadKv;
        const hidden = 24;
        const layers: RetentionGateLayer[] = [];
        let at = 0;
        const take = (count: number) => values.slice(at, (at += count));
        for (let i = 0; i < info.spec.nLayer; i++)
            layers.push({fc1: take(hidden * d), fc1Bias: take(hidden), fc2: take(kv * hidden), bias: take(kv)});
        expect(at).toBe(values.length);
        return {reference: await fs.readFile(out), layers};
    }

    test.each(["f32", "f16"] as const)("writes sidecar.py's bytes exactly (%s matrices), and the file is accepted", async (matrix) => {
        const {reference, layers} = await referenceGates(matrix);
        const out = path.join(dir, "model.retention.gguf");
        await writeRetentionSidecar(out, {modelPath, layers, budget: 512, reduction: "per-head", source: "test gates", matrixType: matrix});
        const written = await fs.readFile(out);
        expect(written.length).toBe(reference.length);
        expect(written.equals(reference)).toBe(true);

        const found = await findRetentionGates({
            path: modelPath,
            architecture: info.spec.arch,
            layers: info.spec.nLayer,
            embeddingLength: info.spec.nEmbd,
            headCountKv: info.spec.nHeadKv
        });
        expect(found).toMatchObject({available: true, info: {budget: 512, reduction: "per-head", hidden: 24, source: "test gates"}});
    });

    test("refuses gates that do not fit the model or hold a NaN, leaving the existing sidecar as it was", async () => {
        const {layers} = await referenceGates("f32");
        const out = path.join(dir, "kept.retention.gguf");
        await writeRetentionSidecar(out, {modelPath, layers, budget: 0, reduction: "shared", source: "first"});
        const before = await fs.readFile(out);

        await expect(
            writeRetentionSidecar(out, {modelPath, layers: layers.slice(1), budget: 0, reduction: "shared", source: "short"})
        ).rejects.toThrow(`${info.spec.nLayer - 1} layers of gates; the model has ${info.spec.nLayer} layers`);
        const poisoned = layers.map((gate) => ({...gate, fc2: gate.fc2.slice()}));
        poisoned[1]!.fc2[3] = Number.NaN;
        await expect(
            writeRetentionSidecar(out, {modelPath, layers: poisoned, budget: 0, reduction: "shared", source: "nan"})
        ).rejects.toThrow("layer 1: retention.fc2.weight holds a non-finite value (NaN) at 3");
        await expect(writeRetentionSidecar(out, {modelPath, layers, budget: -1, reduction: "shared", source: "budget"})).rejects.toThrow(
            "budget"
        );

        expect((await fs.readFile(out)).equals(before)).toBe(true);
        expect((await fs.readdir(dir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
    });
});
