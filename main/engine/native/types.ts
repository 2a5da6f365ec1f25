// Types of Ponder's native KV API (the patched llama.cpp build made by native/build.mjs).

/** GPU backend to load, as node-llama-cpp names it; `"auto"` takes the best local build present. */
export type NativeGpu = "auto" | "cuda" | "metal" | "vulkan" | false;

export type NativeBuildInfo = {
    /** `"local"`: built from source by native/build.mjs (or node-llama-cpp's own build); `"prebuilt"`: a shipped binary. */
    kind: "local" | "prebuilt";
    /** GPU backend of the loaded build: `false` for CPU only. */
    gpu: "cuda" | "metal" | "vulkan" | false;
    /** Whether the loaded binary carries Ponder's native API at the version this code needs. */
    patched: boolean;
    /** llama.cpp release the binary was built from (node-llama-cpp's tag, e.g. `"v0.5.0"`). */
    llamaCppRelease: string;
    /** Hash of the patch series compiled into the binary (see native/seriesHash.mjs); `null` when unpatched. */
    seriesHash: string | null;
    /** Native API version of the binary; `null` when unpatched. */
    patchVersion: number | null;
};

export type ScoringOptions = {
    /**
     * Adds the scoring branch to every layer's graph; the per-head scores are accumulated in the graph, on the device,
     * and read only by `scores()`. Turning it off frees them; changing the other options while on keeps them.
     */
    enabled: boolean;
    /** Decay of the accumulator, s = gamma * s + a (Lethe RASR, Eq. 5); `1` accumulates like H2O. Defaults to `1`. */
    gamma?: number;
    /**
     * Query rows scored per decode: the last `rows` tokens of each ubatch (1 during generation), summed before the
     * decay. Defaults to `1`. Up to a whole ubatch with flash attention off; with it on, the scored rows' attention is
     * recomputed (an `[n_kv, rows, heads]` side branch per layer), so keep `rows` small there (16-32).
     */
    rows?: number;
    /** Sum squared attention weights instead (ReFreeKV's squared norm of the last query row). Defaults to `false`. */
    squared?: boolean;
};

export type KvStats = {
    /** KV cells reserved by the context (all sequences). */
    cellsAllocated: number;
    /** KV cells holding at least one token. */
    cellsUsed: number;
    /** Bytes of one cell: one K row and one V row of every layer, from the cache types. */
    bytesPerCell: number;
    bytesAllocated: number;
    bytesUsed: number;
    /** Layers of the model (the length of `ScoreSnapshot.layers`). */
    layers: number;
    /** Tokens removed by `evict` since the context was created. */
    tokensEvicted: number;
    /** `evict` calls that removed tokens or not. */
    pruneCalls: number;
    /** Whether attention scoring is on. */
    scoring: boolean;
};

export type LayerScores = {
    layer: number;
    /** Position of each live cell of the sequence, in cell order (the same array for every layer); `n` cells. */
    positions: Int32Array;
    /** Query heads of the scores (`heads * n` floats per array). */
    heads: number;
    /**
     * Decayed accumulated score per head and cell, head-major: `accumulated[h * n + j]` is head h's score of cell j
     * (`s = gamma * s + a` per decode). A cell starts from 0 when it is (re)used.
     */
    accumulated: Float32Array;
    /**
     * Score of the last decode per head and cell, head-major like `accumulated`: the attention weight (or squared
     * weight) the cell received from the head, summed over the scored rows.
     */
    last: Float32Array;
};

export type ScoreSnapshot = {
    sequenceId: number;
    /** Position of each live cell of the sequence, in cell order. */
    positions: Int32Array;
    /** Query heads of every layer's scores. */
    heads: number;
    layers: LayerScores[];
};

/** The retention gates a context loaded (`NativeKv.configureRetention`). */
export type RetentionGates = {
    /** The gate file loaded. */
    path: string;
    /** Layers with gates. */
    layers: number;
    /** KV heads of the gates (the most of any layer). */
    heads: number;
    /** Device bytes of the gate weights and their per-cell storage (4 bytes per cell, layer and KV head). */
    bytes: number;
};

/**
 * The live cells of a sequence a per-layer, per-KV-head read-out covers: each layer's array holds `heads * n` values,
 * head-major (`[h * n + j]` for cell j). The native API's read-outs and the snapshots made of them share it.
 */
export type KvHeadCells = {
    /** Position of each live cell of the sequence, in cell order (`n` cells; the same cells as `ScoreSnapshot`). */
    positions: Int32Array;
    /** KV heads of the read-out: the most of any layer. */
    heads: number;
};

/** The retention gates' logits of a sequence's live cells, as the native API reads them. */
export type RetentionLogits = KvHeadCells & {
    /**
     * Per layer, gate logits g; log beta = logsigmoid(g) (TRIM-KV). Cells written while the gates were off, or restored
     * from a state, hold a huge positive logit (~3.4e38: never forgotten).
     */
    logits: Float32Array[];
};

/** The value norms of a sequence's live cells, as the native API reads them. */
export type ValueNorms = KvHeadCells & {
    /**
     * Per layer, L1 norms of the cells' value vectors (LAVa's ||V_{l,h}[k]||_1). Cells written while the norms were off,
     * or restored from a state, hold 0.
     */
    norms: Float32Array[];
};

/** The read horizons of a sequence's live cells, as the native API reads them. */
export type ReadHorizons = KvHeadCells & {
    /**
     * Per layer, positions: the last position whose query put at least the threshold of one query head's attention on the
     * cell, the most over the KV head's query heads; -1 when none has (yet), and for the padding of a layer with fewer heads.
     */
    last: Float32Array[];
};

export type RetentionSnapshot = {sequenceId: number} & RetentionLogits;

export type ValueNormSnapshot = {sequenceId: number} & ValueNorms;

export type ReadHorizonSnapshot = {sequenceId: number} & ReadHorizons;

export type CapturedNorms = {
    /** Tokens decoded since the last take (`n`). */
    tokens: number;
    layers: number;
    /** Width of a row (the model's embedding length). */
    width: number;
    /** Position of each token, in decode order. */
    positions: Int32Array;
    /** F16 bits, `[n][layers][width]`: each layer's attn_norm row of each token; NaN rows where a layer's graph has no attn_norm. */
    rows: Uint16Array;
};
