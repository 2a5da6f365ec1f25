import type {PolicyId} from "../../../preload/policyCatalogue.js";

/**
 * What a policy sees at a prune round: the live cells of one sequence, with per-layer, per-head scores.
 * Arrays are indexed by live cell `j` (0..n-1); per-head arrays are `layers * heads * n`, laid out
 * `(layer * heads + head) * n + j`.
 */
export type ScoreSnapshot = {
    /** Original position of each live cell. */
    positions: Int32Array;
    layers: number;
    /** Query heads per layer (1 when the scores were already summed over heads). */
    heads: number;
    /** Decayed accumulated attention received, per head (RASR, Lethe Eq. 5; H2O with gamma = 1). */
    accumulated: Float32Array;
    /** Attention received from the scored query rows of the last decode, per head (ReFreeKV's last row, k = 1). */
    last: Float32Array;
    /** Whether this is one selection on scores aggregated over layers and heads (no layer is "layer 0"). */
    aggregated?: boolean;
    /**
     * log beta of each cell from the learned retention gates (TRIM-KV), per layer and KV head: `layers * retentionHeads * n`,
     * laid out `(layer * retentionHeads + head) * n + j`; each at most 0 (0: never forgotten). Absent unless the policy
     * needs it (`ScoreNeeds.retention`).
     */
    retention?: Float32Array;
    /** KV heads of `retention` (1 once aggregated). */
    retentionHeads?: number;
    /**
     * L1 norm of each cell's value vector ||V_{l,h}[k]||_1, per layer and KV head: `layers * valueHeads * n`, laid out
     * `(layer * valueHeads + head) * n + j`; 0 for a cell written while they were off (LAVa). Absent unless the policy
     * needs them (`ScoreNeeds.valueNorms`).
     */
    valueNorms?: Float32Array;
    /** KV heads of `valueNorms`. */
    valueHeads?: number;
};

export type PruneTarget = {
    /** Hard cap on live cells after this round. */
    maxKeep: number;
    /**
     * When the round runs: between chunks of a long prompt, right after a prompt was read (the first generated token:
     * where ReFreeKV's paper prunes), or while decoding.
     */
    phase: "prefill-chunk" | "after-prefill" | "decode";
    /**
     * Positions below this one are the turn's input (system prompt, earlier turns, the new message); unset while the
     * input is still being read.
     */
    inputEnd?: number;
    /**
     * Tokens in the sequence so far, kept or not: what the per-layer read-outs are shares of. Defaults to the newest
     * live position + 1.
     */
    tokensSeen?: number;
};

/**
 * One selector's wish for a round: a ranking of the live cells, best first (its structural cells such as sinks and the
 * recent window first, then by score), and how many of them it keeps (its quota). A selector is a layer, or a
 * (layer, head) pair for the per-head policies. Cells the ranking leaves out are never kept by this selector.
 */
export type SelectorChoice = {
    order: Int32Array;
    quota: number;
    /** How many cells at the head of `order` are the policy's structure (sinks, recent window): dropped last. */
    structural: number;
    /** The layer the selector belongs to (for the per-layer read-outs); `null` for a selection shared by all layers. */
    layer: number | null;
    /** Whether the selector takes part when selections are combined (ReFreeKV's whole layers 0 and 1 do not). */
    voting: boolean;
};

export type PolicySelection<State> = {
    selectors: SelectorChoice[];
    state: State;
    /** Cells the policy keeps whatever the selectors say (within the budget, like position 0 and the newest cells). */
    protect?: Int32Array;
};

export type ScoreNeeds = {
    /** Decay of the accumulated score; `null` when the policy needs no accumulation. */
    gamma: number | null;
    /** Whether prompts are scored by every query row (sums over queries, Eq. 2/5) or by the last row only (ReFreeKV k = 1). */
    allRows: boolean;
    /**
     * Whether every row must be scored with flash attention too, where the others take a prompt's last rows only (a
     * mean over the rows that read a cell needs them all, LeanKV). Defaults to `false`.
     */
    everyRow?: boolean;
    /** Whether the policy reads attention scores at all; `false` leaves scoring off (positions are read without it). Defaults to `true`. */
    scores?: boolean;
    /** Whether the policy reads the learned retention gates' log beta (`ScoreSnapshot.retention`, TRIM-KV). Defaults to `false`. */
    retention?: boolean;
    /**
     * Query rows scored per ubatch of a prompt, in place of the count `allRows` chooses (bounded as it is: a ubatch, or
     * fewer with flash attention). LAVa scores the last w rows (its window). Defaults to `allRows`' choice.
     */
    rows?: number;
    /** Whether the policy reads the cells' value L1 norms (`ScoreSnapshot.valueNorms`, LAVa). Defaults to `false`. */
    valueNorms?: boolean;
};

/**
 * What a round on per-head cells reads (combine mode `heads`): the `n` cells each (layer, KV head) pair holds, and per
 * pair and cell the token it holds there and what the policy needs of it. Arrays are `layers * heads * n`, laid out
 * `(layer * heads + head) * n + j`, `heads` being KV heads.
 */
export type HeadCellsSnapshot = {
    layers: number;
    heads: number;
    n: number;
    /** The token (its position) each pair holds in cell j. */
    tokens: Int32Array;
    /** The gates' log beta of each pair's token (TRIM-KV); 0 where the gates did not see it. With `ScoreNeeds.retention`. */
    retention?: Float32Array;
    /**
     * Attention each pair's token received, summed over the query heads that read the KV head (what a KV head's cells
     * earned; H2O's heavy hitters). With scores on (`ScoreNeeds.scores`).
     */
    accumulated?: Float32Array;
};

/** What a per-head round asks of a policy: per pair, `count` tokens it holds, `pinned` ones (position 0, the newest) first. */
export type HeadKeepTarget = {
    count: number;
    tokensSeen: number;
    pinned: ReadonlySet<number>;
    /** Tokens below this one are the turn's input (`PruneTarget.inputEnd`); unset while the input is read. */
    inputEnd?: number;
};

export type Policy<Params, State> = {
    readonly id: PolicyId;
    readonly defaults: Params;
    initialState(params: Params, budget: number): State;
    needs(params: Params): ScoreNeeds;
    /** Pure: typed arrays in, one ranking and quota per selector out. */
    select(snapshot: ScoreSnapshot, params: Params, state: State, target: PruneTarget): PolicySelection<State>;
    /**
     * Per-head cells (combine mode `heads`), for a policy whose paper ranks per KV head: per `layer * heads + head`, the
     * `target.count` tokens that pair keeps, each one it holds. Absent: the policy ranks shared cells only
     * (`PolicyEntry.headCells` says the same to the settings).
     */
    keepPerHead?(snapshot: HeadCellsSnapshot, params: Params, target: HeadKeepTarget): Int32Array[];
    /**
     * How `aggregate` mode folds the layers' and heads' accumulated scores (`layers * heads * n`) into the one row it
     * selects on; `include` names the voting layers. Defaults to every row divided by its total, summed
     * (`aggregateNormalised`). `snapshot` is the whole round's (LAVa weighs the rows by its value norms).
     */
    aggregate?(
        scores: Float32Array,
        layers: number,
        heads: number,
        n: number,
        include: (layer: number) => boolean,
        snapshot: ScoreSnapshot,
        params: Params
    ): Float32Array;
};

export type {PolicyId};

/**
 * How the selectors' choices become one set of cells to free (llama.cpp's cells are shared by all layers):
 * - `quota`: each selector keeps the top of its ranking up to its quota; over the budget, every quota shrinks by one
 *   common factor (Lethe's layer-adaptive budgets on shared cells);
 * - `union`: a cell goes only when no selector keeps it; over the budget, the lowest aggregated scores go first,
 *   selectors' structural cells last;
 * - `aggregate`: the policy selects once on the layers' and heads' normalised scores summed (the retention gates' log
 *   beta: its max over layers and heads, TRIM-KV's global ranking);
 * - `heads`: per-head cells, no shared choice at all: each (layer, KV head) keeps its own tokens in the same number of
 *   cells, heads moved between cells (main/engine/pruning/headRound.ts; policies with `keepPerHead`, `PolicyEntry.headCells`).
 */
export type CombineMode = "quota" | "union" | "aggregate" | "heads";

export type PruneDecision<State> = {
    /** Positions to free. */
    evict: Int32Array;
    keptCells: number;
    /** The shared cells kept, as a share of the tokens seen (`keptCells / tokensSeen`). */
    keptShare: number;
    /** Cells the selectors wanted to keep but the budget did not allow. */
    forcedDrops: number;
    /**
     * Per layer l and live cell j (`l * n + j`): 1 where layer l's own selection (its selectors' top cells up to their
     * quotas, before the layers are combined) keeps the cell.
     */
    keptByLayer: Uint8Array;
    /**
     * Per live cell, what the round knew of it: with the retention gates its retention at this step, beta^(t - pos) (its max
     * over the voting layers and heads, 0..1); otherwise the attention it received, each (layer, head) row normalised to 1
     * and summed over the voting ones (0 when no scores were read).
     */
    cellScores: Float32Array;
    /** Per layer, Hoyer sparsity of its accumulated scores summed over heads (Lethe Eq. 1). */
    sparsityPerLayer: Float32Array;
    state: State;
};
