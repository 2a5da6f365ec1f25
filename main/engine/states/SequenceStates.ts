import {randomBytes} from "node:crypto";
import fs from "node:fs/promises";
import type {LlamaContextSequence} from "node-llama-cpp";
import type {NativeKv} from "../native/NativeKv.js";
import type {KvHeadCells} from "../native/types.js";
import {
    checkStateHeader,
    decodeTokens,
    encodeStateFile,
    encodeTokens,
    hashTokens,
    readStateHeader,
    StateFileError,
    stateFilePrefixBytes,
    stateHeaderLength,
    verifyStatePayload,
    type StateExpectation,
    type StateHeader,
    type StateKind
} from "./stateFile.js";

/** A state file saved: where, its size on disk, and its KV against Full's for the same tokens. */
export type SavedState = {path: string; bytes: number; tokens: number; liveCells: number; liveBytes: number; fullBytes: number};

/** A state file that matches what is asked, with its tokens (read from its header, not yet checked against its payload). */
export type StateCandidate = {path: string; header: StateHeader; tokens: number[]};

/**
 * Saves the sequence's state (llama.cpp's cells with their positions, gaps included) with, when `withScores`, the native
 * per-cell scores, when `withRetention`, the retention gates' logits, when `withValueNorms`, the cells' value norms (LAVa),
 * and the controller's state, to `path`: written under
 * a temporary name, then renamed. Call it where no decode can run (the engine's lock); node-llama-cpp takes the context's
 * lock for the save itself.
 */
export async function saveSequenceState(options: {
    sequence: LlamaContextSequence;
    kv: NativeKv | null;
    path: string;
    kind: StateKind;
    expectation: StateExpectation;
    withScores: boolean;
    withRetention?: boolean;
    withValueNorms?: boolean;
    controller: unknown;
}): Promise<SavedState> {
    const {sequence, kv, path, kind, expectation} = options;
    const temp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
    const llamaTemp = `${temp}.llama`;
    try {
        const tokens = sequence.contextTokens.slice();
        await sequence.saveStateToFile(llamaTemp);
        const stats = kv != null ? await kv.stats() : null;
        const snapshot = options.withScores && kv != null ? await kv.scores(0) : null;
        const scores = packReadout(snapshot, (read) => read.layers.map((layer) => [layer.accumulated, layer.last]));
        const gates = options.withRetention === true && kv != null ? await kv.retention(0) : null;
        const retention = packReadout(gates, (read) => read.logits.map((logits) => [logits]));
        const norms = options.withValueNorms === true && kv != null ? await kv.valueNorms(0) : null;
        const valueNorms = packReadout(norms, (read) => read.norms.map((values) => [values]));
        const llama = await fs.readFile(llamaTemp);
        const liveCells = stats?.cellsUsed ?? tokens.length;
        const bytesPerCell = stats?.bytesPerCell ?? 0;
        const parts = encodeStateFile(
            {
                kind,
                ...expectation,
                pathHash: hashTokens(tokens),
                tokens: encodeTokens(tokens),
                tokenCount: tokens.length,
                liveCells,
                bytesPerCell,
                scoreLayers: snapshot?.layers.length ?? 0,
                scoreHeads: snapshot?.heads ?? 0,
                retentionLayers: gates?.logits.length ?? 0,
                retentionHeads: gates?.heads ?? 0,
                valueNormLayers: norms?.norms.length ?? 0,
                valueNormHeads: norms?.heads ?? 0,
                controller: options.controller
            },
            llama,
            scores,
            retention,
            valueNorms
        );
        await fs.writeFile(temp, parts);
        await fs.rename(temp, path);
        const bytes = parts.reduce((sum, part) => sum + part.byteLength, 0);
        return {
            path,
            bytes,
            tokens: tokens.length,
            liveCells,
            liveBytes: liveCells * bytesPerCell,
            fullBytes: tokens.length * bytesPerCell
        };
    } finally {
        await fs.rm(llamaTemp, {force: true});
        await fs.rm(temp, {force: true});
    }
}

/**
 * Of `paths`, the state whose header says it was made as `expectation` asks, of `kind`, that spares the most reading: the
 * largest `reach` (the tokens of the prompt it holds; 0 when it cannot be used), the earliest in `paths` among equals;
 * `notes` collects why others were refused (a missing file is no note). Stops at a state that reaches `complete` tokens.
 */
export async function findStateCandidate(
    paths: readonly string[],
    kind: StateKind,
    expectation: StateExpectation,
    reach: (tokens: number[]) => number,
    notes: string[],
    complete = Infinity
): Promise<StateCandidate | null> {
    let best: {candidate: StateCandidate; reach: number} | null = null;
    for (const path of paths) {
        try {
            const {header} = await readHeaderOf(path);
            if (header.kind !== kind) continue;
            const mismatch = checkStateHeader(header, expectation);
            if (mismatch != null) {
                notes.push(`the saved state does not fit: ${mismatch}`);
                continue;
            }
            const tokens = decodeTokens(header.tokens, header.tokenCount);
            if (tokens == null || hashTokens(tokens) !== header.pathHash) {
                notes.push("the saved state is damaged (its tokens)");
                continue;
            }
            const reached = reach(tokens);
            if (reached > 0 && reached > (best?.reach ?? 0)) best = {candidate: {path, header, tokens}, reach: reached};
            if (reached >= complete) break;
        } catch (err) {
            if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
            notes.push(
                err instanceof StateFileError
                    ? `the saved state was refused: ${err.message}`
                    : `the saved state could not be read: ${(err as Error).message}`
            );
        }
    }
    return best?.candidate ?? null;
}

/** Writes per-cell values back at their positions (`layers`: per layer, the arrays `packScores` packed). */
export type RestoreCells = (positions: Int32Array, heads: number, layers: Float32Array[][]) => Promise<void>;

/**
 * Loads a candidate into `sequence`: the payload is checked against the header's checksum before llama.cpp sees it;
 * the scores, the retention gates' logits and the value norms (when the state has them) are written back with `restore`. Throws
 * `StateFileError` for a file that is not what its header says; the sequence is then empty (llama.cpp clears it on a
 * failed load).
 */
export async function restoreSequenceState(
    sequence: LlamaContextSequence,
    candidate: StateCandidate,
    restore: {scores: RestoreCells | null; retention: RestoreCells | null; valueNorms?: RestoreCells | null}
): Promise<void> {
    const file = await fs.readFile(candidate.path);
    const {header, payloadOffset} = readStateHeader(file, file.byteLength);
    if (header.payloadSha256 !== candidate.header.payloadSha256) throw new StateFileError("the state file changed while it was read");
    const payload = file.subarray(payloadOffset);
    verifyStatePayload(header, payload);
    const scores =
        header.scoreBytes > 0
            ? unpackScores(
                  payload.subarray(header.llamaBytes, header.llamaBytes + header.scoreBytes),
                  header.liveCells,
                  header.scoreHeads,
                  header.scoreLayers,
                  2
              )
            : null;
    const retentionStart = header.llamaBytes + header.scoreBytes;
    const retention =
        header.retentionBytes > 0
            ? unpackScores(
                  payload.subarray(retentionStart, retentionStart + header.retentionBytes),
                  header.liveCells,
                  header.retentionHeads,
                  header.retentionLayers,
                  1
              )
            : null;
    const valueNorms =
        header.valueNormBytes > 0
            ? unpackScores(
                  payload.subarray(retentionStart + header.retentionBytes),
                  header.liveCells,
                  header.valueNormHeads,
                  header.valueNormLayers,
                  1
              )
            : null;
    if (scores != null && restore.scores == null) throw new StateFileError("this engine build cannot write scores back");
    if (retention != null && restore.retention == null)
        throw new StateFileError("the retention gates are not loaded: their values cannot be written back");
    if (valueNorms != null && restore.valueNorms == null) throw new StateFileError("the value norms are off: they cannot be written back");
    const temp = `${candidate.path}.${randomBytes(6).toString("hex")}.load.tmp`;
    try {
        await fs.writeFile(temp, payload.subarray(0, header.llamaBytes));
        await sequence.loadStateFromFile(temp, {acceptRisk: true});
    } finally {
        await fs.rm(temp, {force: true});
    }
    const loaded = sequence.contextTokens;
    if (loaded.length !== candidate.tokens.length || loaded.some((token, i) => token !== candidate.tokens[i]))
        throw new StateFileError("llama.cpp's state holds other tokens than the header says");
    if (scores != null) await restore.scores!(scores.positions, header.scoreHeads, scores.layers);
    if (retention != null) await restore.retention!(retention.positions, header.retentionHeads, retention.layers);
    if (valueNorms != null) await restore.valueNorms!(valueNorms.positions, header.valueNormHeads, valueNorms.layers);
}

async function readHeaderOf(path: string): Promise<{header: StateHeader; payloadOffset: number}> {
    const handle = await fs.open(path, "r");
    try {
        const {size} = await handle.stat();
        const prefix = Buffer.alloc(stateFilePrefixBytes);
        await handle.read(prefix, 0, prefix.byteLength, 0);
        const length = stateHeaderLength(prefix);
        if (length == null) return readStateHeader(prefix, size);
        const bytes = Buffer.alloc(Math.min(length, size));
        await handle.read(bytes, 0, bytes.byteLength, 0);
        return readStateHeader(bytes, size);
    } finally {
        await handle.close();
    }
}

/**
 * Positions (i32), then per layer its arrays (f32, `heads * n` each): the accumulated and the last scores, the retention
 * gates' logits, or the value norms.
 */
export function packScores(positions: Int32Array, heads: number, layers: Float32Array[][]): Uint8Array {
    const n = positions.length;
    const out = new Uint8Array(4 * n + layers.reduce((sum, arrays) => sum + arrays.length, 0) * heads * n * 4);
    const view = new DataView(out.buffer);
    positions.forEach((position, i) => view.setInt32(4 * i, position, true));
    let offset = 4 * n;
    for (const pair of layers) {
        for (const values of pair) {
            for (let i = 0; i < heads * n; i++, offset += 4) view.setFloat32(offset, values[i] ?? 0, true);
        }
    }
    return out;
}

/** `packScores` of a read-out, each layer's arrays picked by `arrays`; no bytes when nothing was read. */
function packReadout<Read extends KvHeadCells>(read: Read | null, arrays: (read: Read) => Float32Array[][]): Uint8Array {
    return read == null ? new Uint8Array(0) : packScores(read.positions, read.heads, arrays(read));
}

/** `packScores`' bytes back: `perLayer` arrays of `heads * n` floats per layer. */
export function unpackScores(
    bytes: Uint8Array,
    n: number,
    heads: number,
    layerCount: number,
    perLayer: number
): {positions: Int32Array; layers: Float32Array[][]} {
    const size = heads * n;
    if (bytes.byteLength !== 4 * n + layerCount * perLayer * size * 4)
        throw new StateFileError("the state file's per-cell values do not match its header");
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const positions = new Int32Array(n);
    for (let i = 0; i < n; i++) positions[i] = view.getInt32(4 * i, true);
    let offset = 4 * n;
    const layers: Float32Array[][] = [];
    for (let l = 0; l < layerCount; l++) {
        const arrays = Array.from({length: perLayer}, () => new Float32Array(size));
        for (const values of arrays) {
            for (let i = 0; i < size; i++, offset += 4) values[i] = view.getFloat32(offset, true);
        }
        layers.push(arrays);
    }
    return {positions, layers};
}
