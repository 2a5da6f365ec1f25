import type {GenerationResult} from "../engine/EngineApi.js";
import type {ChatAnswer} from "./chatAnswer.js";
import type {AnswerEnd} from "./finishedAnswer.js";
import type {PendingStates} from "./PendingStates.js";
import type {StateStore} from "./StateStore.js";

/**
 * What the answer's run did with KV states: the one it saved (the state files then kept within their disk budget) and
 * the one it loaded, as its statistics record them (a failure to trim never fails an answer); Full KV's, left in the engine, handed to `pending`.
 */
export function keptStates(
    answer: ChatAnswer,
    states: GenerationResult["states"],
    store: StateStore | undefined,
    pending: PendingStates
): AnswerEnd["states"] {
    const figures: AnswerEnd["states"] = {};
    if (states?.saved != null) {
        const {bytes, tokens, liveCells, liveBytes, fullBytes} = states.saved;
        figures.savedState = {bytes, tokens, liveCells, liveBytes, fullBytes};
        try {
            store?.trim(states.saved.path);
        } catch {
            // the next save trims again
        }
    }
    // Full KV's state stays in the engine until this conversation is left (or the app quits): no write per answer.
    pending.answered(answer.conversationId, answer.messageId, states?.pending);
    if (states?.restored != null) figures.resumedTokens = states.restored.tokens;
    return figures;
}
