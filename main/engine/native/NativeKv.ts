import {withLock} from "lifecycle-utils";
import type {LlamaContext} from "node-llama-cpp";
import {tableOfShape, type HeadSlots} from "../pruning/HeadSlots.js";
import {PATCHED_BUILD_MESSAGE} from "./loadPatchedLlama.js";
import {ponderContextOf, setLogicalContextSize, type PonderAddonContext} from "./ponderAddon.js";
import type {
    CapturedNorms,
    KvStats,
    ReadHorizonSnapshot,
    RetentionGates,
    RetentionSnapshot,
    ScoreSnapshot,
    ScoringOptions,
    ValueNormSnapshot
} from "./types.js";

/**
 * Ponder's native KV API on one LlamaContext: attention scoring, batched eviction that keeps the positions of the
 * remaining tokens, memory read-outs, (API version 4) TRIM-KV's learned retention gates, and LAVa's value norms.
 *
 * Every call runs under node-llama-cpp's own lock of the context (the one its decode queue takes), so it never
 * overlaps a decode; natively, the decode worker and these calls also share a mutex.
 */
export class NativeKv {
    private readonly _context: LlamaContext;
    private readonly _addon: PonderAddonContext;
    private readonly _originalContextSize: number;
    private _disposed = false;
    private _retention: RetentionGates | null = null;
    private _valueNorms = false;
    private _readThreshold: number | null = null;
    private _normCapture = false;
    /** Per sequence, which token each (layer, KV head) holds in each cell once heads have moved (per-head cells). */
    private readonly _headSlots = new Map<number, HeadSlots>();

    public constructor(context: LlamaContext) {
        const addon = ponderContextOf(context);
        if (addon == null) throw new Error(`${PATCHED_BUILD_MESSAGE} (this context's binary has no Ponder KV API)`);

        this._context = context;
        this._addon = addon;
        this._originalContextSize = context.contextSize;
    }

    public get context(): LlamaContext {
        return this._context;
    }

    public get disposed(): boolean {
        return this._disposed || this._context.disposed;
    }

    /**
     * Turns attention scoring on or off. On: every decode adds, per layer and query head, the attention each live cell
     * receives from the last `rows` query rows, summed over the rows, into `s = gamma * s + a`, inside the compute
     * graph (on the device; nothing is read back until `scores()`). Off (the default): no extra graph nodes, no cost,
     * and the scores are freed. A change rebuilds the compute graph at the next decode; changing `gamma`, `rows` or
     * `squared` while on keeps the accumulated scores.
     */
    public async configureScoring(options: ScoringOptions): Promise<void> {
        const {enabled, gamma = 1, rows = 1, squared = false} = options;
        if (!Number.isFinite(gamma) || gamma < 0 || gamma > 1) throw new RangeError(`gamma must be within [0, 1], got ${gamma}`);
        if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`rows must be a positive integer, got ${rows}`);

        await this._withContextLock(() => this._addon.ponderSetAttnScore(enabled, rows, squared, gamma));
    }

    /** The gates loaded now, or `null` when they are off. */
    public get retentionGates(): RetentionGates | null {
        return this._retention;
    }

    /**
     * Loads the retention gate file at `path` (checked beforehand by `findRetentionGates`) so every token written from now on
     * gets a gate logit per layer and KV head, or, with `null`, turns the gates off and frees them. The same file again
     * keeps the gates loaded. Throws when the engine refuses the file (its message says why); the context is unchanged then.
     */
    public async configureRetention(path: string | null): Promise<RetentionGates | null> {
        if (path === (this._retention?.path ?? null)) return this._retention;
        const loaded = await this._withContextLock(() => this._addon.ponderSetRetentionGates(path));
        this._retention = path == null ? null : {path, layers: loaded.layers, heads: loaded.heads, bytes: loaded.bytes};
        return this._retention;
    }

    /**
     * The gate logits of the live cells of `sequenceId`, per layer and KV head, with their positions (the cells of
     * `scores()`, in the same order). One read from the device per call: call it per prune round. Throws when the gates
     * are off.
     */
    public async retention(sequenceId: number = 0): Promise<RetentionSnapshot> {
        const raw = await this._withContextLock(() => this._addon.ponderGetRetention(sequenceId));
        return {sequenceId, positions: raw.positions, heads: raw.heads, logits: raw.logits};
    }

    /**
     * Writes back the gate logits of the live cells of `sequenceId` found at `positions` (the layout of `retention()`), for
     * a state loaded from disk, whose cells llama.cpp restores as never forgotten. The gates must be loaded. Returns the
     * cells written.
     */
    public async restoreRetention(sequenceId: number, positions: Int32Array, heads: number, logits: Float32Array[]): Promise<number> {
        return await this._withContextLock(() => this._addon.ponderSetRetention(sequenceId, positions, heads, logits));
    }

    /** Whether the cells' value norms are on (`configureValueNorms`). */
    public get valueNormsOn(): boolean {
        return this._valueNorms;
    }

    /**
     * Turns the value norms on or off: while on, every token written gets the L1 norm of its value vector per layer and KV
     * head, computed in the graph (LAVa's ||V||_1); off frees them. Asking for the state it is in does nothing. Throws when
     * the engine cannot (its message says why); the context is unchanged then.
     */
    public async configureValueNorms(enabled: boolean): Promise<void> {
        if (enabled === this._valueNorms) return;
        await this._withContextLock(() => this._addon.ponderSetValueNorms(enabled));
        this._valueNorms = enabled;
    }

    /**
     * The value norms of the live cells of `sequenceId`, per layer and KV head, with their positions (the cells of `scores()`,
     * in the same order). One read from the device per call: call it per prune round. Throws when they are off.
     */
    public async valueNorms(sequenceId: number = 0): Promise<ValueNormSnapshot> {
        const raw = await this._withContextLock(() => this._addon.ponderGetValueNorms(sequenceId));
        return {sequenceId, positions: raw.positions, heads: raw.heads, norms: raw.norms};
    }

    /**
     * Writes back the value norms of the live cells of `sequenceId` found at `positions` (the layout of `valueNorms()`), for
     * a state loaded from disk, whose cells llama.cpp restores with none. The norms must be on. Returns the cells written.
     */
    public async restoreValueNorms(sequenceId: number, positions: Int32Array, heads: number, norms: Float32Array[]): Promise<number> {
        return await this._withContextLock(() => this._addon.ponderSetValueNormCells(sequenceId, positions, heads, norms));
    }

    /** The read threshold of the read horizons, or `null` when they are off (`configureReadHorizon`). */
    public get readThreshold(): number | null {
        return this._readThreshold;
    }

    /**
     * Turns the read horizons on with `threshold` (in (0, 1]) or off with `null`: while on, every decode keeps per cell, layer
     * and KV head the last position whose query put at least `threshold` of one query head's attention on the cell (the
     * most over the KV head's query heads), computed in the graph from the attention weights of every query row; off frees
     * them. A new threshold keeps what was kept. Throws when the engine cannot (its message says why).
     */
    public async configureReadHorizon(threshold: number | null): Promise<void> {
        if (threshold === this._readThreshold) return;
        if (threshold != null && !(threshold > 0 && threshold <= 1))
            throw new RangeError(`the read threshold must be within (0, 1], got ${threshold}`);
        await this._withContextLock(() => this._addon.ponderSetReadHorizon(threshold != null, threshold ?? 0.5));
        this._readThreshold = threshold;
    }

    /** The read horizons of the live cells of `sequenceId`, per layer and KV head. One read from the device per call. */
    public async readHorizon(sequenceId: number = 0): Promise<ReadHorizonSnapshot> {
        const raw = await this._withContextLock(() => this._addon.ponderGetReadHorizon(sequenceId));
        return {sequenceId, positions: raw.positions, heads: raw.heads, last: raw.last};
    }

    /** Whether attn_norm rows are captured (`configureNormCapture`). */
    public get normCaptureOn(): boolean {
        return this._normCapture;
    }

    /**
     * Turns the capture of attn_norm rows on or off: while on, every decode keeps each layer's attn_norm row of each token
     * it decodes (the retention gates' input), F16 in host memory, until `takeCapturedNorms()`; take them after every decode
     * to bound the memory (tokens x layers x width x 2 bytes). Off frees them.
     */
    public async configureNormCapture(enabled: boolean): Promise<void> {
        if (enabled === this._normCapture) return;
        await this._withContextLock(() => this._addon.ponderSetAttnNormCapture(enabled));
        this._normCapture = enabled;
    }

    /** The attn_norm rows captured since the last take, with the tokens' positions; forgets them. */
    public async takeCapturedNorms(): Promise<CapturedNorms> {
        return await this._withContextLock(() => this._addon.ponderTakeCapturedNorms());
    }

    /**
     * Frees the cells of `sequenceId` at `positions`, in one pass over the cells; the remaining tokens keep their
     * positions (no K re-rotation). Refuses position 0 and the sequence's newest token. Returns the tokens removed.
     *
     * node-llama-cpp's own bookkeeping (`sequence.contextTokens`, `nextTokenIndex`) still counts evicted tokens.
     */
    public async evict(sequenceId: number, positions: Iterable<number>): Promise<number> {
        const list = positions instanceof Int32Array ? positions : Int32Array.from(positions);
        if (list.length === 0) return 0;

        return await this._withContextLock(() => this._addon.ponderEvict(sequenceId, list));
    }

    /**
     * Per-head cells: copies, for single (layer, KV head) pairs, a cell's K and V and the values kept with them into
     * another cell of the sequence (`moves`: `[layer, head, from, to]` quadruples, cells named by their positions), all
     * sources read before any destination is written. The cells keep their positions: which token each head then holds
     * where is the caller's to record (`HeadSlots`). Returns the moves made; throws with the reason, moving nothing.
     */
    public async moveHeadCells(sequenceId: number, moves: Int32Array | number[]): Promise<number> {
        const list = moves instanceof Int32Array ? moves : Int32Array.from(moves);
        if (list.length === 0) return 0;

        return await this._withContextLock(() => this._addon.ponderMoveHeadCells(sequenceId, list));
    }

    /**
     * The per-head table of a sequence's cells (`moveHeadCells` moves contents; the table says which token each head then
     * holds where): one per sequence for the context's life; `undefined` until a per-head round made one.
     */
    public existingHeadSlots(sequenceId: number): HeadSlots | undefined {
        return this._headSlots.get(sequenceId);
    }

    /** The per-head table of a sequence (`tableOfShape`). */
    public headSlots(sequenceId: number, layers: number, heads: number): HeadSlots {
        const table = tableOfShape(this._headSlots.get(sequenceId), layers, heads);
        this._headSlots.set(sequenceId, table);
        return table;
    }

    /**
     * The model's KV heads (the most of any layer, from its header): what per-head cells keep apart. Throws when the header
     * names none.
     */
    public get kvHeads(): number {
        const attention = this._context.model.fileInfo.architectureMetadata?.attention as
            {head_count_kv?: number | number[]; head_count?: number | number[]} | undefined;
        const count = attention?.head_count_kv ?? attention?.head_count;
        const most = Array.isArray(count) ? Math.max(...count) : count;
        if (most == null || !Number.isInteger(most) || most < 1)
            throw new Error("per-head cells need the model's KV head count, and its header names none");
        return most;
    }

    /** Cells allocated and live, their size, the eviction counters and the number of layers. */
    public async stats(): Promise<KvStats> {
        const stats = await this._withContextLock(() => this._addon.ponderGetKvStats());
        return {
            ...stats,
            bytesAllocated: stats.cellsAllocated * stats.bytesPerCell,
            bytesUsed: stats.cellsUsed * stats.bytesPerCell
        };
    }

    /**
     * Per-layer, per-head scores of the live cells of `sequenceId` (accumulated and last decode), with their
     * positions: each layer's arrays hold `heads * n` floats, head-major (`[h * n + j]` for cell j). One read of the
     * scores from the device per call: call it per prune round, not per token.
     */
    public async scores(sequenceId: number = 0): Promise<ScoreSnapshot> {
        const raw = await this._withContextLock(() => this._addon.ponderGetAttnScores(sequenceId));
        const size = raw.heads * raw.positions.length;
        return {
            sequenceId,
            positions: raw.positions,
            heads: raw.heads,
            layers: raw.accumulated.map((accumulated, layer) => ({
                layer,
                positions: raw.positions,
                heads: raw.heads,
                accumulated,
                last: raw.last[layer] ?? new Float32Array(size)
            }))
        };
    }

    /**
     * Writes back the accumulated and last scores of the live cells of `sequenceId` found at `positions` (the layout of
     * `scores()`), for a state loaded from disk, whose cells llama.cpp restores with zero scores. Scoring must be on.
     */
    public async restoreScores(
        sequenceId: number,
        positions: Int32Array,
        heads: number,
        layers: [Float32Array, Float32Array][]
    ): Promise<number> {
        return await this._withContextLock(() =>
            this._addon.ponderSetAttnScores(
                sequenceId,
                positions,
                heads,
                layers.map(([accumulated]) => accumulated),
                layers.map(([, last]) => last)
            )
        );
    }

    /**
     * node-llama-cpp counts positions, not live cells: once a sequence's next position reaches `context.contextSize`,
     * it shifts the context (erases the oldest tokens and re-rotates K for every later one). `evict` frees cells but
     * keeps positions, so let positions run up to `limit` instead (the model's training context, say). The KV cache
     * still has `cellsAllocated` cells: a decode that finds none free fails ("could not find a KV slot"), so evict
     * before they run out. This changes what node-llama-cpp reports as `contextSize` for the whole context, and
     * therefore how much chat history LlamaChat fits. `dispose()` restores it.
     */
    /** The context's own size, the position limit before any `setPositionLimit`. */
    public get originalContextSize(): number {
        return this._originalContextSize;
    }

    public setPositionLimit(limit: number): void {
        if (!Number.isInteger(limit) || limit < this._originalContextSize)
            throw new RangeError(
                `the position limit must be an integer of at least the context size (${this._originalContextSize}), got ${limit}`
            );
        if (this.disposed) throw new Error("NativeKv is disposed");

        setLogicalContextSize(this._context, limit);
    }

    /**
     * Stops using the context: scoring, the retention gates, the value norms, the read horizons and the capture are turned
     * off and the position limit restored; later calls throw.
     */
    public async dispose(): Promise<void> {
        if (this._disposed) return;

        this._disposed = true;
        setLogicalContextSize(this._context, this._originalContextSize);
        if (!this._context.disposed) {
            await withLock([this._context, "context"], () => {
                if (this._context.disposed) return;
                this._addon.ponderSetAttnScore(false, 1, false, 1);
                if (this._retention != null) this._addon.ponderSetRetentionGates(null);
                if (this._valueNorms) this._addon.ponderSetValueNorms(false);
                if (this._readThreshold != null) this._addon.ponderSetReadHorizon(false, 0.5);
                if (this._normCapture) this._addon.ponderSetAttnNormCapture(false);
            });
            this._retention = null;
            this._valueNorms = false;
            this._readThreshold = null;
            this._normCapture = false;
        }
    }

    private async _withContextLock<T>(fn: () => T): Promise<T> {
        if (this.disposed) throw new Error("NativeKv is disposed");

        return await withLock([this._context, "context"], () => {
            if (this.disposed) throw new Error("NativeKv is disposed");
            return fn();
        });
    }
}
