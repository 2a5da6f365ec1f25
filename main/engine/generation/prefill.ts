import type {Token} from "node-llama-cpp";
import type {ReadReason} from "../../../preload/contract/engine.js";
import {fullKvAnswerRoom, kvBudgetExceeded} from "../../kv/budgetCap.js";
import {commonPrefixLength} from "./chatPrompt.js";
import type {ActiveContext, RequestStates} from "../runtime/engineState.js";
import type {KvController} from "../pruning/KvController.js";
import {readReason, type PromptReading} from "./readReason.js";
import type {SavedStates} from "../states/SavedStates.js";

/**
 * Tokens of a stored conversation evaluated at once: a stop waits for one chunk at most. A count, not a time, so the same
 * prompt is always read in the same batches (and, with a pruning policy, pruned at the same tokens).
 */
const prefillChunk = 128;

export type PrefillOptions = {
    active: ActiveContext;
    /** The rendered prompt. */
    rendered: readonly Token[];
    controller: KvController | null;
    /** The budget: Full KV refuses a prompt that leaves no room for an answer. */
    cells: number;
    /** Hears the reading's progress, when it is long enough to tell (readReason). */
    onProgress?: (progress: number, reason: ReadReason) => void;
    /** Tokens at the end left unread (for node-llama-cpp to evaluate itself). Defaults to `0`. */
    holdBack?: number;
    signal?: AbortSignal;
    /** The saved states to resume from and save to. Defaults to none. */
    states?: RequestStates;
    /** For the progress's wording: the earlier turns' tokens, and whether the context was made anew. Defaults to neither. */
    reading?: Pick<PromptReading, "earlierTokens" | "newContext">;
};

/**
 * Evaluates the stored conversation into the context in chunks of `prefillChunk` tokens, with progress, when much of
 * it is not there yet (a new context after a budget change, another conversation): with a pruning policy the
 * controller prunes before any chunk that would not fit, so a history longer than the budget still fits.
 * node-llama-cpp then finds the prefix in place and evaluates only the rest.
 *
 * Under a pruning policy the prompt is always read afresh: cells an earlier answer pruned (or scored, with the
 * attention of tokens this request does not have) are never reused as a cached prefix, so the answer depends on its
 * inputs alone. Full KV reuses the prefix that still has every cell.
 */
export async function prefill(saved: SavedStates, options: PrefillOptions): Promise<void> {
    const {active, rendered, controller, cells, onProgress, signal, states} = options;
    const reading = options.reading ?? {earlierTokens: 0, newContext: false};
    if (rendered.length === 0) return;
    const sequence = active.session.sequence;
    const tokens = rendered.slice(0, Math.max(0, rendered.length - (options.holdBack ?? 0)));
    const pruning = controller?.prunes === true;
    let common = 0;
    if (!pruning) {
        common = commonPrefixLength(sequence.contextTokens, tokens);
        if (common > 0 && active.kv != null) {
            // Full KV after a pruned answer in the same context: keep only the prefix that has every cell.
            const live = new Set((await active.kv.scores(0)).positions);
            let whole = 0;
            while (whole < common && live.has(whole)) whole++;
            common = whole;
        }
    }
    // A state waiting to be written goes to disk first, unless this prompt continues its conversation (DeferredState).
    await saved.beforeChange(active, commonPrefixLength(sequence.contextTokens, rendered));
    if (states != null && common < tokens.length) common = await saved.resume(active, controller, tokens, common, pruning, states);
    if (common === tokens.length && common === sequence.nextTokenIndex) return;

    if (common < sequence.nextTokenIndex) await sequence.eraseContextTokenRanges([{start: common, end: sequence.nextTokenIndex}]);
    const missing = tokens.length - common;
    if (!pruning && tokens.length > cells - fullKvAnswerRoom) throw kvBudgetExceeded(tokens.length, cells);
    const reason = readReason({...reading, reused: common, missing});
    const report = reason != null && onProgress != null ? (progress: number) => onProgress(progress, reason) : undefined;
    let done = 0;
    report?.(0);
    // A pruning policy's state is kept at the prompt's last whole chunk: the next turn's prompt passes through it.
    const checkpoint = pruning && states?.files.save != null ? Math.floor(tokens.length / prefillChunk) * prefillChunk : -1;
    while (done < missing) {
        signal?.throwIfAborted();
        // Chunks end at multiples of `prefillChunk`, wherever the reading starts, so a prompt read on from a state
        // is read in the same batches (and pruned at the same tokens) as one read from the start.
        const start = common + done;
        const chunk = tokens.slice(start, Math.min(tokens.length, (Math.floor(start / prefillChunk) + 1) * prefillChunk));
        await sequence.evaluateWithoutGeneratingNewTokens(chunk);
        done += chunk.length;
        report?.(done / missing);
        if (common + done === checkpoint && checkpoint > common && states != null)
            states.outcome.saved = await saved.save(active, states.files.save!, "prompt", states.expectation, controller, states.outcome);
    }
}
