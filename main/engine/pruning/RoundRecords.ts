import type {CompressionSettings, TokenScores} from "../../../preload/contract/compression.js";
import {hexOfLayers, mergeTokenScores} from "../../../preload/tokenScores.js";
import {policyNeeds} from "../policies/scoring.js";
import type {CombineMode} from "../policies/types.js";

/**
 * One prune round's view of its live cells (`PruneDecision.cellScores`, `keptByLayer`), with its number in the answer and
 * the positions it evicted.
 */
export type ScoredRound = {
    round: number;
    positions: Int32Array;
    layers: number;
    scores: Float32Array;
    keptByLayer: Uint8Array;
    evict: Int32Array;
};

/**
 * What a policy's records carry: its gates' retention, the attention it scored, the share of heads that hold a token (per-head
 * cells: `combine`, the mode its rounds run under, `auto` resolved), or nothing (a policy that reads no scores).
 */
export function tokenScoresKind(compression: CompressionSettings, combine: CombineMode | null): TokenScores["kind"] {
    if (combine === "heads") return "heads";
    const needs = policyNeeds(compression);
    return needs.retention === true ? "retention" : needs.scores === false ? "none" : "attention";
}

/**
 * What the prune rounds knew of their cells, kept between two records of the samples: the newest round whole, and of
 * the rounds before it only the cells each evicted, whose last record is its own.
 */
export class RoundRecords {
    private _newest: ScoredRound | null = null;
    private _evicted: TokenScores | null = null;

    /** What the rounds since the last record knew of their cells, one entry per position (the newest round's); `null` for none. */
    take(kind: TokenScores["kind"]): TokenScores | null {
        const newest = this._newest;
        const older = this._evicted;
        this._newest = null;
        this._evicted = null;
        if (newest == null) return older;
        const record = recordOf(newest, null, kind);
        return older == null ? record : mergeTokenScores(older, record, Number.POSITIVE_INFINITY);
    }

    /**
     * Keeps what a round knew of its cells until the next record is written: the round whole, and of the round before it
     * only the cells that one evicted, whose last record is its own.
     */
    keep(scored: ScoredRound, kind: TokenScores["kind"]): void {
        const before = this._newest;
        this._newest = scored;
        if (before == null || before.evict.length === 0) return;
        const gone = new Set(before.evict);
        const only = Uint8Array.from(before.positions, (position) => (gone.has(position) ? 1 : 0));
        this._evicted = mergeTokenScores(this._evicted ?? undefined, recordOf(before, only, kind), Number.POSITIVE_INFINITY);
    }
}

/** A round's record of its cells (of those `only` marks, when given: 1 per cell), in the order of their positions. */
function recordOf(
    {round, positions, layers, scores, keptByLayer}: ScoredRound,
    only: Uint8Array | null,
    kind: TokenScores["kind"]
): TokenScores {
    const n = positions.length;
    // Sorted by position without a comparator: position x 2^21 + cell (cells < 2^21, positions < 2^32).
    const keys = new Float64Array(n);
    let count = 0;
    for (let j = 0; j < n; j++) if (only == null || only[j] === 1) keys[count++] = positions[j]! * 2 ** 21 + j;
    const sorted = keys.subarray(0, count).sort();
    const record: TokenScores = {
        kind,
        layers,
        positions: new Array(count),
        scores: new Array(count),
        rounds: new Array(count).fill(round),
        keptBy: new Array(count)
    };
    for (let i = 0; i < count; i++) {
        const j = sorted[i]! % 2 ** 21;
        const score = scores[j]!;
        record.positions[i] = positions[j]!;
        record.scores[i] = kind === "none" || !Number.isFinite(score) ? null : Number(score.toPrecision(4));
        record.keptBy[i] = hexOfLayers(keptByLayer, layers, n, j);
    }
    return record;
}
