import type {MessageRow} from "../db/types.js";

/** How an answer that ran to its end is recorded: its status, why it was cut, and what a person reads. */
export type StopOutcome = {
    status: MessageRow["status"];
    cutReason: MessageRow["cut_reason"];
    cutTokens: number | null;
    budgetFull: boolean;
    error: string | null;
};

/**
 * The record of an answer the engine ended for `reason`: stopped by a person, cut at max tokens (`cutBefore`, the tokens
 * an answer it continues had, plus the limit: the engine generated exactly the limit, special tokens such as the
 * thought's end included), or stopped by a full Full KV budget of `cells`.
 */
export function stopOutcome(reason: string, run: {cells: number; maxTokens: number; cutBefore: number}): StopOutcome {
    const outcome: StopOutcome = {status: "complete", cutReason: null, cutTokens: null, budgetFull: false, error: null};
    if (reason === "abort") return {...outcome, status: "stopped"};
    if (reason === "maxTokens") return {...outcome, status: "stopped", cutReason: "max_tokens", cutTokens: run.cutBefore + run.maxTokens};
    if (reason === "budget")
        return {
            ...outcome,
            status: "stopped",
            budgetFull: true,
            error:
                `The KV budget of ${run.cells} cells is full: Full KV keeps every token, so the answer stopped here. ` +
                "Raise the budget or choose a compression policy to think longer."
        };
    return outcome;
}

/** What a person reads when saving the answer failed. */
export function storageFailure(err: unknown): string {
    const code = String((err as {code?: unknown}).code ?? "");
    if (/SQLITE_FULL|ENOSPC/.test(code) || /database or disk is full/i.test((err as Error).message))
        return "The disk is full, so the answer stopped here: everything saved before is kept. Free some space and try again.";
    return `The answer could not be saved, so it stopped here (${(err as Error).message}): everything saved before is kept.`;
}
