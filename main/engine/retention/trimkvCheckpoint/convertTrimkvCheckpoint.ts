import fs from "node:fs/promises";
import path from "node:path";
import {checkGgufHeader} from "../../gguf/checkGgufHeader.js";
import {retentionSidecarPath} from "../findRetentionGates.js";
import {writeRetentionSidecar} from "../writeRetentionSidecar.js";
import {CheckpointError} from "./CheckpointError.js";
import {checkTrimkvConfig} from "./checkTrimkvConfig.js";
import {gateLayersFromStateDict, type GateModelShape} from "./gateLayersFromStateDict.js";
import {readTorchStateDict} from "./readTorchStateDict.js";

export type ConvertTrimkvOptions = {
    /** The authors' `trimkv_weights.pth` (a `torch.save`d state_dict of the "rg" gates). */
    weights: string;
    /** The checkpoint's `config.json`, checked (`retention_gate` "rg", `hidden_act` silu) and its `memory_size` recorded. Defaults to none: budget 0 (unknown). */
    config?: string;
    /** The GGUF model the gates were trained for. */
    modelPath: string;
    /** Where the sidecar goes. Defaults to `<model>.retention.gguf`, beside the model, where the app looks. */
    out?: string;
    /** Storage of the two weight matrices. Defaults to `"f16"` for models wider than 1,024, else `"f32"`. */
    type?: "f32" | "f16";
};

/** What was written. */
export type ConvertedTrimkv = {
    path: string;
    layers: number;
    embeddingLength: number;
    headCountKv: number;
    hidden: number;
    /** The gates' trained budget (config.json's `memory_size`); `null` when unknown. */
    budget: number | null;
    /** The model the config says the gates were trained on, when it says. */
    baseModel: string | null;
    source: string;
    matrixType: "f32" | "f16";
};

const maxConfigBytes = 1024 * 1024;

/**
 * Converts the TRIM-KV authors' released gates into the model's retention sidecar, in TypeScript, executing nothing from
 * the checkpoint: the state_dict is read by readTorchStateDict, checked (and the config, when given) against the model's
 * layers, width and KV heads, and written by writeRetentionSidecar with reduction "per-head" (how the authors trained)
 * and source "converted from <file>". Throws CheckpointError with a plain reason; nothing is written then.
 */
export async function convertTrimkvCheckpoint(options: ConvertTrimkvOptions): Promise<ConvertedTrimkv> {
    const model = await readModelShape(options.modelPath);
    const config = options.config == null ? null : checkTrimkvConfig(await readConfig(options.config), model);
    const tensors = await readTorchStateDict(options.weights);
    const layers = gateLayersFromStateDict(tensors, model);
    const hidden = layers[0]!.fc1Bias.length;
    if (config?.hidden != null && config.hidden !== hidden)
        throw new CheckpointError(`config.json says retention_gate_intermediate_size ${config.hidden}, but the gates are ${hidden} wide`);
    const out = options.out ?? retentionSidecarPath(options.modelPath);
    const matrixType = options.type ?? (model.width > 1024 ? "f16" : "f32");
    const source = `converted from ${path.basename(options.weights)}`;
    const budget = config?.memorySize ?? 0;
    try {
        await writeRetentionSidecar(out, {modelPath: options.modelPath, layers, budget, reduction: "per-head", source, matrixType});
    } catch (err) {
        throw new CheckpointError(`the sidecar could not be written: ${(err as Error).message}`, {cause: err});
    }
    return {
        path: out,
        layers: model.layers,
        embeddingLength: model.width,
        headCountKv: model.kvHeads,
        hidden,
        budget: budget === 0 ? null : budget,
        baseModel: config?.baseModel ?? null,
        source,
        matrixType
    };
}

async function readConfig(configPath: string): Promise<unknown> {
    const stat = await fs.stat(configPath).catch(() => null);
    if (stat == null || !stat.isFile()) throw new CheckpointError(`${configPath} does not exist or is not a file`);
    if (stat.size > maxConfigBytes) throw new CheckpointError(`${configPath} is ${stat.size} bytes; a config.json is a few kilobytes`);
    try {
        return JSON.parse(await fs.readFile(configPath, "utf8")) as unknown;
    } catch (err) {
        throw new CheckpointError(`${path.basename(configPath)} is not JSON (${(err as Error).message})`);
    }
}

/** The model's layers, width and KV heads from its GGUF header (every length checked against the file first). */
async function readModelShape(modelPath: string): Promise<GateModelShape> {
    let values;
    try {
        values = (await checkGgufHeader(modelPath, {collect: true})).values;
    } catch (err) {
        throw new CheckpointError(`the model cannot be read: ${(err as Error).message}`);
    }
    const architecture = values?.get("general.architecture");
    if (typeof architecture !== "string") throw new CheckpointError(`${modelPath} has no general.architecture: not a GGUF model`);
    const count = (key: string, fallback?: string): number => {
        const found = values?.get(`${architecture}.${key}`) ?? (fallback == null ? undefined : values?.get(`${architecture}.${fallback}`));
        if (typeof found !== "number" || !Number.isInteger(found) || found <= 0)
            throw new CheckpointError(`${modelPath} does not declare ${architecture}.${key}`);
        return found;
    };
    return {
        layers: count("block_count"),
        width: count("embedding_length"),
        kvHeads: count("attention.head_count_kv", "attention.head_count")
    };
}
