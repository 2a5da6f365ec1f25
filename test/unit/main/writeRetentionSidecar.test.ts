// The app's sidecar writer (calibration and the TypeScript converter write through it) installs only gates the app's
// load check accepts: a weight beyond F16's range in F16 matrices is refused in words before anything is written, and a
// file that the load check would refuse (finite gates whose logits overflow) never replaces the working sidecar beside
// the model. The format itself is checked byte for byte against sidecar.py in test/engine/writeRetentionSidecar.test.ts.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {findRetentionGates, retentionSidecarPath, type RetentionModel} from "../../../main/engine/retention/findRetentionGates.js";
import type {RetentionGateLayer} from "../../../main/engine/retention/gateLayer.js";
import {writeRetentionSidecar} from "../../../main/engine/retention/writeRetentionSidecar.js";
import {mulberry32} from "../../fixtures/gguf/random.js";
import {GgmlType, gguf, writeGguf} from "../../fixtures/gguf/writeGguf.js";

const layers = 2;
const width = 16;
const kvHeads = 2;
const hidden = 32;

let dir: string;
let model: RetentionModel;
let sidecar: string;

beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-sidecar-install-"));
    const modelPath = path.join(dir, "model.gguf");
    await writeGguf(modelPath, {
        metadata: [
            ["general.architecture", gguf.string("llama")],
            ["general.name", gguf.string("stand-in")],
            ["llama.block_count", gguf.u32(layers)],
            ["llama.embedding_length", gguf.u32(width)],
            ["llama.attention.head_count", gguf.u32(kvHeads)],
            ["llama.attention.head_count_kv", gguf.u32(kvHeads)]
        ],
        tensors: [{name: "token_embd.weight", dims: [width, 8], type: GgmlType.F32, data: new Float32Array(width * 8).fill(0.5)}]
    });
    model = {path: modelPath, architecture: "llama", layers, embeddingLength: width, headCountKv: kvHeads};
    sidecar = retentionSidecarPath(modelPath);
});

afterAll(async () => {
    await fs.rm(dir, {recursive: true, force: true});
});

/** Small random gates for the stand-in model (biases high, as TRIM-KV initialises them). */
function randomGates(seed: number): RetentionGateLayer[] {
    const random = mulberry32(seed);
    const draw = (count: number, scale: number, offset = 0) =>
        Float32Array.from({length: count}, () => offset + (random.uniform() - 0.5) * scale);
    return Array.from({length: layers}, () => ({
        fc1: draw(hidden * width, 0.5),
        fc1Bias: draw(hidden, 0.5),
        fc2: draw(kvHeads * hidden, 0.5),
        bias: draw(kvHeads, 2, 4)
    }));
}

const content = (gates: RetentionGateLayer[], matrixType: "f32" | "f16", source: string) => ({
    modelPath: model.path,
    layers: gates,
    budget: 0,
    reduction: "shared" as const,
    source,
    matrixType
});

/** Installs working gates beside the model and returns the file's bytes. */
async function installWorking(): Promise<Buffer> {
    await writeRetentionSidecar(sidecar, content(randomGates(1), "f32", "working"));
    expect(await findRetentionGates(model)).toMatchObject({available: true, info: {source: "working"}});
    return fs.readFile(sidecar);
}

/** The working sidecar is still there, byte for byte, and accepted; no temporary file is left beside it. */
async function expectWorkingKept(before: Buffer): Promise<void> {
    expect((await fs.readFile(sidecar)).equals(before)).toBe(true);
    expect(await findRetentionGates(model)).toMatchObject({available: true, info: {source: "working"}});
    expect((await fs.readdir(dir)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
}

describe("writeRetentionSidecar installs only gates the app loads", () => {
    it("refuses a weight beyond F16's range in F16 matrices, naming it, and keeps the working sidecar", async () => {
        const before = await installWorking();
        for (const [part, value] of [
            ["fc1", 70_000],
            ["fc2", -1e6]
        ] as const) {
            const gates = randomGates(2);
            gates[1]![part][5] = value;
            const name = part === "fc1" ? "fc1.weight" : "fc2.weight";
            await expect(writeRetentionSidecar(sidecar, content(gates, "f16", "too large"))).rejects.toThrow(
                `layer 1: retention.${name} holds ${value} at 5, beyond F16's largest value (65504): its matrices must be written as F32`
            );
            await expectWorkingKept(before);
        }
        // F16's largest value itself is in range, and F32 holds 70000: both are written and accepted
        const edge = randomGates(3);
        edge[0]!.fc1[0] = 65504;
        edge[0]!.fc2[0] = -65504;
        await writeRetentionSidecar(sidecar, content(edge, "f16", "edge"));
        expect(await findRetentionGates(model)).toMatchObject({available: true, info: {source: "edge"}});
        const large = randomGates(4);
        large[1]!.fc1[5] = 70_000;
        await writeRetentionSidecar(sidecar, content(large, "f32", "large in F32"));
        expect(await findRetentionGates(model)).toMatchObject({available: true, info: {source: "large in F32"}});
    });

    it("never replaces a working sidecar with one the load check refuses: finite F32 gates whose logits overflow", async () => {
        const before = await installWorking();
        // 32 hidden units in pairs reading one input each, +1e18 and -1e18, and fc2 all 1e18: every weight is finite in
        // F32, but the logit leaves F32's range on the load check's probe of RMS 100 (retentionGates.test.ts).
        const overflow = randomGates(5).map((gate) => {
            gate.fc1.fill(0);
            for (let k = 0; k < width; k++) {
                gate.fc1[2 * k * width + k] = 1e18;
                gate.fc1[(2 * k + 1) * width + k] = -1e18;
            }
            gate.fc1Bias.fill(0);
            gate.fc2.fill(1e18);
            return gate;
        });
        await expect(writeRetentionSidecar(sidecar, content(overflow, "f32", "overflow"))).rejects.toThrow(
            "the gates were not written, as loading would refuse them: the gates in model.retention.gguf cannot run: " +
                "layer 0's gate gives a non-finite logit for KV head 0 on a seeded input of RMS 100"
        );
        await expectWorkingKept(before);
        // written elsewhere, with no sidecar there before, nothing is left either
        const elsewhere = path.join(dir, "elsewhere", "gates.gguf");
        await expect(writeRetentionSidecar(elsewhere, content(overflow, "f32", "overflow"))).rejects.toThrow(/cannot run/);
        expect(await fs.readdir(path.dirname(elsewhere))).toEqual([]);
    });
});
