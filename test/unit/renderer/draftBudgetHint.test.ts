import {describe, expect, test} from "vitest";
import type {TokenCount} from "../../../preload/contract.js";
import {draftBudgetHint} from "../../../renderer/lib/draftBudgetHint.js";

const counted = (overrides: Partial<TokenCount>): TokenCount => ({
    messageTokens: 10,
    promptTokens: 20,
    policy: "lethe",
    budgetCells: 1024,
    ...overrides
});

describe("the composer's budget hint", () => {
    test("a pruning policy: a message longer than the budget is said to be pruned while it is read, with both figures", () => {
        expect(draftBudgetHint(counted({messageTokens: 1532, promptTokens: 1540, budgetCells: 1024}))).toEqual({
            kind: "prune",
            text: "This message is 1,532 tokens; the KV budget is 1,024 cells: Lethe will prune the question while reading it, so parts of it can be lost."
        });
        expect(draftBudgetHint(counted({policy: "h2o", messageTokens: 1025, budgetCells: 1024}))?.text).toMatch(
            /^This message is 1,025 tokens; .*: H2O will prune/
        );
    });

    test("a pruning policy: a message within the budget says nothing, however long the conversation (pruning it is the policy's work)", () => {
        expect(draftBudgetHint(counted({messageTokens: 1024, promptTokens: 50_000, budgetCells: 1024}))).toBeNull();
    });

    test("Full KV: blocks where the engine refuses, a prompt leaving fewer than 16 cells for the answer, and not one token earlier", () => {
        expect(draftBudgetHint(counted({policy: "full", messageTokens: 100, promptTokens: 1008, budgetCells: 1024}))).toBeNull();
        const hint = draftBudgetHint(counted({policy: "full", messageTokens: 100, promptTokens: 1009, budgetCells: 1024}));
        expect(hint).toEqual({
            kind: "block",
            text:
                "With this message the conversation is 1,009 tokens and exceeds Full KV's budget of 1,024 cells (16 of them are kept for the " +
                "answer's first tokens): raise the KV budget or choose a pruning policy (Memory) to send it."
        });
    });

    test("Full KV: a message that alone exceeds the budget is named as the message", () => {
        expect(draftBudgetHint(counted({policy: "full", messageTokens: 1532, promptTokens: 1540, budgetCells: 1024}))?.text).toMatch(
            /^This message is 1,532 tokens and exceeds Full KV's budget of 1,024 cells .*raise the KV budget or choose a pruning policy/
        );
    });

    test("nothing counted (no model loaded, an empty message): no hint", () => {
        expect(draftBudgetHint(null)).toBeNull();
    });
});
