import {describe, expect, test} from "vitest";
import {toCompression, toForm, validateBudgetForm} from "../../../renderer/lib/budgetForm.js";
import {paramSpecs, policyDefaults} from "../../../renderer/lib/policies.js";
import {conversationSettings} from "./fakeBridge.js";

describe("policies and the budget form", () => {
    test("the defaults are the papers' values", () => {
        expect(policyDefaults).toEqual({
            streamingllm: {sinks: 4},
            h2o: {heavyRatio: 0.5},
            lethe: {sparseRatio: 400, recentRatio: 0.3, segments: 8, sinks: 4, gamma: 0.95, initialEvictRatio: 0.5, keepInput: 0.5},
            refreekv: {threshold: 0.01, firstM: 4, wholeLayers: 2, mode: "once"}
        });
        // Every parameter the controller shows has a default, and every default is shown (ReFreeKV's mode as a choice).
        for (const [policy, specs] of Object.entries(paramSpecs)) {
            const shown = specs.map((spec) => spec.key as string).concat(policy === "refreekv" ? ["mode"] : []);
            expect(shown.sort()).toEqual(Object.keys(policyDefaults[policy as keyof typeof policyDefaults]).sort());
        }
    });

    test("the defaults pass the checks", () => {
        for (const policy of ["full", "streamingllm", "h2o", "lethe", "refreekv"] as const) {
            const form = toForm(conversationSettings().compression);
            form.policy = policy;
            expect(validateBudgetForm(form)).toEqual({});
        }
    });

    test("form and settings convert both ways", () => {
        const compression = {...conversationSettings().compression, policy: "lethe" as const, budget: {kind: "mib" as const, mib: 300}};
        expect(toCompression(toForm(compression))).toEqual(compression);
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
});
