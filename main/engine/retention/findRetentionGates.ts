import fs from "node:fs/promises";
import path from "node:path";
import type {CalibrationPoint} from "../../../preload/contract.js";
import {checkGgufHeader, type GgufHeader, type GgufScalar} from "../gguf/checkGgufHeader.js";
import type {ModelInspection} from "../EngineApi.js";
import {checkGateValues} from "./checkGateValues.js";
import {modelFingerprint} from "./modelFingerprint.js";
import type {RetentionAvailability, RetentionCalibration, RetentionInfo} from "./types.js";

/** The sidecar format this code reads (`ponder.retention.version`). */
export const retentionSidecarVersion = 1;

/** What the gates must have been trained for: the model's file and the shape it declares. */
export type RetentionModel = Pick<ModelInspection, "path" | "architecture" | "layers" | "embeddingLength" | "headCountKv">;

/** Where a model's retention gates are: `<model path without .gguf>.retention.gguf`, beside it. */
export function retentionSidecarPath(modelPath: string): string {
    const base = modelPath.toLowerCase().endsWith(".gguf") ? modelPath.slice(0, -".gguf".length) : modelPath;
    return `${base}.retention.gguf`;
}

/**
 * Finds and checks the model's retention gate file before anything native sees it (`checkRetentionFile`). Never throws:
 * a missing, corrupt, truncated, foreign or non-finite file is `{available: false, reason}` in plain words, and the
 * model loads without TRIM-KV.
 */
export async function findRetentionGates(model: RetentionModel): Promise<RetentionAvailability> {
    const sidecar = retentionSidecarPath(model.path);
    const stat = await fs.stat(sidecar).catch(() => null);
    if (stat == null) return {available: false, reason: `no retention gates beside this model (expected ${sidecar})`};
    return checkRetentionFile(sidecar, model);
}

/**
 * Checks a retention gate file for the model as loading it does: its header (each length against the file, as for a
 * model), every `ponder.retention.*` key against the model's own metadata, the gate tensors' names and shapes, the model
 * file's fingerprint, and the gates' values (`checkGateValues`: no NaN or infinite weight, finite logits on probe
 * inputs). The writer runs it on the file it is about to install. `shownAs` names the file in the reasons. Defaults to
 * `file`. Never throws.
 */
export async function checkRetentionFile(file: string, model: RetentionModel, shownAs: string = file): Promise<RetentionAvailability> {
    const name = path.basename(shownAs);
    const stat = await fs.stat(file).catch(() => null);
    if (stat == null || !stat.isFile()) return {available: false, reason: `corrupt: ${shownAs} is not a file`};

    let header: GgufHeader;
    try {
        header = await checkGgufHeader(file, {collect: true, kind: "retention gate file"});
    } catch (err) {
        return {available: false, reason: `corrupt: ${(err as Error).message}`};
    }
    try {
        const info = readInfo(header);
        const mismatch = shapeMismatch(info, model);
        if (mismatch != null) return {available: false, reason: `the gates were trained for another model file (${mismatch})`};
        checkTensors(header, info);
        const recorded = text(header, "ponder.retention.model.fingerprint");
        if (!/^[0-9a-f]{64}$/.test(recorded)) throw new SidecarError(`ponder.retention.model.fingerprint is not a lowercase hex SHA-256`);
        const actual = await modelFingerprint(model.path).catch(() => null);
        if (actual == null) return {available: false, reason: `the model file ${model.path} cannot be read to check the gates against it`};
        if (actual !== recorded)
            return {available: false, reason: "the gates were trained for another model file (its fingerprint differs)"};
        const problem = await checkGateValues(file, header, info);
        if (problem != null) return {available: false, reason: `the gates in ${name} cannot run: ${problem}`};
        return {available: true, path: file, info};
    } catch (err) {
        if (err instanceof SidecarError) return {available: false, reason: `corrupt: ${name}: ${err.message}`};
        return {available: false, reason: `the gates could not be checked: ${(err as Error).message}`};
    }
}

/**
 * How the gates of a retention gate file were trained (`ponder.retention.reduction`), read from its header: what picks
 * TRIM-KV's combine mode under `auto`. Throws when the file is not a gate file this Ponder reads.
 */
export async function readRetentionReduction(sidecar: string): Promise<RetentionInfo["reduction"]> {
    const header = await checkGgufHeader(sidecar, {collect: true, kind: "retention gate file"});
    try {
        return readInfo(header).reduction;
    } catch (err) {
        throw err instanceof SidecarError ? new Error(`corrupt: ${path.basename(sidecar)}: ${err.message}`) : err;
    }
}

class SidecarError extends Error {}

function value(header: GgufHeader, key: string): GgufScalar {
    const found = header.values?.get(key);
    if (found == null) throw new SidecarError(`${key} is missing`);
    return found;
}

function text(header: GgufHeader, key: string): string {
    const found = value(header, key);
    if (typeof found !== "string") throw new SidecarError(`${key} is not a string`);
    return found;
}

function count(header: GgufHeader, key: string): number {
    const found = value(header, key);
    if (typeof found !== "number" || !Number.isInteger(found) || found < 0) throw new SidecarError(`${key} is not an unsigned integer`);
    return found;
}

function readInfo(header: GgufHeader): RetentionInfo {
    const architecture = text(header, "general.architecture");
    if (architecture !== "ponder-retention")
        throw new SidecarError(`not a retention gate file (general.architecture is "${architecture}", not "ponder-retention")`);
    const version = count(header, "ponder.retention.version");
    if (version !== retentionSidecarVersion)
        throw new SidecarError(`format version ${version}; this Ponder reads version ${retentionSidecarVersion}`);
    const gate = text(header, "ponder.retention.gate");
    if (gate !== "trimkv-rg") throw new SidecarError(`unknown gate "${gate}" (this Ponder runs "trimkv-rg")`);
    const activation = text(header, "ponder.retention.activation");
    if (activation !== "silu") throw new SidecarError(`unknown activation "${activation}" (this Ponder runs "silu")`);
    const reduction = text(header, "ponder.retention.reduction");
    if (reduction !== "shared" && reduction !== "per-head")
        throw new SidecarError(`unknown reduction "${reduction}" (expected "shared" or "per-head")`);
    const hidden = count(header, "ponder.retention.hidden");
    if (hidden === 0) throw new SidecarError("ponder.retention.hidden is 0");
    const budget = count(header, "ponder.retention.budget");
    return {
        version,
        gate,
        activation,
        modelArchitecture: text(header, "ponder.retention.model.architecture"),
        layers: count(header, "ponder.retention.model.block_count"),
        embeddingLength: count(header, "ponder.retention.model.embedding_length"),
        headCountKv: count(header, "ponder.retention.model.head_count_kv"),
        hidden,
        budget: budget === 0 ? null : budget,
        reduction,
        source: text(header, "ponder.retention.source"),
        weightBytes: (header.tensors ?? []).reduce((sum, tensor) => sum + tensor.bytes, 0),
        calibration: readCalibration(header)
    };
}

/** The calibration's provenance keys, when the gates have them (all of them, with their types); else `null`. */
function readCalibration(header: GgufHeader): RetentionCalibration | null {
    const key = "ponder.retention.calibration.";
    if (header.values?.get(key + "prompt_set") == null) return null;
    const points: CalibrationPoint[] = [];
    for (const [name, found] of header.values) {
        const share = /^ponder\.retention\.calibration\.validation\.agreement_(\d+)$/.exec(name)?.[1];
        if (share == null || typeof found !== "number") continue;
        const answerGates = header.values.get(`${key}validation.answer_agreement_${share}`);
        const answerLethe = header.values.get(`${key}validation.answer_lethe_${share}`);
        points.push({
            share: Number(share) / 100,
            gates: found,
            lethe: Number(header.values.get(`${key}validation.lethe_${share}`)),
            answers: typeof answerGates === "number" && typeof answerLethe === "number" ? {gates: answerGates, lethe: answerLethe} : null
        });
    }
    const validated = header.values.get(key + "validation.prompts") != null;
    return {
        promptSet: text(header, key + "prompt_set"),
        prompts: count(header, key + "prompts"),
        tokens: count(header, key + "tokens"),
        samples: count(header, key + "samples"),
        seconds: count(header, key + "seconds"),
        date: text(header, key + "date"),
        texts:
            header.values.get(key + "text_tokens_mean") != null
                ? {
                      mean: count(header, key + "text_tokens_mean"),
                      longest: count(header, key + "text_tokens_longest"),
                      cut: count(header, key + "texts_cut")
                  }
                : null,
        validation: validated
            ? {
                  prompts: count(header, key + "validation.prompts"),
                  tokens: count(header, key + "validation.tokens"),
                  points: points.sort((a, b) => a.share - b.share)
              }
            : null
    };
}

/** The first difference between what the gates were trained for and the model, in words; `null` when none. */
function shapeMismatch(info: RetentionInfo, model: RetentionModel): string | null {
    if (model.architecture != null && info.modelArchitecture !== model.architecture)
        return `a ${info.modelArchitecture} model; this one is ${model.architecture}`;
    const shape = [
        ["layers", info.layers, model.layers],
        ["embedding width", info.embeddingLength, model.embeddingLength],
        ["KV heads", info.headCountKv, model.headCountKv]
    ] as const;
    for (const [what, trained, own] of shape) {
        if (own == null) return `this model does not declare its ${what}`;
        if (trained !== own) return `${trained} ${what}; this model has ${own}`;
    }
    return null;
}

/** Every layer's four gate tensors, with the shapes of the contract: F32, or F16 for the two weight matrices. */
function checkTensors(header: GgufHeader, info: RetentionInfo): void {
    const tensors = new Map((header.tensors ?? []).map((tensor) => [tensor.name, tensor]));
    const d = info.embeddingLength;
    const h = info.hidden;
    const kv = info.headCountKv;
    for (let i = 0; i < info.layers; i++) {
        const expected = [
            [`blk.${i}.retention.fc1.weight`, [d, h], true],
            [`blk.${i}.retention.fc1.bias`, [h], false],
            [`blk.${i}.retention.fc2.weight`, [h, kv], true],
            [`blk.${i}.retention.bias`, [kv], false]
        ] as const;
        for (const [name, dims, weight] of expected) {
            const tensor = tensors.get(name);
            if (tensor == null) throw new SidecarError(`the tensor ${name} is missing`);
            if (tensor.dims.length !== dims.length || tensor.dims.some((dim, k) => dim !== dims[k]))
                throw new SidecarError(`the tensor ${name} is [${tensor.dims.join(", ")}], expected [${dims.join(", ")}]`);
            if (tensor.type !== "F32" && !(weight && tensor.type === "F16"))
                throw new SidecarError(`the tensor ${name} is ${tensor.type}, expected F32${weight ? " or F16" : ""}`);
        }
    }
}
