import {createHash} from "node:crypto";

/**
 * Ponder's conversation state file: a small header of its own, then llama.cpp's sequence state
 * (`llama_state_seq_save_file`) and Ponder's per-cell scores. The header says what the state was made with, so a state
 * of another model, another path of messages or other cache settings is refused here, in TypeScript, and a corrupt or
 * truncated file (the payload's SHA-256) never reaches llama.cpp.
 *
 * Layout: `PONDERKV` (8 bytes), the format version (u32 LE), the header's length (u32 LE), the header's SHA-256 (32
 * bytes), the header (JSON, UTF-8),
 * then the payload: `llamaBytes` of llama.cpp's file, then `scoreBytes` of scores (f32 LE: per layer, the accumulated
 * then the last scores, `heads * cells` each, head-major, cells in the order of `positions`), then `retentionBytes` of
 * the retention gates' logits (the same layout with one array per layer, `retentionHeads` KV heads), then
 * `valueNormBytes` of the cells' value L1 norms (LAVa; the same layout, `valueNormHeads` KV heads).
 */

const stateFileMagic = "PONDERKV";
const stateFileVersion = 3;
const prefixBytes = 48;
/** A header is a few kilobytes (its tokens the most of it); more is not a header of ours. */
const maxHeaderBytes = 64 * 1024 * 1024;

/** The model file the state was made with: its path, size and modification time. */
export type ModelIdentity = {path: string; size: number; mtimeMs: number};

/**
 * `answer`: the whole sequence after an answer (Full KV: every cell, reused as a prefix). `prompt`: a pruned sequence at
 * a prompt chunk boundary (a pruning policy reads every prompt afresh; the state is where that reading stood).
 */
export type StateKind = "answer" | "prompt";

export type StateHeader = {
    kind: StateKind;
    model: ModelIdentity;
    /** SHA-256 of the tokens the state holds: the path of messages, as rendered. */
    pathHash: string;
    /** The tokens the sequence has seen (evicted ones included), base64 of u32 LE. */
    tokens: string;
    tokenCount: number;
    kvType: string;
    kvTypeV: string;
    flashAttention: boolean;
    policy: string;
    /** SHA-256 of the compression settings (policy parameters included) and the budget in cells. */
    settingsHash: string;
    cells: number;
    /** Live cells in the state and bytes per cell: the state's KV against Full's (`tokenCount * bytesPerCell`). */
    liveCells: number;
    bytesPerCell: number;
    llamaBytes: number;
    scoreBytes: number;
    /** Layers and heads of the scores; 0 when no scores were kept. */
    scoreLayers: number;
    scoreHeads: number;
    /** Bytes, layers and KV heads of the retention gates' logits (TRIM-KV); 0 when the gates were off. */
    retentionBytes: number;
    retentionLayers: number;
    retentionHeads: number;
    /** Bytes, layers and KV heads of the cells' value L1 norms (LAVa); 0 when they were off. Added in version 3. */
    valueNormBytes: number;
    valueNormLayers: number;
    valueNormHeads: number;
    /** The KV controller's own state at the save (policy accumulators, counters), JSON with typed arrays tagged. */
    controller: unknown;
    payloadSha256: string;
};

/** What a caller expects a state to have been made with; `checkStateHeader` names the first difference. */
export type StateExpectation = Pick<StateHeader, "model" | "kvType" | "kvTypeV" | "flashAttention" | "policy" | "settingsHash" | "cells">;

export class StateFileError extends Error {}

/** A state file's bytes: the header (without its checksum, computed here) and the payload's parts. */
export function encodeStateFile(
    header: Omit<StateHeader, "payloadSha256" | "llamaBytes" | "scoreBytes" | "retentionBytes" | "valueNormBytes">,
    llama: Uint8Array,
    scores: Uint8Array,
    retention: Uint8Array = new Uint8Array(0),
    valueNorms: Uint8Array = new Uint8Array(0)
): Buffer[] {
    const hash = createHash("sha256").update(llama).update(scores).update(retention).update(valueNorms).digest("hex");
    const full: StateHeader = {
        ...header,
        llamaBytes: llama.byteLength,
        scoreBytes: scores.byteLength,
        retentionBytes: retention.byteLength,
        valueNormBytes: valueNorms.byteLength,
        payloadSha256: hash
    };
    const json = Buffer.from(JSON.stringify(full), "utf8");
    const prefix = Buffer.alloc(prefixBytes);
    prefix.write(stateFileMagic, 0, "latin1");
    prefix.writeUInt32LE(stateFileVersion, 8);
    prefix.writeUInt32LE(json.byteLength, 12);
    createHash("sha256").update(json).digest().copy(prefix, 16);
    return [
        prefix,
        json,
        ...[llama, scores, retention, valueNorms].map((part) => Buffer.from(part.buffer, part.byteOffset, part.byteLength))
    ];
}

/** The header of a state file, from its first bytes; throws `StateFileError` when they are not one of ours. */
export function readStateHeader(bytes: Uint8Array, fileSize: number): {header: StateHeader; payloadOffset: number} {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (buffer.byteLength < prefixBytes || buffer.toString("latin1", 0, 8) !== stateFileMagic)
        throw new StateFileError("not a Ponder state file");
    const version = buffer.readUInt32LE(8);
    if (version !== stateFileVersion) throw new StateFileError(`state file version ${version}, this Ponder reads ${stateFileVersion}`);
    const length = buffer.readUInt32LE(12);
    if (length > maxHeaderBytes || prefixBytes + length > buffer.byteLength)
        throw new StateFileError("the state file is truncated (its header)");
    const json = buffer.subarray(prefixBytes, prefixBytes + length);
    if (!createHash("sha256").update(json).digest().equals(buffer.subarray(16, prefixBytes)))
        throw new StateFileError("the state file's header is damaged (its checksum does not match)");
    let header: StateHeader;
    try {
        header = JSON.parse(buffer.toString("utf8", prefixBytes, prefixBytes + length)) as StateHeader;
    } catch {
        throw new StateFileError("the state file's header is damaged");
    }
    if (!isHeader(header)) throw new StateFileError("the state file's header is damaged");
    const payloadOffset = prefixBytes + length;
    const end = payloadOffset + payloadBytes(header);
    if (end !== fileSize) throw new StateFileError(`the state file is ${fileSize < end ? "truncated" : "longer than its header says"}`);
    return {header, payloadOffset};
}

/** Bytes a header may need to be read whole: the prefix, then `prefixBytes + length`. */
export function stateHeaderLength(prefix: Uint8Array): number | null {
    const buffer = Buffer.from(prefix.buffer, prefix.byteOffset, prefix.byteLength);
    if (buffer.byteLength < prefixBytes || buffer.toString("latin1", 0, 8) !== stateFileMagic) return null;
    const length = buffer.readUInt32LE(12);
    return length > maxHeaderBytes ? null : prefixBytes + length;
}

export const stateFilePrefixBytes = prefixBytes;

/** Throws `StateFileError` unless the payload is the one the header's checksum names. */
export function verifyStatePayload(header: StateHeader, payload: Uint8Array): void {
    if (payload.byteLength !== payloadBytes(header)) throw new StateFileError("the state file is truncated");
    if (createHash("sha256").update(payload).digest("hex") !== header.payloadSha256)
        throw new StateFileError("the state file is damaged (its checksum does not match)");
}

function payloadBytes(header: StateHeader): number {
    return header.llamaBytes + header.scoreBytes + header.retentionBytes + header.valueNormBytes;
}

/** Why a state made as `header` says cannot stand for `expected`, in words; `null` when it can. */
export function checkStateHeader(header: StateHeader, expected: StateExpectation): string | null {
    const {model} = header;
    if (model.path !== expected.model.path || model.size !== expected.model.size || model.mtimeMs !== expected.model.mtimeMs)
        return "it was saved with another model file";
    if (header.kvType !== expected.kvType || header.kvTypeV !== expected.kvTypeV)
        return `it was saved with a ${header.kvType}/${header.kvTypeV} KV cache, now ${expected.kvType}/${expected.kvTypeV}`;
    if (header.flashAttention !== expected.flashAttention)
        return `it was saved with flash attention ${header.flashAttention ? "on" : "off"}`;
    if (header.policy !== expected.policy) return `it was saved under ${header.policy}, now ${expected.policy}`;
    if (header.cells !== expected.cells) return `it was saved with a budget of ${header.cells} cells, now ${expected.cells}`;
    if (header.settingsHash !== expected.settingsHash) return "the compression settings changed since it was saved";
    return null;
}

export function encodeTokens(tokens: readonly number[]): string {
    return Buffer.from(Uint32Array.from(tokens).buffer).toString("base64");
}

export function decodeTokens(encoded: string, count: number): number[] | null {
    const bytes = Buffer.from(encoded, "base64");
    if (bytes.byteLength !== count * 4) return null;
    const tokens: number[] = [];
    for (let i = 0; i < count; i++) tokens.push(bytes.readUInt32LE(i * 4));
    return tokens;
}

/** SHA-256 of tokens, hex: the path of messages a state holds. */
export function hashTokens(tokens: readonly number[]): string {
    return createHash("sha256")
        .update(Buffer.from(Uint32Array.from(tokens).buffer))
        .digest("hex");
}

/** SHA-256 of a value's JSON with sorted keys. */
export function hashSettings(value: unknown): string {
    return createHash("sha256").update(stableJson(value)).digest("hex");
}

function stableJson(value: unknown): string {
    if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
    if (value != null && typeof value === "object")
        return `{${Object.keys(value)
            .sort()
            .map((key) => `${JSON.stringify(key)}:${stableJson((value as Record<string, unknown>)[key])}`)
            .join(",")}}`;
    return JSON.stringify(value) ?? "null";
}

/** JSON of a value whose typed arrays come back as typed arrays (`reviveTyped`). */
export function tagTyped(value: unknown): unknown {
    if (value instanceof Float64Array) return {$typed: "f64", values: Array.from(value)};
    if (value instanceof Float32Array) return {$typed: "f32", values: Array.from(value)};
    if (value instanceof Int32Array) return {$typed: "i32", values: Array.from(value)};
    if (Array.isArray(value)) return value.map(tagTyped);
    if (value != null && typeof value === "object")
        return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, tagTyped(entry)]));
    return value;
}

export function reviveTyped(value: unknown): unknown {
    if (Array.isArray(value)) return value.map(reviveTyped);
    if (value != null && typeof value === "object") {
        const tagged = value as {$typed?: unknown; values?: unknown};
        if (typeof tagged.$typed === "string" && Array.isArray(tagged.values)) {
            const values = tagged.values as number[];
            if (tagged.$typed === "f64") return Float64Array.from(values);
            if (tagged.$typed === "f32") return Float32Array.from(values);
            if (tagged.$typed === "i32") return Int32Array.from(values);
        }
        return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, reviveTyped(entry)]));
    }
    return value;
}

function isHeader(value: unknown): value is StateHeader {
    if (value == null || typeof value !== "object") return false;
    const h = value as Record<string, unknown>;
    const model = h.model as Record<string, unknown> | null;
    const count = (key: string) => Number.isSafeInteger(h[key]) && (h[key] as number) >= 0;
    return (
        (h.kind === "answer" || h.kind === "prompt") &&
        model != null &&
        typeof model === "object" &&
        typeof model.path === "string" &&
        typeof model.size === "number" &&
        typeof model.mtimeMs === "number" &&
        typeof h.pathHash === "string" &&
        typeof h.tokens === "string" &&
        typeof h.kvType === "string" &&
        typeof h.kvTypeV === "string" &&
        typeof h.flashAttention === "boolean" &&
        typeof h.policy === "string" &&
        typeof h.settingsHash === "string" &&
        typeof h.payloadSha256 === "string" &&
        [
            "tokenCount",
            "cells",
            "liveCells",
            "bytesPerCell",
            "llamaBytes",
            "scoreBytes",
            "scoreLayers",
            "scoreHeads",
            "retentionBytes",
            "retentionLayers",
            "retentionHeads",
            "valueNormBytes",
            "valueNormLayers",
            "valueNormHeads"
        ].every(count)
    );
}
