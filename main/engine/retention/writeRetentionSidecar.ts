import {randomBytes} from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import {checkGgufHeader, type GgufScalar} from "../gguf/checkGgufHeader.js";
import {encodeGguf, GgmlType, gguf, type GgufTensor, type GgufValue} from "../gguf/writeGguf.js";
import {checkRetentionFile, retentionSidecarVersion} from "./findRetentionGates.js";
import type {RetentionGateLayer} from "./gateLayer.js";
import {modelFingerprint} from "./modelFingerprint.js";
import type {RetentionInfo} from "./types.js";

export type RetentionSidecarContent = {
    /** The GGUF model the gates belong to: its shape is checked and its fingerprint recorded. */
    modelPath: string;
    /** One gate per layer of the model. */
    layers: readonly RetentionGateLayer[];
    /** The cell budget M the gates were trained at; 0 when unknown. */
    budget: number;
    reduction: RetentionInfo["reduction"];
    /** Where the gates came from, in words. */
    source: string;
    /** Storage of the two weight matrices. Defaults to `"f16"` for models wider than 1,024, else `"f32"`. */
    matrixType?: "f32" | "f16";
    /** Extra metadata written after the format's keys, e.g. `ponder.retention.calibration.*` provenance. */
    extra?: ReadonlyArray<readonly [key: string, value: GgufValue]>;
};

/** The model shape the sidecar records, read from the model's own GGUF metadata. */
type ModelSummary = {architecture: string; name: string; layers: number; width: number; kvHeads: number};

/** The largest finite F16 value: a weight past it would be infinite in an F16 matrix. */
const f16Max = 65504;

/**
 * Writes a model's retention sidecar (the format of scripts/retention/sidecar.py, byte for byte: same keys in the same
 * order, no `general.alignment`, 32-byte alignment) atomically: to a temporary file in the target's folder, checked
 * there as loading checks it (`checkRetentionFile`), then renamed over the target, so a failure (a full disk, a kill,
 * gates the app would refuse) leaves any earlier sidecar as it was. Throws in words when the gates do not fit the
 * model's shape, hold a non-finite value or a weight beyond F16's range in F16 matrices, or fail the load's check.
 */
export async function writeRetentionSidecar(outPath: string, content: RetentionSidecarContent): Promise<void> {
    const model = await readModelSummary(content.modelPath);
    const hidden = content.layers[0]?.fc1Bias.length ?? 0;
    const f16 = (content.matrixType ?? (model.width > 1024 ? "f16" : "f32")) === "f16";
    checkGates(content.layers, model, hidden, f16);
    if (!Number.isInteger(content.budget) || content.budget < 0 || content.budget > 0xffffffff)
        throw new Error(`the gates' budget must be a whole number of cells, not ${content.budget}`);
    const matrixType = f16 ? GgmlType.F16 : GgmlType.F32;
    const key = "ponder.retention.";
    const metadata: Array<readonly [string, GgufValue]> = [
        ["general.architecture", gguf.string("ponder-retention")],
        ["general.name", gguf.string(`${model.name} retention gates`)],
        [key + "version", gguf.u32(retentionSidecarVersion)],
        [key + "gate", gguf.string("trimkv-rg")],
        [key + "activation", gguf.string("silu")],
        [key + "model.architecture", gguf.string(model.architecture)],
        [key + "model.fingerprint", gguf.string(await modelFingerprint(content.modelPath))],
        [key + "model.block_count", gguf.u32(model.layers)],
        [key + "model.embedding_length", gguf.u32(model.width)],
        [key + "model.head_count_kv", gguf.u32(model.kvHeads)],
        [key + "hidden", gguf.u32(hidden)],
        [key + "budget", gguf.u32(content.budget)],
        [key + "reduction", gguf.string(content.reduction)],
        [key + "source", gguf.string(content.source)],
        ...(content.extra ?? [])
    ];
    const tensors: GgufTensor[] = content.layers.flatMap((gate, i) => [
        {name: `blk.${i}.retention.fc1.weight`, dims: [model.width, hidden], type: matrixType, data: gate.fc1},
        {name: `blk.${i}.retention.fc1.bias`, dims: [hidden], type: GgmlType.F32, data: gate.fc1Bias},
        {name: `blk.${i}.retention.fc2.weight`, dims: [hidden, model.kvHeads], type: matrixType, data: gate.fc2},
        {name: `blk.${i}.retention.bias`, dims: [model.kvHeads], type: GgmlType.F32, data: gate.bias}
    ]);
    const bytes = encodeGguf({metadata, tensors, alignmentKey: false});

    const folder = path.dirname(path.resolve(outPath));
    await fs.mkdir(folder, {recursive: true});
    const temp = path.join(folder, `.retention-${randomBytes(6).toString("hex")}.gguf.tmp`);
    try {
        await fs.writeFile(temp, bytes, {flag: "wx"});
        const shape = {
            path: content.modelPath,
            architecture: model.architecture,
            layers: model.layers,
            embeddingLength: model.width,
            headCountKv: model.kvHeads
        };
        const check = await checkRetentionFile(temp, shape, outPath);
        if (!check.available) throw new Error(`the gates were not written, as loading would refuse them: ${check.reason}`);
        await fs.rename(temp, outPath);
    } catch (err) {
        await fs.rm(temp, {force: true});
        throw err;
    }
}

async function readModelSummary(modelPath: string): Promise<ModelSummary> {
    const header = await checkGgufHeader(modelPath, {collect: true});
    const values = header.values ?? new Map<string, GgufScalar>();
    const architecture = values.get("general.architecture");
    if (typeof architecture !== "string") throw new Error(`${modelPath} has no general.architecture: not a GGUF model`);
    const count = (name: string, fallback?: string): number => {
        const found = values.get(`${architecture}.${name}`) ?? (fallback == null ? undefined : values.get(`${architecture}.${fallback}`));
        if (typeof found !== "number" || !Number.isInteger(found) || found <= 0)
            throw new Error(`${modelPath} does not declare ${architecture}.${name}`);
        return found;
    };
    const name = values.get("general.name");
    return {
        architecture,
        name: typeof name === "string" ? name : path.basename(modelPath),
        layers: count("block_count"),
        width: count("embedding_length"),
        kvHeads: count("attention.head_count_kv", "attention.head_count")
    };
}

function checkGates(layers: readonly RetentionGateLayer[], model: ModelSummary, hidden: number, f16: boolean): void {
    if (layers.length !== model.layers) throw new Error(`${layers.length} layers of gates; the model has ${model.layers} layers`);
    if (hidden <= 0) throw new Error("the gates' hidden width is 0");
    layers.forEach((gate, i) => {
        const expected = [
            ["fc1.weight", gate.fc1, hidden * model.width, f16],
            ["fc1.bias", gate.fc1Bias, hidden, false],
            ["fc2.weight", gate.fc2, model.kvHeads * hidden, f16],
            ["bias", gate.bias, model.kvHeads, false]
        ] as const;
        for (const [name, values, length, half] of expected) {
            if (values.length !== length)
                throw new Error(`layer ${i}: retention.${name} holds ${values.length} values, expected ${length}`);
            for (let k = 0; k < values.length; k++) {
                if (!Number.isFinite(values[k]))
                    throw new Error(`layer ${i}: retention.${name} holds a non-finite value (${values[k]}) at ${k}`);
                if (half && Math.abs(values[k]!) > f16Max)
                    throw new Error(
                        `layer ${i}: retention.${name} holds ${values[k]} at ${k}, beyond F16's largest value (${f16Max}): ` +
                            "its matrices must be written as F32"
                    );
            }
        }
    });
}
