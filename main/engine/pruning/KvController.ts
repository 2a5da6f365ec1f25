import type {CompressionSettings, KvSample} from "../../../preload/contract/compression.js";
import {policyEntry, type PolicyEntry} from "../../../preload/policyCatalogue.js";
import type {NativeKv} from "../native/NativeKv.js";
import {decide, initialDecideState, resolveCombine, type DecideState} from "../policies/decide.js";
import {policies} from "../policies/index.js";
import type {GateReduction} from "../policies/trimkv.js";
import type {CombineMode, Policy, PruneTarget, ScoreSnapshot} from "../policies/types.js";
import {readRetentionReduction} from "../retention/findRetentionGates.js";
import {policyNeeds, policyParams, scoring} from "../policies/scoring.js";
import {RoundCounters, type SavedCounters} from "./RoundCounters.js";
import {RoundRecords, tokenScoresKind} from "./RoundRecords.js";
import {pruneHeadCells} from "./headRound.js";
import {restoreHeadSlots, saveHeadSlots, type SavedHeadSlots} from "./savedHeadSlots.js";
import {toPolicySnapshot} from "./toPolicySnapshot.js";

/** The most input tokens read between two prune rounds while a prompt is read. */
const maxInputWindow = 512;
/** Share of the budget read between two prune rounds while a prompt is read (the round before frees room for them). */
const inputWindowShare = 0.3;

export type KvControllerOptions = {
    kv: NativeKv;
    sequenceId: number;
    compression: CompressionSettings;
    /**
     * The budget in cells: never more live cells than this. The context may have more (llama.cpp allocates cells in
     * steps of 256); the controller keeps to the budget itself.
     */
    cells: number;
    /** Tokens in the sequence (kept or not): node-llama-cpp's next token index. */
    tokensSeen(): number;
    now(): number;
    /**
     * Replaces the policy's choice with the caller's: the positions to free at a round (the benchmark's oracle, which
     * knows the future). Defaults to the policy.
     */
    chooseEvictions?: (snapshot: ScoreSnapshot, maxKeep: number) => Int32Array;
    /**
     * The model's retention gate file (`findRetentionGates`), loaded by `start()` when the policy reads the gates (TRIM-KV);
     * the gates are turned off for any other policy. Required by TRIM-KV. Defaults to `null`.
     */
    retentionGates?: string | null;
    /**
     * How the gates were trained (the gate file's `ponder.retention.reduction`), which picks TRIM-KV's combine mode when
     * the settings say `auto`. Defaults to the gate file's own, read by `start()`.
     */
    retentionReduction?: GateReduction;
};

type AnyPolicy = Policy<unknown, unknown>;

/** Shortest time between two samples that carry token records (the last sample of an answer carries what is left). */
const tokenScoresEveryMs = 250;

/** A controller's state between two prompt chunks, as a saved state keeps it (`KvController.snapshot`). */
export type ControllerSnapshot = SavedCounters & {
    state: DecideState<unknown>;
    /** Per-head cells: which token each head held where (`saveHeadSlots`). */
    headSlots?: SavedHeadSlots;
};

/**
 * Where the sequence's decodes are: reading a prompt (`prompt`), about to read the answer's own input (`answer-input`,
 * after `beginAnswer`), reading it (`answer-input-read`), or generating the answer (`generating`).
 */
type Stage = "prompt" | "answer-input" | "answer-input-read" | "generating";

/**
 * Runs one compression policy on one sequence, as a gate before each of its decodes (`beforeDecode`, which
 * `gateSequenceDecodes` calls): every `pruneEvery` generated tokens, and whenever the next decode would not fit in the
 * budget, it reads the native scores, lets the policy choose, frees the chosen cells (positions kept) and only then
 * lets the decode run. A round therefore never overlaps a decode and always falls on the same token: the same
 * inputs give the same rounds, the same evictions and the same tokens, however busy the machine. The budget is an
 * exact cap: no decode is let through that would take the live cells past it.
 */
export class KvController {
    /** The policy as the catalogue describes it: what the rounds do besides its module's choices. */
    private readonly _entry: PolicyEntry;
    private readonly _policy: AnyPolicy;
    private readonly _params: unknown;
    /** The combine mode of the rounds; `null` until `start()` has read the gates' reduction (TRIM-KV under `auto`). */
    private _combine: CombineMode | null;
    private _state: DecideState<unknown>;
    private _stage: Stage = "prompt";
    /** ReFreeKV prunes right after the prompt was read, before the first generated token is decoded. */
    private _afterPrefillDue = false;
    private _sinceRound = 0;
    private _step = 0;
    /** This answer's rounds, evictions, peak and time, and the rounds since the last sample. */
    private readonly _counters = new RoundCounters();
    /**
     * What the rounds since the last written record knew of their cells: the newest round whole, and of the older ones only
     * the cells they evicted (every other cell of theirs the newest round saw again, and its record wins).
     */
    private readonly _records = new RoundRecords();
    private _tokenScoresAt = Number.NEGATIVE_INFINITY;
    private _error: Error | null = null;
    /** Where this answer's input ends (the position of its first generated token); null until it is known. */
    private _inputEnd: number | null = null;

    constructor(private readonly _options: KvControllerOptions) {
        const {compression} = _options;
        this._entry = policyEntry(compression.policy);
        this._policy = policies[compression.policy] as unknown as AnyPolicy;
        this._params = policyParams(compression);
        const needsGateFile = compression.combine === "auto" && this._entry.ownCombine === "gates" && _options.retentionReduction == null;
        this._combine = needsGateFile ? null : resolveCombine(compression.combine, compression.policy, _options.retentionReduction);
        this._state = initialDecideState(this._policy, this._params, _options.cells);
    }

    get policyId(): CompressionSettings["policy"] {
        return this._options.compression.policy;
    }

    /** Whether the policy frees cells at all (every one but Full KV's, which keeps every token). */
    get prunes(): boolean {
        return !this._entry.keepsEveryToken;
    }

    /**
     * How the rounds combine the selectors' choices (`resolveCombine`); `null` until `start()` under `auto` for a policy
     * whose own mode its gates give (TRIM-KV).
     */
    get combine(): CombineMode | null {
        return this._combine;
    }

    /**
     * Live cells a round leaves while the answer is generated: the budget less the tokens until the next round
     * (`pruneEvery`, at most half the budget; past that a round comes when the budget is full).
     */
    get maxKeep(): number {
        return this._options.cells - this._decodeRoom;
    }

    /** Query rows the policy scores (0: it reads no scores, as Full and StreamingLLM). */
    get scoringRows(): number {
        return scoring(this._options.compression).rows;
    }

    /** A prune round that failed: generation stops rather than run out of cells. */
    get error(): Error | null {
        return this._error;
    }

    /** Whether the policy reads the learned retention gates (TRIM-KV). */
    get readsRetention(): boolean {
        return policyNeeds(this._options.compression).retention === true;
    }

    /** Whether the policy reads the cells' value norms (LAVa). */
    get readsValueNorms(): boolean {
        return policyNeeds(this._options.compression).valueNorms === true;
    }

    /**
     * Turns on the scores the policy needs: none for Full, StreamingLLM and TRIM-KV (positions are read with scoring off),
     * so they cost nothing. Scores already accumulated in the context (earlier turns of the conversation) are kept. The
     * retention gates are loaded for a policy that reads them and turned off (freed) for any other; so are the value norms
     * (LAVa), which every model has.
     */
    async start(): Promise<void> {
        const {rows, gamma} = scoring(this._options.compression);
        await this._options.kv.configureScoring({enabled: rows > 0, gamma, rows: Math.max(1, rows), squared: false});
        const gates = this._options.retentionGates ?? null;
        if (this.readsRetention && gates == null) throw new Error("TRIM-KV needs the model's retention gate file, and none was given");
        if (this.readsRetention && this._combine == null)
            this._combine = resolveCombine(this._options.compression.combine, this.policyId, await readRetentionReduction(gates!));
        if (this._combine === "heads" && !this._entry.headCells && !this._entry.keepsEveryToken)
            throw new Error(
                `Per-head cells are not available for ${this._entry.name}: its paper ranks shared cells, or its scores are not per KV head`
            );
        await this._options.kv.configureRetention(this.readsRetention ? gates : null);
        await this._options.kv.configureValueNorms(this.readsValueNorms);
    }

    /**
     * The answer starts: the next decode reads its input (what node-llama-cpp evaluates itself: the new message's end
     * and the assistant's opening), every later one decodes generated tokens, counted towards `pruneEvery`.
     */
    beginAnswer(): void {
        this._stage = "answer-input";
    }

    /** Counts the answer's generated tokens, for the samples' `step`. */
    onTokens(count: number): void {
        this._step += count;
    }

    /**
     * Before a decode of `count` tokens (`first`: the first part of an evaluation): runs the prune round that is due
     * (the cadence, ReFreeKV's round after the prompt, or a budget too full for the decode) and answers how many of the
     * tokens may be decoded now without passing the budget (the rest are asked for again). Throws when pruning fails.
     */
    async beforeDecode(count: number, first: boolean): Promise<number> {
        if (this._error != null) throw this._error;
        try {
            if (first) this._advance(count);
            const {cells, compression} = this._options;
            // per-head cells: the positions this decode writes hold their own token in every head again
            if (this._combine === "heads")
                this._options.kv.existingHeadSlots(this._options.sequenceId)?.forgetFrom(this._options.tokensSeen());
            const generating = this._stage === "generating";
            let live = (await this._options.kv.stats()).cellsUsed;
            if (this._entry.keepsEveryToken) {
                // Full KV frees nothing: the engine stops it at its budget.
                this._counters.seeCells(live + count);
                return count;
            }
            const room = generating ? this._decodeRoom : this._inputRoom;
            const due = generating && (this._afterPrefillDue || this._sinceRound >= compression.pruneEvery);
            if (due || cells - live < Math.min(count, room)) {
                const phase: PruneTarget["phase"] = this._afterPrefillDue ? "after-prefill" : generating ? "decode" : "prefill-chunk";
                live = await this._prune(cells - room, phase);
                this._afterPrefillDue = false;
                this._sinceRound = 0;
            }
            const allowed = Math.min(count, cells - live);
            if (allowed < 1) throw new Error(`a prune round left ${live} live cells, no room within the budget of ${cells}`);
            if (generating) this._sinceRound += allowed;
            this._counters.seeCells(live + allowed);
            return allowed;
        } catch (err) {
            this._error ??= err as Error;
            throw err;
        }
    }

    /**
     * This answer's figures: its own rounds, evictions and forced drops, and the context's cells now; with what the rounds
     * recorded of each token at most every 250 ms, and always when `last` (the answer's last sample) is set.
     */
    async sample(tokensPerSecond: number, last = false): Promise<KvSample> {
        // Taken before the wait: a round between here and the stats goes with the next sample.
        const due = last || this._options.now() - this._tokenScoresAt >= tokenScoresEveryMs;
        const tokens = due ? this._records.take(tokenScoresKind(this._options.compression, this._combine)) : null;
        if (tokens != null) this._tokenScoresAt = this._options.now();
        const since = this._counters.takeSince();
        const stats = await this._options.kv.stats();
        const gates = this.readsRetention ? this._options.kv.retentionGates : null;
        return this._counters.sample({
            since,
            stats,
            step: this._step,
            tokensSeen: this._options.tokensSeen(),
            tokensPerSecond,
            heads: this._combine === "heads",
            ...(gates != null ? {retentionBytes: gates.bytes} : {}),
            ...(tokens != null ? {tokens} : {})
        });
    }

    /**
     * What a saved state keeps of this controller while a prompt is read (SequenceStates): the policy's accumulators and
     * this answer's counters, so a restored state goes on where it was. Typed arrays stay typed (`tagTyped`).
     */
    snapshot(): ControllerSnapshot {
        const table = this._combine === "heads" ? saveHeadSlots(this._options.kv, this._options.sequenceId) : undefined;
        return {...(table != null ? {headSlots: table} : {}), state: this._state, ...this._counters.save()};
    }

    /**
     * Takes back a `snapshot()` made under the same settings, before the prompt is read on from there. Rejects a per-head
     * table of other layers or KV heads than the model's cache (`HeadSlots.restore`), with nothing taken back.
     */
    async restore(snapshot: ControllerSnapshot): Promise<void> {
        await restoreHeadSlots(this._options.kv, this._options.sequenceId, snapshot.headSlots);
        this._state = snapshot.state;
        this._counters.load(snapshot);
    }

    /** Counts a round and keeps it for the next sample: the tokens it evicted, the time it took. */
    private _recordRound(evict: Int32Array, evicted: number, started: number, movingMs?: number): void {
        const ms = this._options.now() - started;
        this._counters.countRound({evict, evicted, ms, movingMs, step: this._step, tokensSeen: this._options.tokensSeen()});
    }

    /** Tokens read or generated between two rounds while the answer is generated. */
    private get _decodeRoom(): number {
        return Math.max(1, Math.min(this._options.compression.pruneEvery, Math.floor(this._options.cells / 2)));
    }

    /** Tokens read between two rounds while a prompt is read. */
    private get _inputRoom(): number {
        return Math.max(this._decodeRoom, Math.min(maxInputWindow, Math.floor(this._options.cells * inputWindowShare)));
    }

    private _advance(count: number): void {
        if (this._stage === "answer-input") {
            this._stage = "answer-input-read";
            this._inputEnd = this._options.tokensSeen() + count;
        } else if (this._stage === "answer-input-read") {
            this._stage = "generating";
            this._afterPrefillDue = this._entry.prunesAfterPrompt;
        }
    }

    /** One round down to `maxKeep` live cells at most; returns the live cells it leaves. */
    private async _prune(maxKeep: number, phase: PruneTarget["phase"]): Promise<number> {
        const started = this._options.now();
        const {kv, sequenceId} = this._options;
        if (this._combine === "heads") {
            const target = {maxKeep, tokensSeen: this._options.tokensSeen(), inputEnd: this._inputEnd ?? undefined, now: this._options.now};
            const round = await pruneHeadCells(kv, sequenceId, this._policy, this._params, target);
            const {seen: positions, layers, heldShare: scores, heldByLayer: keptByLayer, evicted: evict} = round;
            this._records.keep({round: this._counters.pruneRounds + 1, positions, layers, scores, keptByLayer, evict}, "heads");
            this._recordRound(evict, evict.length, started, round.movingMs);
            return round.live;
        }
        const snapshot = toPolicySnapshot(
            await kv.scores(sequenceId),
            this.readsRetention ? await kv.retention(sequenceId) : undefined,
            this.readsValueNorms ? await kv.valueNorms(sequenceId) : undefined
        );
        const n = snapshot.positions.length;
        if (n === 0) return 0;
        let evict: Int32Array;
        if (this._options.chooseEvictions != null) {
            evict = this._options.chooseEvictions(snapshot, maxKeep);
        } else {
            const target: PruneTarget = {maxKeep, phase, inputEnd: this._inputEnd ?? undefined, tokensSeen: this._options.tokensSeen()};
            if (this._combine == null)
                throw new Error("TRIM-KV's combine mode follows its gates' reduction: start() reads it before the first round");
            const decision = decide(this._policy, snapshot, this._params, this._state, target, this._combine);
            this._state = decision.state;
            this._counters.decided(decision.forcedDrops, decision.sparsityPerLayer);
            evict = decision.evict;
            this._records.keep(
                {
                    round: this._counters.pruneRounds + 1,
                    positions: snapshot.positions,
                    layers: snapshot.layers,
                    scores: decision.cellScores,
                    keptByLayer: decision.keptByLayer,
                    evict
                },
                tokenScoresKind(this._options.compression, this._combine)
            );
        }
        const evicted = evict.length > 0 ? await this._options.kv.evict(this._options.sequenceId, evict) : 0;
        this._recordRound(evict, evicted, started);
        return n - evicted;
    }
}
