import fs from "node:fs/promises";
import type {GgufHeader, GgufTensorInfo} from "../gguf/checkGgufHeader.js";
import type {RetentionInfo} from "./types.js";

/** Bytes of a gate matrix read at once: memory stays at this (and one layer's fc2 and biases) whatever the file's size. */
const chunkBytes = 1 << 20;
/** The largest finite F32: a value past it is infinite in the engine's F32 graph. */
const f32Max = 3.4028234663852886e38;
/** The probes' RMS, after the zero vector: RMSNorm's output with unit weights, and a large one (below). */
const probeScales = [1, 100] as const;

/**
 * The probe inputs a gate runs on: zeros, a fixed seeded vector of RMS 1 (RMSNorm's output with unit weights), and the
 * same at RMS 100, a large-magnitude `attn_norm` output (x / rms(x) times the norm's weights, which reach tens in trained
 * models, and one massive channel alone reaches sqrt(width)).
 */
const gateProbes = ["zeros", `a seeded input of RMS ${probeScales[0]}`, `a seeded input of RMS ${probeScales[1]}`] as const;

const cache = new Map<string, Promise<string | null>>();

/**
 * Reads a retention gate file's tensors (their names, shapes and types already checked against `info`) and finds what
 * would make the engine's gates non-finite: a NaN or infinite weight or bias, named with its tensor and element (torch
 * layout: fc1.weight is [hidden, width], fc2.weight [KV heads, hidden]); then runs each layer's gate,
 * g = fc2 @ silu(fc1 @ x + fc1.bias) + bias (log beta = logsigmoid(g), finite wherever g is), on the `gateProbes`, in
 * double, and finds a hidden value or a logit past F32's range. Reads one layer at a time, its fc1 in chunks of 1 MiB.
 * Returns the first problem in words, or `null`; kept per (file, size, mtime), as the check reads every weight.
 */
export async function checkGateValues(file: string, header: GgufHeader, info: RetentionInfo): Promise<string | null> {
    const stat = await fs.stat(file);
    const key = `${file}\0${stat.size}\0${stat.mtimeMs}`;
    let pending = cache.get(key);
    if (pending == null) {
        pending = checkFile(file, header, info);
        cache.set(key, pending);
        pending.catch(() => cache.delete(key));
    }
    return pending;
}

async function checkFile(file: string, header: GgufHeader, info: RetentionInfo): Promise<string | null> {
    const tensors = new Map((header.tensors ?? []).map((tensor) => [tensor.name, tensor]));
    const tensor = (name: string) => {
        const found = tensors.get(name);
        if (found == null) throw new Error(`the tensor ${name} is missing`);
        return found;
    };
    const width = info.embeddingLength;
    const hidden = info.hidden;
    const heads = info.headCountKv;
    const probe = seededProbe(width);
    const handle = await fs.open(file, "r");
    try {
        const read = async (t: GgufTensorInfo, start: number, target: Uint8Array, bytes: number) => {
            const {bytesRead} = await handle.read(target, 0, bytes, header.dataOffset + t.offset + start);
            if (bytesRead !== bytes) throw new Error(`${file} ended inside the tensor ${t.name}: it changed while it was read`);
        };
        const readVector = async (t: GgufTensorInfo, count: number) => {
            const out = new Float32Array(count);
            await read(t, 0, new Uint8Array(out.buffer), count * 4);
            return out;
        };
        const rowsPerChunk = Math.max(1, Math.floor(chunkBytes / (width * 4)));
        const chunk = new Uint8Array(rowsPerChunk * width * 4);
        for (let layer = 0; layer < info.layers; layer++) {
            const names = ["fc1.weight", "fc1.bias", "fc2.weight", "bias"].map((part) => `blk.${layer}.retention.${part}`);
            const [fc1, fc1Bias, fc2, bias] = names.map(tensor) as [GgufTensorInfo, GgufTensorInfo, GgufTensorInfo, GgufTensorInfo];
            const b1 = await readVector(fc1Bias, hidden);
            const b2 = await readVector(bias, heads);
            for (const [t, values] of [
                [fc1Bias, b1],
                [bias, b2]
            ] as const) {
                const bad = firstNonFinite(values);
                if (bad != null) return holds(t.name, `[${bad}]`, values[bad]!);
            }

            // fc1 @ probe, row by row (a row: one hidden unit's weights over the width). The zero probe gives fc1.bias,
            // the scaled probes scale the one dot product.
            const dots = new Float64Array(hidden);
            for (let row = 0; row < hidden; row += rowsPerChunk) {
                const rows = Math.min(rowsPerChunk, hidden - row);
                const values = await readMatrix(fc1, row * width, rows * width, chunk, read);
                const bad = firstNonFinite(values);
                if (bad != null) return holds(fc1.name, `[${row + Math.floor(bad / width)}, ${bad % width}]`, values[bad]!);
                for (let r = 0; r < rows; r++) {
                    let dot = 0;
                    const base = r * width;
                    for (let k = 0; k < width; k++) dot += values[base + k]! * probe[k]!;
                    dots[row + r] = dot;
                }
            }
            const fc2Values = Float32Array.from(await readMatrix(fc2, 0, heads * hidden, new Uint8Array(heads * hidden * 4), read));
            const badFc2 = firstNonFinite(fc2Values);
            if (badFc2 != null) return holds(fc2.name, `[${Math.floor(badFc2 / hidden)}, ${badFc2 % hidden}]`, fc2Values[badFc2]!);

            for (const [p, scale] of [0, ...probeScales].entries()) {
                const activation = new Float64Array(hidden);
                for (let i = 0; i < hidden; i++) {
                    const pre = scale * dots[i]! + b1[i]!;
                    if (!(Math.abs(pre) <= f32Max))
                        return `layer ${layer}'s gate gives a non-finite value in hidden unit ${i} on ${gateProbes[p]}`;
                    activation[i] = pre / (1 + Math.exp(-pre)); // SiLU
                }
                for (let h = 0; h < heads; h++) {
                    let g = b2[h]!;
                    for (let i = 0; i < hidden; i++) g += fc2Values[h * hidden + i]! * activation[i]!;
                    if (!(Math.abs(g) <= f32Max))
                        return `layer ${layer}'s gate gives a non-finite logit for KV head ${h} on ${gateProbes[p]}`;
                }
            }
        }
        return null;
    } finally {
        await handle.close();
    }
}

/** `count` elements of an F32 or F16 matrix from element `start`, as F32, read into `buffer` (F16 is widened). */
async function readMatrix(
    t: GgufTensorInfo,
    start: number,
    count: number,
    buffer: Uint8Array,
    read: (t: GgufTensorInfo, start: number, target: Uint8Array, bytes: number) => Promise<void>
): Promise<Float32Array> {
    if (t.type === "F32") {
        await read(t, start * 4, buffer, count * 4);
        return new Float32Array(buffer.buffer, 0, count);
    }
    await read(t, start * 2, buffer, count * 2);
    const halves = new Uint16Array(buffer.buffer, 0, count);
    const table = halfTable();
    const out = new Float32Array(count);
    for (let i = 0; i < count; i++) out[i] = table[halves[i]!]!;
    return out;
}

function holds(name: string, index: string, value: number): string {
    return `the tensor ${name} holds ${Number.isNaN(value) ? "NaN" : value > 0 ? "+Inf" : "-Inf"} at ${index}`;
}

/** Index of the first NaN or infinite value, or `null`. */
function firstNonFinite(values: Float32Array): number | null {
    for (let i = 0; i < values.length; i++) {
        // v - v is 0 for a finite v, NaN for NaN and the infinities.
        const v = values[i]!;
        if (v - v !== 0) return i;
    }
    return null;
}

/** A fixed input of RMS 1: xorshift32 values, centred and scaled (the same every run, whatever the file). */
function seededProbe(width: number): Float64Array {
    const out = new Float64Array(width);
    let state = 0x9e3779b9;
    let sum = 0;
    for (let k = 0; k < width; k++) {
        state ^= state << 13;
        state ^= state >>> 17;
        state ^= state << 5;
        out[k] = (state >>> 0) / 2 ** 32 - 0.5;
        sum += out[k]! * out[k]!;
    }
    const rms = Math.sqrt(sum / width);
    for (let k = 0; k < width; k++) out[k] = out[k]! / rms;
    return out;
}

let halves: Float32Array | null = null;

/** Every F16 bit pattern as its F32 value (IEEE half: 1 sign, 5 exponent, 10 mantissa bits). */
function halfTable(): Float32Array {
    if (halves != null) return halves;
    halves = new Float32Array(65536);
    for (let bits = 0; bits < 65536; bits++) {
        const sign = bits & 0x8000 ? -1 : 1;
        const exponent = (bits >> 10) & 0x1f;
        const mantissa = bits & 0x3ff;
        halves[bits] =
            exponent === 0
                ? sign * mantissa * 2 ** -24
                : exponent === 0x1f
                  ? mantissa === 0
                      ? sign * Infinity
                      : NaN
                  : sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
    }
    return halves;
}
