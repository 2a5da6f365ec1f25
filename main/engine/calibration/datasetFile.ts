import {randomBytes} from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type {CalibrationDataset} from "./types.js";

// Calibration data on disk, so a calibration resumes after a restart or a crash with the prompts already thought:
// "PONDCAL1", a u32 length and a JSON header (the scalars and texts), then the arrays' raw little-endian bytes in the
// order of `arrays`. Written atomically (a temporary name, then a rename): a file either is whole or is not there.

const magic = "PONDCAL1";
const arrays = ["features", "horizons", "followers", "positions", "text", "tokenIds", "generated"] as const;
type ArrayKey = (typeof arrays)[number];
const kinds = {
    features: Float32Array,
    horizons: Float32Array,
    followers: Int32Array,
    positions: Int32Array,
    text: Int32Array,
    tokenIds: Int32Array,
    generated: Uint8Array
};

export async function writeDatasetFile(file: string, data: CalibrationDataset): Promise<void> {
    const scalars: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(data)) {
        if (!(arrays as readonly string[]).includes(key)) scalars[key] = value;
    }
    scalars.texts = data.texts.map((text) => ({...text, tokens: Array.from(text.tokens)}));
    scalars.alternatives = (data.alternatives ?? []).map((alternative) => ({readThreshold: alternative.readThreshold}));
    const header = Buffer.from(JSON.stringify(scalars), "utf8");
    const length = Buffer.alloc(4);
    length.writeUInt32LE(header.length);
    const parts = [
        Buffer.from(magic, "latin1"),
        length,
        header,
        ...arrays.map((key) => Buffer.from(data[key].buffer, data[key].byteOffset, data[key].byteLength)),
        ...(data.alternatives ?? []).map(({horizons}) => Buffer.from(horizons.buffer, horizons.byteOffset, horizons.byteLength))
    ];
    const temp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(4).toString("hex")}.tmp`);
    try {
        await fs.writeFile(temp, Buffer.concat(parts), {flag: "wx"});
        await fs.rename(temp, file);
    } catch (err) {
        await fs.rm(temp, {force: true});
        throw err;
    }
}

/** Reads a file `writeDatasetFile` wrote; throws in words on anything else, or a file cut short. */
export async function readDatasetFile(file: string): Promise<CalibrationDataset> {
    const bytes = await fs.readFile(file);
    if (bytes.length < 12 || bytes.toString("latin1", 0, 8) !== magic) throw new Error(`${file} is not calibration data`);
    const headerLength = bytes.readUInt32LE(8);
    const scalars = JSON.parse(bytes.toString("utf8", 12, 12 + headerLength)) as Omit<CalibrationDataset, ArrayKey | "alternatives"> & {
        alternatives?: {readThreshold: number}[];
    };
    scalars.texts = scalars.texts.map((text) => ({...text, tokens: Int32Array.from(text.tokens as unknown as number[])}));
    const {tokens: n, layers, embeddingLength, headCountKv} = scalars;
    const lengths: Record<ArrayKey, number> = {
        features: n * layers * embeddingLength,
        horizons: n * layers * headCountKv,
        followers: n,
        positions: n,
        text: n,
        tokenIds: n,
        generated: n
    };
    let offset = 12 + headerLength;
    const out: Partial<Record<ArrayKey, ArrayLike<number>>> = {};
    for (const key of arrays) {
        const Kind = kinds[key];
        const byteLength = lengths[key] * Kind.BYTES_PER_ELEMENT;
        if (offset + byteLength > bytes.length) throw new Error(`${file} is cut short`);
        // copied: a Buffer's offset need not be aligned for the typed array
        out[key] = new Kind(bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + offset + byteLength));
        offset += byteLength;
    }
    const alternatives = (scalars.alternatives ?? []).map(({readThreshold}) => {
        const byteLength = lengths.horizons * 4;
        if (offset + byteLength > bytes.length) throw new Error(`${file} is cut short`);
        const horizons = new Float32Array(bytes.buffer.slice(bytes.byteOffset + offset, bytes.byteOffset + offset + byteLength));
        offset += byteLength;
        return {readThreshold, horizons};
    });
    if (offset !== bytes.length) throw new Error(`${file} has bytes past its data`);
    return {...scalars, ...out, alternatives} as CalibrationDataset;
}

/** The samples of several runs as one dataset: texts in order, each sample's text index moved past the earlier runs'. */
export function concatDatasets(parts: CalibrationDataset[]): CalibrationDataset {
    const first = parts[0];
    if (first == null) throw new Error("No calibration data to join");
    for (const part of parts) {
        if (part.layers !== first.layers || part.embeddingLength !== first.embeddingLength || part.headCountKv !== first.headCountKv)
            throw new Error("Calibration data of different models cannot be joined");
        const thresholds = (data: CalibrationDataset) => (data.alternatives ?? []).map((a) => a.readThreshold).join(",");
        if (thresholds(part) !== thresholds(first)) throw new Error("Calibration data of different read thresholds cannot be joined");
    }
    const n = parts.reduce((sum, part) => sum + part.tokens, 0);
    const joined = (key: ArrayKey) => {
        const out = new kinds[key](parts.reduce((sum, part) => sum + part[key].length, 0));
        let at = 0;
        for (const part of parts) {
            out.set(part[key], at);
            at += part[key].length;
        }
        return out;
    };
    const text = new Int32Array(n);
    let at = 0;
    let texts = 0;
    for (const part of parts) {
        for (let i = 0; i < part.tokens; i++) text[at + i] = part.text[i]! + texts;
        at += part.tokens;
        texts += part.texts.length;
    }
    let promptOffset = 0;
    const allTexts = parts.flatMap((part) => {
        const moved = part.texts.map((t) => ({...t, prompt: t.prompt + promptOffset}));
        promptOffset += part.texts.length;
        return moved;
    });
    return {
        ...first,
        tokens: n,
        features: joined("features") as Float32Array,
        horizons: joined("horizons") as Float32Array,
        followers: joined("followers") as Int32Array,
        positions: joined("positions") as Int32Array,
        text,
        tokenIds: joined("tokenIds") as Int32Array,
        generated: joined("generated") as Uint8Array,
        tokensSeen: parts.reduce((sum, part) => sum + part.tokensSeen, 0),
        texts: allTexts,
        alternatives: (first.alternatives ?? []).map(({readThreshold}, k) => {
            const horizons = new Float32Array(parts.reduce((sum, part) => sum + part.alternatives![k]!.horizons.length, 0));
            let offset = 0;
            for (const part of parts) {
                horizons.set(part.alternatives![k]!.horizons, offset);
                offset += part.alternatives![k]!.horizons.length;
            }
            return {readThreshold, horizons};
        })
    };
}
