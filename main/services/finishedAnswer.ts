import type {MessageStats} from "../../preload/contract.js";
import type {AnswerProgress} from "./AnswerProgress.js";
import type {ChatAnswer} from "./chatAnswer.js";
import {parseSamples} from "./pushSample.js";
import {storageFailure, type StopOutcome} from "./stopOutcome.js";

/** How an answer's generation ended: its outcome and the prompt tokens it read. */
export type AnswerEnd = StopOutcome & {
    promptTokens: number;
    /** The answer's statistics, made when its turn came: none when it failed before. */
    stats: MessageStats | null;
    /** What the run recorded of the KV states it saved and loaded, added to the statistics. */
    states: Pick<MessageStats, "savedState" | "resumedTokens">;
};

/**
 * What the answer's row becomes as it finishes at `now` (its total time set on `progress`), and its statistics: a failed
 * save ends it whatever the engine said; a continuation adds to what the answer held.
 */
export function finishedAnswer(answer: ChatAnswer, progress: AnswerProgress, end: AnswerEnd, now: number) {
    const {row, continuing} = answer;
    const {status, error} = progress.storageError != null ? {status: "error" as const, error: storageFailure(progress.storageError)} : end;
    progress.fields.total_ms = now - progress.started;
    const ran = end.stats == null ? null : {...end.stats, ...end.states};
    const stats = continuing && ran != null ? {...ran, samples: [...parseSamples(row.stats), ...ran.samples]} : ran;
    const finish = {
        ...progress.fields,
        status,
        prompt_tokens: continuing ? row.prompt_tokens + end.promptTokens : end.promptTokens,
        error,
        cut_reason: end.cutReason,
        cut_tokens: end.cutTokens,
        stats: stats == null ? (continuing ? row.stats : "{}") : JSON.stringify(stats)
    };
    return {finish, stats};
}
