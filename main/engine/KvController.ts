import type {CompressionSettings, KvSample} from "../../preload/contract.js";
import type {NativeKv} from "./native/NativeKv.js";
import type {ScoreSnapshot as NativeScoreSnapshot} from "./native/types.js";
import {decide, initialDecideState, type DecideState} from "./policies/decide.js";
import {policies} from "./policies/index.js";
import type {Policy, PruneTarget, ScoreSnapshot} from "./policies/types.js";
import {scoring} from "./scoring.js";

/** Cells kept free beyond the prune cadence, for tokens decoded while a prune round is applied: the least. */
const headroomCells = 8;
/** Headroom per token seen decoded during a round: twice the most seen, so a slower round than any so far still fits. */
const headroomPerRoundToken = 2;

export type KvControllerOptions = {
    kv: NativeKv,
    sequenceId: number,
    compression: CompressionSettings,
    /** Cells allocated to the context: the hard cap. */
    cells: number,
    /** Tokens in the sequence (kept or not): node-llama-cpp's next token index. */
    tokensSeen(): number,
    now(): number,
    /**
     * Replaces the policy's choice with the caller's: the positions to free at a round (the benchmark's oracle, which
     * knows the future). Defaults to the policy.
     */
    chooseEvictions?: (snapshot: ScoreSnapshot, maxKeep: number) => Int32Array
};

type AnyPolicy = Policy<unknown, unknown>;

/**
 * Runs one compression policy on one sequence while it generates: every `pruneEvery` tokens it reads the
 * native scores, lets the policy choose, frees the chosen cells (positions kept) and records the memory
 * figures. One prune round at a time; rounds run between decodes (NativeKv takes the context's lock).
 */
export class KvController {
    private readonly _policy: AnyPolicy;
    private readonly _params: unknown;
    private _state: DecideState<unknown>;
    private _round: Promise<void> | null = null;
    private _sinceRound = 0;
    private _step = 0;
    private _pruneRounds = 0;
    private _forcedDrops = 0;
    private _scoringMs = 0;
    private _keptPerLayer: number[] = [];
    private _sparsityPerLayer: number[] = [];
    private _error: Error | null = null;
    /** Tokens decoded while the round in flight runs, and the most any finished round has seen (null: none finished). */
    private _duringRound = 0;
    private _mostDuringRound: number | null = null;
    /** Where this answer's input ends (the position of its first generated token); null until it is known. */
    private _inputEnd: number | null = null;

    constructor(private readonly _options: KvControllerOptions) {
        const {compression} = _options;
        this._policy = policies[compression.policy] as unknown as AnyPolicy;
        this._params = compression.policy === "full" ? {} : compression.params[compression.policy];
        this._state = initialDecideState(this._policy, this._params, _options.cells);
    }

    get policyId(): CompressionSettings["policy"] {
        return this._options.compression.policy;
    }

    /**
     * Live cells allowed after a prune round: the budget less room for the tokens until the next round and for those
     * decoded while a round runs. That room is measured: twice the most tokens any round so far has seen decoded while
     * it ran (at least `headroomCells`); before the first round ends, a tenth of the budget.
     */
    get maxKeep(): number {
        return Math.max(8, this._options.cells - this._options.compression.pruneEvery - this.headroom);
    }

    /** Cells kept free for the tokens decoded while a round runs (see `maxKeep`). */
    get headroom(): number {
        if (this._mostDuringRound == null)
            return Math.max(headroomCells, Math.ceil(this._options.cells / 10));
        return headroomCells + headroomPerRoundToken * this._mostDuringRound;
    }

    /** A prune round that failed: generation must stop rather than run out of cells. */
    get error(): Error | null {
        return this._error;
    }

    /**
     * Turns on the scores the policy needs: none for Full and StreamingLLM (positions are read with scoring off), so
     * they cost nothing. Scores already accumulated in the context (earlier turns of the conversation) are kept.
     */
    async start(): Promise<void> {
        const {rows, gamma} = scoring(this._options.compression);
        await this._options.kv.configureScoring({enabled: rows > 0, gamma, rows: Math.max(1, rows), squared: false});
    }

    /**
     * Call after tokens were generated; starts a prune round when one is due. ReFreeKV also prunes right after
     * prefill (the first generated token), as its paper does.
     */
    onTokens(count: number): void {
        const first = this._step === 0;
        if (first)
            this._inputEnd = Math.max(0, this._options.tokensSeen() - count);
        this._step += count;
        this._sinceRound += count;
        if (this._round != null)
            this._duringRound += count;
        if (this._round != null || this.policyId === "full")
            return;
        if (this._sinceRound >= this._options.compression.pruneEvery || (first && this.policyId === "refreekv")) {
            this._sinceRound = 0;
            this._duringRound = 0;
            this._round = this._prune(this.maxKeep, first ? "after-prefill" : "decode").catch((err: unknown) => {
                this._error = err as Error;
            }).finally(() => {
                this._mostDuringRound = Math.max(this._mostDuringRound ?? 0, this._duringRound);
                this._round = null;
            });
        }
    }

    /** A prune round now, down to `maxKeep` live cells (prefill of a long history, between chunks). */
    async pruneNow(maxKeep: number): Promise<void> {
        await this.idle();
        if (this.policyId !== "full")
            await this._prune(maxKeep, "prefill-chunk");
    }

    async idle(): Promise<void> {
        await this._round;
    }

    async sample(tokensPerSecond: number): Promise<KvSample> {
        const stats = await this._options.kv.stats();
        const tokensSeen = this._options.tokensSeen();
        return {
            step: this._step,
            tokensSeen,
            cellsLive: stats.cellsUsed,
            cellsAllocated: stats.cellsAllocated,
            bytesPerCell: stats.bytesPerCell,
            allocatedBytes: stats.bytesAllocated,
            liveBytes: stats.bytesUsed,
            fullBytes: tokensSeen * stats.bytesPerCell,
            pruneRounds: this._pruneRounds,
            tokensEvicted: stats.tokensEvicted,
            forcedDrops: this._forcedDrops,
            keptPerLayer: this._keptPerLayer.length > 0 ? this._keptPerLayer : Array(stats.layers).fill(1),
            sparsityPerLayer: this._sparsityPerLayer.length > 0 ? this._sparsityPerLayer : Array(stats.layers).fill(0),
            scoringMs: Math.round(this._scoringMs),
            tokensPerSecond
        };
    }

    /** Waits for a round in flight. Scoring stays on, so the next turn's policy still sees this turn's history. */
    async dispose(): Promise<void> {
        await this.idle();
    }

    private async _prune(maxKeep: number, phase: PruneTarget["phase"]): Promise<void> {
        const started = this._options.now();
        const snapshot = toPolicySnapshot(await this._options.kv.scores(this._options.sequenceId));
        const n = snapshot.positions.length;
        if (n === 0)
            return;
        let evict: Int32Array;
        if (this._options.chooseEvictions != null) {
            evict = this._options.chooseEvictions(snapshot, maxKeep);
        } else {
            const decision = decide(this._policy, snapshot, this._params, this._state, {maxKeep, phase, inputEnd: this._inputEnd ?? undefined},
                this._options.compression.combine);
            this._state = decision.state;
            this._forcedDrops += decision.forcedDrops;
            this._keptPerLayer = Array.from(decision.keptPerLayer);
            this._sparsityPerLayer = Array.from(decision.sparsityPerLayer);
            evict = decision.evict;
        }
        this._pruneRounds++;
        this._scoringMs += this._options.now() - started;
        if (evict.length > 0)
            await this._options.kv.evict(this._options.sequenceId, evict);
    }
}

/** The native per-layer, per-head arrays as the policies' flat `(layer * heads + head) * n + cell` arrays. */
export function toPolicySnapshot(native: NativeScoreSnapshot): ScoreSnapshot {
    const n = native.positions.length;
    const layers = native.layers.length;
    const heads = native.heads;
    const accumulated = new Float32Array(layers * heads * n);
    const last = new Float32Array(layers * heads * n);
    native.layers.forEach((layer, l) => {
        accumulated.set(layer.accumulated.subarray(0, heads * n), l * heads * n);
        last.set(layer.last.subarray(0, heads * n), l * heads * n);
    });
    return {positions: native.positions, layers, heads, accumulated, last};
}
