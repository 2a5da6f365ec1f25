// What the composer says about a message longer than the KV budget, before it is sent: from the engine's count
// (`chat:countTokens`), the decision and its words.

import type {TokenCount} from "../../preload/contract.js";
import {count} from "./formatMemory.js";
import {fullKvAnswerRoom, policyEntry, policyName} from "./policies.js";

/** `block`: Full KV would refuse the message (send is disabled); `prune`: a pruning policy prunes the question as it reads it. */
export type DraftBudgetHint = {kind: "block" | "prune"; text: string};

/**
 * Full KV: the engine refuses a prompt that leaves less than `fullKvAnswerRoom` cells of the budget for the answer, so
 * the whole prompt (the conversation with this message) is checked as the engine checks it. A pruning policy reads any
 * conversation by pruning it, which is its work, so only a message that alone exceeds the budget is flagged: its own
 * beginning is pruned while it is read. `null` when nothing needs saying (or nothing was counted).
 */
export function draftBudgetHint(counted: TokenCount | null): DraftBudgetHint | null {
    if (counted == null) return null;
    const {messageTokens, promptTokens, budgetCells, policy} = counted;
    const cells = count(budgetCells);
    if (policyEntry(policy).keepsEveryToken) {
        if (promptTokens + fullKvAnswerRoom <= budgetCells) return null;
        const alone = messageTokens + fullKvAnswerRoom > budgetCells;
        const what = alone
            ? `This message is ${count(messageTokens)} tokens`
            : `With this message the conversation is ${count(promptTokens)} tokens`;
        return {
            kind: "block",
            text:
                `${what} and exceeds Full KV's budget of ${cells} cells (${fullKvAnswerRoom} of them are kept for the answer's first ` +
                "tokens): raise the KV budget or choose a pruning policy (Memory) to send it."
        };
    }
    if (messageTokens <= budgetCells) return null;
    return {
        kind: "prune",
        text:
            `This message is ${count(messageTokens)} tokens; the KV budget is ${cells} cells: ${policyName(policy)} will prune the ` +
            "question while reading it, so parts of it can be lost."
    };
}
