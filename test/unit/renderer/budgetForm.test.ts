import {describe, expect, test} from "vitest";
import {checkBudgetCap, conversationTokens, toCompression, toForm, validateBudgetForm} from "../../../renderer/lib/budgetForm.js";
import {paramSpecs, policyDefaults} from "../../../renderer/lib/policies.js";
import {conversationSettings, kvSample, message} from "./fakeBridge.js";

describe("policies and the budget form", () => {
    test("the defaults are the papers' values", () => {
        expect(policyDefaults).toEqual({
            streamingllm: {sinks: 4},
            h2o: {heavyRatio: 0.5},
            lethe: {sparseRatio: 400, recentRatio: 0.3, segments: 8, sinks: 4, gamma: 0.95, initialEvictRatio: 0.5, keepInput: 0.5},
            refreekv: {threshold: 0.01, firstM: 4, wholeLayers: 2, mode: "once"},
            leankv: {alpha: 1.2, window: 64},
            lava: {window: 32, kernel: 7}
        });
        // Every parameter the controller shows has a default, and every default is shown (ReFreeKV's mode as a choice).
        for (const [policy, specs] of Object.entries(paramSpecs)) {
            const shown = specs.map((spec) => spec.key as string).concat(policy === "refreekv" ? ["mode"] : []);
            expect(shown.sort()).toEqual(Object.keys(policyDefaults[policy as keyof typeof policyDefaults]).sort());
        }
    });

    test("the defaults pass the checks", () => {
        for (const policy of ["full", "streamingllm", "h2o", "lethe", "refreekv", "leankv", "trimkv", "lava"] as const) {
            const form = toForm(conversationSettings().compression);
            form.policy = policy;
            expect(validateBudgetForm(form)).toEqual({});
        }
    });

    test("form and settings convert both ways", () => {
        const compression = {...conversationSettings().compression, policy: "lethe" as const, budget: {kind: "mib" as const, mib: 300}};
        expect(toCompression(toForm(compression))).toEqual(compression);
        const trimkv = {...compression, policy: "trimkv" as const};
        expect(toCompression(toForm(trimkv))).toEqual(trimkv);
        const leankv = {...compression, policy: "leankv" as const, kvType: "q8_0" as const, kvTypeV: "q4_0" as const, flashAttention: true};
        expect(toCompression(toForm(leankv))).toEqual(leankv);
    });

    test("LeanKV's threshold may be 0 (prune nothing), not below", () => {
        const form = toForm({...conversationSettings().compression, policy: "leankv"});
        form.params.leankv.alpha = 0;
        expect(validateBudgetForm(form)).toEqual({});
        form.params.leankv.alpha = -0.1;
        expect(validateBudgetForm(form)).toEqual({"params.leankv.alpha": "Threshold α must be at least 0 and at most 1,000."});
    });

    test("exclusive bounds are worded as such", () => {
        const form = toForm(conversationSettings().compression);
        form.policy = "refreekv";
        form.params.refreekv.threshold = 1;
        expect(validateBudgetForm(form)).toEqual({"params.refreekv.threshold": "Loss threshold T must be above 0 and below 1."});
        form.policy = "lethe";
        form.params.lethe.sparseRatio = 1;
        expect(validateBudgetForm(form)["params.lethe.sparseRatio"]).toBe("Sparsity ratio τ must be above 1 and at most 1,000,000,000.");
    });

    test("the cap is checked in the cache type the estimate gave it for; MiB wait for an estimate of the form's type", () => {
        const cap = {maxCells: 4096, modelContextLength: 4096, bytesPerCell: 1024, kvType: "f16" as const, kvTypeV: "f16" as const};
        const form = toForm({...conversationSettings().compression, budget: {kind: "mib", mib: 5}});
        expect(checkBudgetCap(form, cap)).toBe(
            "5 MiB is more than this model can use. At most 4 MiB of f16 KV (4,096 cells): the model's context."
        );
        form.kvTypeV = "q8_0";
        form.flashAttention = true;
        expect(checkBudgetCap(form, cap)).toBeNull();
        // An estimate of the K8V4 pair names it.
        expect(
            checkBudgetCap({...form, kvType: "q8_0", kvTypeV: "q4_0"}, {...cap, bytesPerCell: 416, kvType: "q8_0", kvTypeV: "q4_0"})
        ).toBe("5 MiB is more than this model can use. At most 1.62 MiB of q8_0 K / q4_0 V (4,096 cells): the model's context.");
        form.kvType = "q8_0";
        expect(checkBudgetCap(form, null)).toBeNull();
        form.budgetKind = "cells";
        form.cells = 4097;
        expect(checkBudgetCap(form, cap)).toBe("4,097 cells is more than this model can use. At most 4,096 cells: the model's context.");
        // A model that declares no context: the cap is the most Ponder allocates.
        form.cells = 2_000_000;
        expect(checkBudgetCap(form, {...cap, maxCells: 1_048_576, modelContextLength: null})).toMatch(
            /At most 1,048,576 cells: the most Ponder allocates\.$/
        );
    });

    test("a conversation's length is its latest answer's last reading", () => {
        const stats = (tokensSeen: number) => ({
            policy: "full" as const,
            budgetCells: 2048,
            samples: [kvSample({tokensSeen: 1}), kvSample({tokensSeen})]
        });
        expect(conversationTokens([])).toBeNull();
        expect(conversationTokens([message({id: "a", role: "assistant"})])).toBeNull();
        expect(
            conversationTokens([
                message({id: "a", role: "assistant", stats: stats(700)}),
                message({id: "u", role: "user"}),
                message({id: "b", role: "assistant", stats: stats(900)}),
                message({id: "c", role: "assistant"})
            ])
        ).toBe(900);
    });
});
