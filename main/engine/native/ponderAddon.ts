// The one place that reaches into node-llama-cpp's internals for Ponder's native API: the addon bindings of a Llama
// (`llama._bindings`), the AddonContext of a LlamaContext (`context._ctx`), the context size node-llama-cpp counts
// positions against (`context._contextSize`) and the decode step of a sequence (`sequence._decodeTokens`). All are
// internal to node-llama-cpp 3.22.1 (pinned), as is a sequence's id (`sequence._sequenceId`); native/patches/0003 adds the
// `ponder*` members.
import type {Llama, LlamaContext, LlamaContextSequence} from "node-llama-cpp";
import type {CapturedNorms, ReadHorizons, RetentionGates, RetentionLogits, ValueNorms} from "./types.js";

/**
 * Native API version this code needs; matches PONDER_PATCH_VERSION in native/patches (addon/PonderKv.h). Version 4 added
 * the retention gates and writing scores back (patches 0007-0008), version 5 the RPC servers (patches 0009-0010), version 6
 * the read horizons and the capture of attn_norm rows (patches 0012-0013), version 7 moving single KV heads between cells
 * (patches 0015-0016).
 */
export const PONDER_PATCH_VERSION = 7;

export type PonderBindings = {
    ponderPatchVersion?: number;
    ponderSeriesHash?: string;
    /** The RPC protocol the build speaks; `null` without an RPC backend (patch 0010). */
    ponderRpcProtocol?: () => {major: number; minor: number; patch: number} | null;
    /**
     * Connects to an rpc-server ("host:port") and registers its devices for models loaded afterwards; aborts the process
     * (ggml) when it cannot be reached: check it first (main/engine/rpc/probeRpcServer.ts). Patch 0010.
     */
    ponderRpcAddServer?: (endpoint: string) => PonderRpcDevice[];
    /** Every registered device, local and remote, in llama.cpp's order (patch 0010). */
    ponderListDevices?: () => PonderRpcDevice[];
};

export type PonderRpcDevice = {
    name: string;
    description: string;
    type: "cpu" | "gpu" | "igpu" | "accel" | "unknown";
    /** The ggml backend registry it belongs to ("CPU", "CUDA", "RPC[host:port]"). */
    backend: string;
    freeBytes: number;
    totalBytes: number;
};

export type PonderAddonKvStats = {
    cellsAllocated: number;
    cellsUsed: number;
    bytesPerCell: number;
    layers: number;
    tokensEvicted: number;
    pruneCalls: number;
    scoring: boolean;
};

export type PonderAddonScores = {
    /** Position of each live cell of the sequence, in cell order (`n` cells). */
    positions: Int32Array;
    /** Heads of the scores (the query heads; the most of any layer). */
    heads: number;
    /** Per layer, `heads * n` floats, head-major: `[h * n + j]` is head h's score of cell j. */
    accumulated: Float32Array[];
    /** Same layout as `accumulated`: the scores of the last decode. */
    last: Float32Array[];
};

/** What the native context reports of the retention gates it loaded: all but the file, which `NativeKv` keeps. */
export type PonderAddonRetentionGates = Omit<RetentionGates, "path">;

export type PonderAddonContext = {
    ponderEvict(sequenceId: number, positions: Int32Array): number;
    /**
     * Per-head cells: `moves` holds `[layer, KV head, from position, to position]` quadruples; each copies that head's K, V
     * and per-cell values (scores, gates, value norms, read horizons) from one cell of the sequence to another, all at
     * once. Throws an Error with the reason, having moved nothing, when refused. Added by native/patches 0015-0016.
     */
    ponderMoveHeadCells(sequenceId: number, moves: Int32Array): number;
    ponderGetKvStats(): PonderAddonKvStats;
    ponderSetAttnScore(enabled: boolean, rows: number, squared: boolean, gamma: number): void;
    ponderGetAttnScores(sequenceId: number): PonderAddonScores;
    /**
     * Writes the scores of the live cells of a sequence back (a restored state's cells start from zero): for each cell at
     * one of `positions`, its accumulated and last scores, laid out as `ponderGetAttnScores` reads them. Returns the
     * cells written. Added by native/patches 0007-0008.
     */
    ponderSetAttnScores(
        sequenceId: number,
        positions: Int32Array,
        heads: number,
        accumulated: Float32Array[],
        last: Float32Array[]
    ): number;
    /**
     * Loads a retention gate file's tensors into the context (checked against the model's shapes; throws an Error saying
     * why not) so every token written gets a gate logit per layer and KV head, computed in the graph from the layer's
     * `attn_norm`; `null` turns them off and frees them. Added by native/patches 0008.
     */
    ponderSetRetentionGates(path: string | null): PonderAddonRetentionGates;
    /** The gate logits of the live cells of a sequence. Throws when the gates are off. Added by native/patches 0008. */
    ponderGetRetention(sequenceId: number): RetentionLogits;
    /** Writes gate logits back at positions, in `ponderGetRetention`'s layout; returns the cells written (patch 0008). */
    ponderSetRetention(sequenceId: number, positions: Int32Array, heads: number, logits: Float32Array[]): number;
    /**
     * While on, every token written gets, per layer and KV head, the L1 norm of its value vector (computed in the graph from
     * the layer's V before it is stored), kept per cell; off frees them. Throws an Error with the reason when unsupported.
     * Added by native/patches 0007-0008 (LAVa).
     */
    ponderSetValueNorms(enabled: boolean): void;
    /** The value norms of the live cells of a sequence. Throws when they are off. */
    ponderGetValueNorms(sequenceId: number): ValueNorms;
    /** Writes value norms back at positions, in `ponderGetValueNorms`' layout; returns the cells written. */
    ponderSetValueNormCells(sequenceId: number, positions: Int32Array, heads: number, norms: Float32Array[]): number;
    /**
     * While on, every decode keeps per cell, layer and KV head the last position whose query put at least `threshold` (in
     * (0, 1]) of one query head's attention on the cell, the most over the KV head's query heads; off frees them. Throws an
     * Error with the reason when unsupported. Added by native/patches 0012-0013.
     */
    ponderSetReadHorizon(enabled: boolean, threshold: number): void;
    /** The read horizons of the live cells of a sequence. Throws when they are off (patch 0013). */
    ponderGetReadHorizon(sequenceId: number): ReadHorizons;
    /** While on, every decode keeps each layer's attn_norm row of each decoded token (F16, host memory) until taken (patch 0013). */
    ponderSetAttnNormCapture(enabled: boolean): void;
    /** The attn_norm rows captured since the last take; forgets them (patch 0013). */
    ponderTakeCapturedNorms(): CapturedNorms;
    /** The device of each repeating layer of the model (weights, and KV cache when offloaded) and of the output layer (patch 0010). */
    ponderLayerDevices?(): {layers: string[]; output: string};
};

type WithBindings = {_bindings?: PonderBindings};
type WithAddonContext = {_ctx?: Partial<PonderAddonContext>};

export function ponderBindingsOf(llama: Llama): PonderBindings {
    return (llama as unknown as WithBindings)._bindings ?? {};
}

/** The AddonContext of `context` with Ponder's methods, or `null` when the loaded binary does not have them. */
export function ponderContextOf(context: LlamaContext): PonderAddonContext | null {
    const addonContext = (context as unknown as WithAddonContext)._ctx;
    if (addonContext == null) return null;

    const methods = ["ponderEvict", "ponderGetKvStats", "ponderSetAttnScore", "ponderGetAttnScores"] as const;
    if (!methods.every((method) => typeof addonContext[method] === "function")) return null;

    return addonContext as PonderAddonContext;
}

type WithContextSize = {_contextSize: number};

/** Sets the size node-llama-cpp checks positions against (`context.contextSize`), not the KV cache's size. */
export function setLogicalContextSize(context: LlamaContext, size: number): void {
    const internal = context as unknown as WithContextSize;
    if (typeof internal._contextSize !== "number")
        throw new Error("node-llama-cpp's LlamaContext has no _contextSize: main/engine/native needs updating for this version");
    internal._contextSize = size;
}

/**
 * Asked before each decode of a sequence with the number of tokens about to be decoded (`first`: the first part of one
 * evaluation); answers how many of them to decode now (1 to `count`), after whatever it had to do first (a prune round).
 * The rest of the evaluation is asked for again, part by part.
 */
export type DecodeGate = (count: number, first: boolean) => number | Promise<number>;

type DecodeTokens = (
    tokens: number[],
    logits: (boolean | undefined)[],
    evaluationPriority: unknown,
    tokenMeter: unknown,
    contextShiftOptions: unknown,
    logitDataMapper: (batchLogitIndex: number, tokenIndex: number) => unknown,
    afterBatchAction?: unknown
) => Promise<unknown[]>;
type WithDecodeTokens = {_decodeTokens?: DecodeTokens};

/**
 * Runs `gate` before every decode of `sequence`: prompt chunks, generated tokens and node-llama-cpp's re-evaluations
 * all go through the sequence's `_decodeTokens`, which waits for the gate, so what the gate does (a prune round) never
 * overlaps a decode and happens at the same token every time. An evaluation the gate cuts is decoded in parts; each
 * part's logits and sampled tokens land where one decode would have put them. Returns a function that removes the gate.
 */
export function gateSequenceDecodes(sequence: LlamaContextSequence, gate: DecodeGate): () => void {
    const internal = sequence as unknown as WithDecodeTokens;
    const decodeTokens = internal._decodeTokens;
    if (typeof decodeTokens !== "function")
        throw new Error("node-llama-cpp's LlamaContextSequence has no _decodeTokens: main/engine/native needs updating for this version");

    const own = Object.hasOwn(internal, "_decodeTokens");
    const original = decodeTokens.bind(sequence);
    internal._decodeTokens = async (tokens, logits, priority, meter, shift, logitDataMapper, afterBatchAction) => {
        const results: unknown[] = [];
        let done = 0;
        while (done < tokens.length) {
            const allowed = await gate(tokens.length - done, done === 0);
            const count = Math.max(1, Math.min(tokens.length - done, Math.floor(allowed)));
            const offset = done;
            const mapper = (batchLogitIndex: number, tokenIndex: number) => logitDataMapper(batchLogitIndex, tokenIndex + offset);
            const part = await original(
                tokens.slice(offset, offset + count),
                logits.slice(offset, offset + count),
                priority,
                meter,
                shift,
                mapper,
                afterBatchAction
            );
            part.forEach((value, index) => {
                results[offset + index] = value;
            });
            done += count;
        }
        return results;
    };
    return () => {
        if (own) internal._decodeTokens = decodeTokens;
        else delete internal._decodeTokens;
    };
}

type WithSequenceId = {_sequenceId?: number};

/** The llama.cpp sequence id of `sequence` (the id Ponder's read-outs take). */
export function sequenceIdOf(sequence: LlamaContextSequence): number {
    const id = (sequence as unknown as WithSequenceId)._sequenceId;
    if (typeof id !== "number")
        throw new Error("node-llama-cpp's LlamaContextSequence has no _sequenceId: main/engine/native needs updating for this version");
    return id;
}
