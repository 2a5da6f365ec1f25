// Compression and the KV budget: the settings, a budget's estimate, memory readings, saved states' figures.

import type {PolicyId, PolicyParams} from "../policyCatalogue.js";
import type {ErrorInfo} from "./errors.js";

/** A type of the K or the V cache; `q8_0` keys with `q4_0` values (K8V4) is LeanKV's recommended pair. */
export type KvCacheType = "f16" | "q8_0" | "q4_0";

/** The KV allocation of a conversation: a number of cells, a size in MiB, or the model's context. */
export type KvBudget = {kind: "auto"} | {kind: "cells"; cells: number} | {kind: "mib"; mib: number};

export type CompressionSettings = {
    policy: PolicyId;
    budget: KvBudget;
    /** Type of the K cache (the keys). Named when one type covered both: a setting stored without `kvTypeV` meant it for V too. */
    kvType: KvCacheType;
    /** Type of the V cache (the values); a quantized one needs flash attention. */
    kvTypeV: KvCacheType;
    flashAttention: boolean;
    /**
     * How per-layer (and per-head) selections become one set of cells to free (main/engine/policies/types.ts); `auto`,
     * the policy's own (main/engine/policies/decide.ts `resolveCombine`).
     */
    combine: "auto" | "quota" | "union" | "aggregate" | "heads";
    /** Generated tokens between prune rounds. */
    pruneEvery: number;
    params: PolicyParams;
};

/**
 * What a conversation created now starts under: `default`, the default settings (saved, or Ponder's own); `gates`, TRIM-KV
 * at a budget that prunes, for a loaded model with retention gates while no default was saved (`firstMinuteCompression`).
 */
export type NewConversationCompression = {compression: CompressionSettings; source: "default" | "gates"};

/** One reading of the KV memory of a generation: what it holds, what it has allocated, what a full cache would hold. */
export type KvSample = {
    /** Tokens generated in this answer so far. */
    step: number;
    /** Tokens in the conversation's sequence (prompt and answer, kept or not). */
    tokensSeen: number;
    cellsLive: number;
    /**
     * Most live cells after any decode of this answer so far (prompt chunks included): at most the budget for a pruning
     * policy. Absent in samples stored by older versions.
     */
    cellsPeak?: number;
    cellsAllocated: number;
    bytesPerCell: number;
    allocatedBytes: number;
    liveBytes: number;
    /** What a full cache would hold now: tokensSeen x bytesPerCell. */
    fullBytes: number;
    /** This answer's own prune rounds, tokens evicted and forced drops (its prompt's reading included). */
    pruneRounds: number;
    tokensEvicted: number;
    forcedDrops: number;
    /** Per layer, Hoyer sparsity of its attention scores (Lethe Eq. 1). */
    sparsityPerLayer: number[];
    /** Milliseconds spent reading scores and choosing cells. */
    scoringMs: number;
    /** Per-head cells: the part of `scoringMs` spent moving heads between cells and freeing cells. Absent on shared cells. */
    movingMs?: number;
    /** Bytes of the retention gates loaded (weights and per-cell log beta) while TRIM-KV runs; absent for the other policies. */
    retentionBytes?: number;
    tokensPerSecond: number;
    /**
     * Positions of the cells this answer evicted since its previous sample (a delta: the union over an answer's samples
     * is what it evicted), as `[start, end)` pairs, flat (`toRanges`). Absent in samples stored by older versions.
     */
    evicted?: number[];
    /**
     * What the prune rounds since the previous sample recorded of the cells they saw (a delta: a later record of a position
     * replaces an earlier one). Absent when no round ran since, and in samples stored by older versions.
     */
    tokens?: TokenScores;
    /** The prune rounds since the previous sample, oldest first. Absent when none ran. */
    rounds?: PruneRound[];
};

/**
 * Per token, what the last prune round that saw it recorded: its score under the policy and which layers' own ranking
 * kept it. Parallel arrays over `positions` (ascending).
 */
export type TokenScores = {
    /**
     * What `scores` hold: `retention`, TRIM-KV's retention of the token at that round (beta^age, 0..1, its largest over
     * layers and KV heads); `attention`, the attention the token had received (each layer and head's scores normalised to
     * 1, summed over them: a share of `layers x heads`); `heads`, on per-head cells, the share of (layer, KV head) pairs
     * that hold the token after the round (`keptBy`: the layers where any head holds it); `none` for a policy that keeps
     * by position alone (StreamingLLM).
     */
    kind: "retention" | "attention" | "heads" | "none";
    /** Layers of the model: bits of `keptBy`. */
    layers: number;
    positions: number[];
    /** The score at that round (4 significant digits); `null` for kind `none` or a value that was not finite. */
    scores: (number | null)[];
    /** The answer's prune round that recorded it (1 = its first). */
    rounds: number[];
    /** The layers whose own ranking kept the token at that round: hex digits, the first for layers 0-3, layer 0 its lowest bit. */
    keptBy: string[];
};

/** One of an answer's prune rounds, or several merged when an answer kept more than its cap (`first` < `last`). */
export type PruneRound = {
    /** The answer's round numbers this entry stands for (1 = its first), inclusive. */
    first: number;
    last: number;
    /** Tokens generated in this answer when the last of them ran. */
    step: number;
    /** Tokens in the conversation's sequence then (prompt and answer). */
    tokensSeen: number;
    /** Positions they evicted, as `[start, end)` pairs (`toRanges`). */
    evicted: number[];
};

/** Where a model runs on a GPU build, with its GPU layers setting. */
export type OffloadEstimate = {
    /** Layers on the GPU (`"auto"` resolved), of `totalLayers`: the repeating layers and the output layer. */
    gpuLayers: number;
    totalLayers: number;
    /** What goes to VRAM: the offloaded layers' weights (unless loaded) and KV, and the compute buffer when any is offloaded. */
    vramBytes: number;
    /** What stays in RAM: the other weights (unless loaded), the other layers' KV, the compute buffer when none is offloaded. */
    ramBytes: number;
    freeVramBytes: number;
    freeRamBytes: number;
    /** Where the offloaded layers go, in words: "the GPU", or "the RPC servers" on a CPU build using rpc-servers. */
    target: string;
    /** That place's memory, in words: "VRAM", or "their memory" for the RPC servers'. */
    memory: string;
};

/** What a budget means for a model, shown before it is applied. */
export type BudgetEstimate = {
    /** Live cells Ponder keeps at most. */
    cells: number;
    /** Cells llama.cpp reserves: the budget rounded up to its 256-cell padding. */
    allocatedCells: number;
    bytesPerCell: number;
    /** Bytes reserved: allocatedCells x bytesPerCell. */
    bytes: number;
    /** Bytes of a full cache at the model's own context length. */
    fullContextBytes: number | null;
    modelContextLength: number | null;
    /**
     * The most cells a budget may hold on this model: its trained context (`modelContextLength`), else the most Ponder
     * allocates (1,048,576). A budget above it is refused where it is set; a stored one is capped to it (`cells`).
     */
    maxCells: number;
    /** Why the budget asks for more than `maxCells` (code `BUDGET_ABOVE_CONTEXT`), or `null` when it does not. */
    aboveCap: ErrorInfo | null;
    freeMemoryBytes: number;
    /** Bytes of the model's weights (from the GGUF's tensors). */
    weightsBytes: number | null;
    /** Bytes of llama.cpp's compute buffer for this budget (its graph replayed through ggml's allocator). */
    computeBytes: number | null;
    /** Bytes of the attention scores a scoring policy (H2O, Lethe, ReFreeKV) keeps beside the KV cache; 0 for the others. */
    scoresBytes?: number;
    /**
     * Bytes of TRIM-KV's retention gates: their weights and the log beta kept per cell, layer and KV head (4 bytes each);
     * 0 for the other policies.
     */
    retentionBytes?: number;
    /** Bytes of LAVa's value norms (4 per cell, layer and KV head); 0 for the other policies. */
    valueNormBytes?: number;
    /** Policies this model cannot run, each with the reason in words (TRIM-KV without gates trained for the model). */
    unavailablePolicies?: {policy: PolicyId; reason: string}[];
    /**
     * The cells the model's TRIM-KV gates were trained at (their sidecar's `ponder.retention.budget`: config.json's
     * `memory_size` for the authors' released gates) and where the gates came from (`ponder.retention.source`), offered
     * as a starting budget when TRIM-KV is chosen; absent when the model has no gates or they do not say.
     */
    trainedBudget?: {cells: number; source: string} | null;
    /** Whether the model is loaded: its weights already sit in memory and are not counted again. */
    modelLoaded: boolean;
    /** What still has to fit in free memory: the weights (unless loaded), the KV cache (and scores) and the compute buffer. */
    neededBytes: number;
    /** On a GPU build, how that splits between VRAM and RAM; absent or `null` on a CPU build (all of it in RAM). */
    offload?: OffloadEstimate | null;
    /** Whether it fits: in free memory, or on a GPU build, each part in its free VRAM and RAM. */
    fits: boolean;
    /** Whether the model's architecture supports pruning; Full KV always works. */
    compressionSupported: boolean;
    notes: string[];
};

/** The conversations' saved KV states on disk: the bytes and files they take now. */
export type SavedStatesUsage = {bytes: number; files: number};

/** A conversation's KV state as saved after an answer: its size on disk, and its KV against a Full cache of the same tokens. */
export type SavedStateFigures = {bytes: number; tokens: number; liveCells: number; liveBytes: number; fullBytes: number};
