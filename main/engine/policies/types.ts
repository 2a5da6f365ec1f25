/**
 * What a policy sees at a prune round: the live cells of one sequence, with per-layer scores.
 * Arrays are indexed by live cell `j` (0..n-1); per-layer arrays are `layers * n`, layer-major.
 */
export type ScoreSnapshot = {
    /** Original position of each live cell. */
    positions: Int32Array,
    layers: number,
    /** Decayed accumulated attention received (RASR, Lethe Eq. 5; H2O with gamma = 1). */
    accumulated: Float32Array,
    /** Attention received at the last step (squared and summed over heads when squared scoring is on: ReFreeKV). */
    last: Float32Array
};

export type PruneTarget = {
    /** Hard cap on live cells after this round. */
    maxKeep: number
};

/** One layer's vote: 1 keeps the cell, 0 lets it go. */
export type KeepMask = Uint8Array;

export type PolicySelection<State> = {
    /** One mask per layer (or one mask for an aggregated selection). */
    keep: KeepMask[],
    /** Layers whose mask counts when layers are combined by union (ReFreeKV's whole layers 0 and 1 do not). */
    voting: boolean[],
    state: State
};

export type ScoreNeeds = {
    /** Decay of the accumulated score; `null` when the policy needs no accumulation. */
    gamma: number | null,
    /** Whether the last-step score should be squared before the head sum (ReFreeKV's norm). */
    squaredLast: boolean
};

export type Policy<Params, State> = {
    readonly id: PolicyId,
    readonly defaults: Params,
    initialState(params: Params, budget: number): State,
    needs(params: Params): ScoreNeeds,
    /** Pure: typed arrays in, one keep mask per layer out. */
    select(snapshot: ScoreSnapshot, params: Params, state: State, target: PruneTarget): PolicySelection<State>
};

export type PolicyId = "full" | "streamingllm" | "h2o" | "lethe" | "refreekv";

/** How per-layer selections become one set of cells to free (cells are shared by all layers). */
export type CombineMode = "union" | "aggregate";

export type PruneDecision<State> = {
    /** Positions to free. */
    evict: Int32Array,
    keptCells: number,
    /** Cells the policy wanted to keep but the budget did not allow. */
    forcedDrops: number,
    /** Per layer, how many cells that layer's own selection keeps. */
    keptPerLayer: Int32Array,
    /** Per layer, Hoyer sparsity of its accumulated scores (Lethe Eq. 1). */
    sparsityPerLayer: Float32Array,
    state: State
};
