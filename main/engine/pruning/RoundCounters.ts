import type {KvSample, PruneRound} from "../../../preload/contract/compression.js";
import {mergeRanges, toRanges} from "../../../preload/positionRanges.js";
import type {KvStats} from "../native/types.js";

/** What a saved state keeps of an answer's counters (`RoundCounters.save`). */
export type SavedCounters = {
    pruneRounds: number;
    tokensEvicted: number;
    forcedDrops: number;
    peakCells: number;
    scoringMs: number;
    /** Per-head cells: the part of `scoringMs` the engine spent moving heads and freeing cells. */
    movingMs?: number;
    sparsityPerLayer: number[];
};

/** What a sample says besides the counters: the engine's figures now and the caller's. */
export type SampleInputs = {
    stats: KvStats;
    step: number;
    tokensSeen: number;
    tokensPerSecond: number;
    /** Per-head cells: the sample carries `movingMs`. */
    heads: boolean;
    /** Bytes of the retention gates loaded, when the policy reads them. */
    retentionBytes?: number;
    tokens?: KvSample["tokens"];
    /** What `takeSince()` took. */
    since: RoundsSince;
};

/** The rounds since the last sample and the positions they evicted, as ranges (`toRanges`). */
export type RoundsSince = {evicted: number[]; rounds: PruneRound[]};

/**
 * One answer's counters (rounds, evictions, forced drops, peak cells, time in rounds) and what its next sample carries of
 * the rounds since the last one: the controller counts, this keeps the figures and writes them out.
 */
export class RoundCounters {
    private _pruneRounds = 0;
    private _tokensEvicted = 0;
    private _forcedDrops = 0;
    private _peakCells = 0;
    private _scoringMs = 0;
    private _movingMs = 0;
    private _sparsityPerLayer: number[] = [];
    /** Positions evicted since the last sample, as ranges (`toRanges`): the next sample carries them. */
    private _evictedSince: number[] = [];
    /** The rounds since the last sample (kept raw: the next sample writes them out). */
    private _roundsSince: PruneRound[] = [];

    /** Rounds counted so far. */
    get pruneRounds(): number {
        return this._pruneRounds;
    }

    /** The live cells a decode leaves: the peak keeps the most. */
    seeCells(cells: number): void {
        this._peakCells = Math.max(this._peakCells, cells);
    }

    /** A policy's round: the drops it forced and its layers' Hoyer sparsity. */
    decided(forcedDrops: number, sparsityPerLayer: ArrayLike<number>): void {
        this._forcedDrops += forcedDrops;
        this._sparsityPerLayer = Array.from(sparsityPerLayer);
    }

    /** Counts a round of `ms` (`movingMs` of it moving heads) and keeps it for the next sample. */
    countRound(round: {evict: Int32Array; evicted: number; ms: number; movingMs?: number; step: number; tokensSeen: number}): void {
        this._pruneRounds++;
        const ranges = toRanges(round.evict);
        this._roundsSince.push({
            first: this._pruneRounds,
            last: this._pruneRounds,
            step: round.step,
            tokensSeen: round.tokensSeen,
            evicted: ranges
        });
        this._scoringMs += round.ms;
        this._movingMs += round.movingMs ?? 0;
        this._tokensEvicted += round.evicted;
        if (round.evicted > 0) this._evictedSince = mergeRanges(this._evictedSince, ranges);
    }

    /** Takes the rounds and evictions since the last sample: the next one starts empty. */
    takeSince(): RoundsSince {
        const since = {evicted: this._evictedSince, rounds: this._roundsSince};
        this._evictedSince = [];
        this._roundsSince = [];
        return since;
    }

    /** The answer's figures now, with what `takeSince()` took. */
    sample(inputs: SampleInputs): KvSample {
        const {stats, tokensSeen, tokens} = inputs;
        const {evicted, rounds} = inputs.since;
        return {
            step: inputs.step,
            tokensSeen,
            cellsLive: stats.cellsUsed,
            cellsPeak: Math.max(this._peakCells, stats.cellsUsed),
            cellsAllocated: stats.cellsAllocated,
            bytesPerCell: stats.bytesPerCell,
            allocatedBytes: stats.bytesAllocated,
            liveBytes: stats.bytesUsed,
            fullBytes: tokensSeen * stats.bytesPerCell,
            pruneRounds: this._pruneRounds,
            tokensEvicted: this._tokensEvicted,
            forcedDrops: this._forcedDrops,
            sparsityPerLayer: this._sparsityPerLayer.length > 0 ? this._sparsityPerLayer : Array(stats.layers).fill(0),
            scoringMs: Math.round(this._scoringMs),
            ...(inputs.heads ? {movingMs: Math.round(this._movingMs)} : {}),
            ...(inputs.retentionBytes != null ? {retentionBytes: inputs.retentionBytes} : {}),
            tokensPerSecond: inputs.tokensPerSecond,
            evicted,
            ...(tokens != null ? {tokens} : {}),
            ...(rounds.length > 0 ? {rounds} : {})
        };
    }

    /** The counters as a saved state keeps them. */
    save(): SavedCounters {
        return {
            pruneRounds: this._pruneRounds,
            tokensEvicted: this._tokensEvicted,
            forcedDrops: this._forcedDrops,
            peakCells: this._peakCells,
            scoringMs: this._scoringMs,
            movingMs: this._movingMs,
            sparsityPerLayer: this._sparsityPerLayer
        };
    }

    /** Takes back counters `save()` wrote. */
    load(saved: SavedCounters): void {
        this._pruneRounds = saved.pruneRounds;
        this._tokensEvicted = saved.tokensEvicted;
        this._forcedDrops = saved.forcedDrops;
        this._peakCells = saved.peakCells;
        this._scoringMs = saved.scoringMs;
        this._movingMs = saved.movingMs ?? 0;
        this._sparsityPerLayer = saved.sparsityPerLayer;
    }
}
