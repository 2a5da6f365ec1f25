import type {ChatHistoryItem, Token} from "node-llama-cpp";
import fs from "node:fs";
import type {CompressionSettings} from "../../../preload/contract/compression.js";
import {commonPrefixLength, continuedPrefix} from "../generation/chatPrompt.js";
import {DeferredState} from "./DeferredState.js";
import type {ActiveContext, ContextConfig, LoadedModel, RequestStates, SetStatus} from "../runtime/engineState.js";
import type {KvController} from "../pruning/KvController.js";
import {formatMib} from "../../kv/kvMemory.js";
import {findStateCandidate, restoreSequenceState, saveSequenceState} from "./SequenceStates.js";
import {hashSettings, reviveTyped, tagTyped, type StateExpectation} from "./stateFile.js";
import type {ModelInspection, StateOutcome, StateSave} from "../EngineApi.js";

/**
 * The largest KV state saved for resuming: a larger one is not written (the write would hold up what it runs before: a
 * pruned prompt's reading, the next request, quitting).
 */
const maxStateBytes = 256 * 1024 * 1024;

/**
 * The chat context's saved states: a request resumes from the best one on disk, a pruning policy's prompt is saved as it is
 * read, and Full KV's state after an answer waits in the context to be written off the answer's path (DeferredState).
 */
export class SavedStates {
    private readonly _listeners = new Set<(save: StateSave) => void>();
    /** Full KV's state after an answer, written off the answer's path (DeferredState). A listener's failure stays its own. */
    private readonly _deferred = new DeferredState((save) =>
        this._listeners.forEach((listener) => {
            try {
                listener(save);
            } catch {
                // the write, and the request it ran before, go on
            }
        })
    );

    /** `activeContext`: the engine's context now, which a deferred state must still be in to be written. */
    constructor(
        private readonly _activeContext: () => ActiveContext | null,
        private readonly _setStatus: SetStatus
    ) {}

    /** What becomes of each state that waited in the context: written, not written, or superseded (`StateSave`). */
    onSettled(listener: (save: StateSave) => void): () => void {
        this._listeners.add(listener);
        return () => this._listeners.delete(listener);
    }

    /** Writes the state waiting in the context (with `path`, only that one); `null` when none did. */
    flush(path?: string): Promise<StateSave | null> {
        return this._deferred.flush(path);
    }

    /** Forgets the state waiting, unwritten (the engine is disposed). */
    drop(): void {
        this._deferred.drop();
    }

    /** `active`'s sequence is about to change, keeping its first `kept` tokens: a state waiting there that it does not continue is written first. */
    beforeChange(active: ActiveContext, kept: number): Promise<void> {
        return this._deferred.beforeChange(active, kept);
    }

    /** What a state file must have been made with to stand for this context and these settings. */
    expectation(inspection: ModelInspection, config: ContextConfig, compression: CompressionSettings): StateExpectation {
        const stat = fs.statSync(inspection.path);
        return {
            model: {path: inspection.path, size: stat.size, mtimeMs: stat.mtimeMs},
            kvType: config.kvType,
            kvTypeV: config.kvTypeV,
            flashAttention: config.flashAttention,
            policy: compression.policy,
            cells: config.cells,
            settingsHash: hashSettings(compression)
        };
    }

    /**
     * Loads the best matching state of `states` into the context when it spares reading more of `tokens` than the `common`
     * tokens already there: Full KV, the state of an earlier answer sharing the longest prefix; a pruning policy, a prompt
     * state whose tokens `tokens` starts with, its scores and the controller's state with it. Returns the tokens now in
     * place. A state refused or failing to load is a note, and the history is read again.
     */
    async resume(
        active: ActiveContext,
        controller: KvController | null,
        tokens: number[],
        common: number,
        pruning: boolean,
        states: RequestStates
    ): Promise<number> {
        const notes: string[] = [];
        const prefix = (saved: readonly number[]) => commonPrefixLength(saved, tokens);
        // The state that spares the most reading: Full KV's with the longest common prefix, a pruning policy's longest prompt.
        const reach = (saved: number[]) =>
            pruning
                ? prefix(saved) === saved.length && saved.length <= tokens.length
                    ? saved.length
                    : 0
                : prefix(saved) > common
                  ? prefix(saved)
                  : 0;
        const candidate = await findStateCandidate(
            states.files.load,
            pruning ? "prompt" : "answer",
            states.expectation,
            reach,
            notes,
            tokens.length
        );
        let restored = common;
        if (candidate != null) {
            const sequence = active.session.sequence;
            const kv = active.kv;
            try {
                await restoreSequenceState(sequence, candidate, {
                    scores:
                        kv != null
                            ? async (positions, heads, layers) => {
                                  await kv.restoreScores(
                                      0,
                                      positions,
                                      heads,
                                      layers.map(([accumulated, last]) => [accumulated!, last!])
                                  );
                              }
                            : null,
                    retention:
                        kv?.retentionGates != null
                            ? async (positions, heads, layers) => {
                                  await kv.restoreRetention(
                                      0,
                                      positions,
                                      heads,
                                      layers.map(([logits]) => logits!)
                                  );
                              }
                            : null,
                    valueNorms:
                        kv?.valueNormsOn === true
                            ? async (positions, heads, layers) => {
                                  await kv.restoreValueNorms(
                                      0,
                                      positions,
                                      heads,
                                      layers.map(([norms]) => norms!)
                                  );
                              }
                            : null
                });
                if (pruning && candidate.header.controller != null)
                    await controller?.restore(reviveTyped(candidate.header.controller) as ReturnType<KvController["snapshot"]>);
                restored = prefix(candidate.tokens);
                states.outcome.restored = {path: candidate.path, tokens: candidate.tokens.length};
            } catch (err) {
                notes.push(`the saved state could not be loaded: ${(err as Error).message}`);
                // llama.cpp clears the sequence on a failed load: the history is read from the start.
                if (sequence.nextTokenIndex > 0) await sequence.eraseContextTokenRanges([{start: 0, end: sequence.nextTokenIndex}]);
                restored = 0;
            }
        }
        if (states.outcome.restored == null && notes.length > 0) {
            states.outcome.note = `Reading the conversation again: ${notes[0]}`;
            this._setStatus({message: states.outcome.note});
        }
        return restored;
    }

    /**
     * Saves the sequence's state (with the scores, the retention gates' logits and the value norms the controller reads), or says in
     * `outcome.note` why it did not: a state larger than `maxStateBytes` (the write would hold the answer up), or a failed
     * write (a full disk): the answer is never lost for a state.
     */
    async save(
        active: ActiveContext,
        path: string,
        kind: "answer" | "prompt",
        expectation: StateExpectation,
        controller: KvController | null,
        outcome: StateOutcome
    ): Promise<StateOutcome["saved"]> {
        const withScores = (controller?.scoringRows ?? 0) > 0;
        const stats = active.kv != null ? await active.kv.stats() : null;
        const liveBytes = stats != null ? stats.cellsUsed * stats.bytesPerCell : 0;
        if (liveBytes > maxStateBytes) {
            outcome.note ??= `The KV state (${formatMib(liveBytes)}) is larger than ${formatMib(maxStateBytes)}: not saved, the next turn reads the history again.`;
            return null;
        }
        try {
            return await saveSequenceState({
                sequence: active.session.sequence,
                kv: active.kv,
                path,
                kind,
                expectation,
                withScores,
                withRetention: controller?.readsRetention === true,
                withValueNorms: controller?.readsValueNorms === true,
                controller: controller == null ? null : tagTyped(controller.snapshot())
            });
        } catch (err) {
            outcome.note ??= `The KV state could not be saved (${(err as Error).message}): the next turn reads the history again.`;
            return null;
        }
    }

    /**
     * Keeps the sequence's state (Full KV's, after an answer) to write later (DeferredState): when asked (`flush`), or
     * before a request that does not continue its conversation changes the context. Returns its file.
     */
    defer(
        active: ActiveContext,
        loaded: LoadedModel,
        path: string,
        expectation: StateExpectation,
        rendered: Token[],
        chat: ChatHistoryItem[]
    ): string {
        const tokens = active.session.sequence.nextTokenIndex;
        let continuedAt: number | null = null;
        this._deferred.defer({
            path,
            owner: active,
            continuedAt: () => (continuedAt ??= continuedPrefix(loaded, rendered, chat)),
            write: async () => {
                if (this._activeContext() !== active || active.session.sequence.nextTokenIndex !== tokens)
                    return {saved: null, note: "The context changed before its KV state was saved: the next turn reads the history again."};
                const outcome: StateOutcome = {restored: null, note: null, saved: null};
                const saved = await this.save(active, path, "answer", expectation, null, outcome);
                return {saved, note: outcome.note};
            }
        });
        return path;
    }
}
