import {describe, expect, test} from "vitest";
import {compressionChanged, describeCompression} from "../../../renderer/lib/describeCompression.js";
import {policies} from "../../../renderer/lib/policies.js";
import {conversationSettings} from "./fakeBridge.js";

const settings = conversationSettings().compression;
const lethe = {...settings, policy: "lethe" as const, budget: {kind: "cells" as const, cells: 512}};

describe("what an answer ran under", () => {
    test("reads in a few words, with every setting in the detail", () => {
        const described = describeCompression({policy: "lethe", budgetCells: 512, settings: lethe});
        expect(described.label).toBe("Lethe · 512 cells · F16");
        expect(described.detail).toMatch(
            /^Ran under Lethe with 512 cells, KV cache F16; layers combined by aggregate, pruned every 16 tokens; Lethe: /
        );
        expect(described.detail).toMatch(/sparsity ratio τ 400, .*keep the question up to 0\.5\.$/);

        const q8 = {...settings, kvType: "q8_0" as const, kvTypeV: "q8_0" as const, flashAttention: true};
        const full = describeCompression({policy: "full", budgetCells: 4096, settings: q8});
        expect(full.label).toBe("Full KV · 4,096 cells · Q8_0");
        expect(full.detail).toBe("Ran under Full KV with 4,096 cells (set as auto budget), KV cache Q8_0.");
        expect(describeCompression({policy: "full", budgetCells: 4096, settings: {...q8, kvTypeV: "q4_0"}}).label).toBe(
            "Full KV · 4,096 cells · K Q8_0 / V Q4_0"
        );
        // While it streams the cells are not resolved yet; answers from before the settings were recorded.
        const mib = {...settings, policy: "h2o" as const, budget: {kind: "mib" as const, mib: 64}};
        expect(describeCompression({policy: "h2o", budgetCells: null, settings: mib}).label).toBe("H2O · 64 MiB · F16");
        expect(describeCompression({policy: "h2o", budgetCells: 256, settings: null})).toEqual({
            label: "H2O · 256 cells",
            detail: "Ran under H2O with 256 cells (its other settings were not recorded)."
        });
    });

    test("tells when the next answer runs under another policy or budget", () => {
        const recorded = {policy: "lethe" as const, budgetCells: 512, settings: lethe};
        expect(compressionChanged(recorded, lethe)).toBe(false);
        expect(compressionChanged(recorded, {...lethe, pruneEvery: 8})).toBe(false);
        expect(compressionChanged(recorded, {...lethe, policy: "full"})).toBe(true);
        expect(compressionChanged(recorded, {...lethe, budget: {kind: "cells", cells: 1024}})).toBe(true);
    });
});

describe("policy descriptions", () => {
    test("say what each keeps and when to use it in plain words, the paper a link away", () => {
        for (const policy of policies) {
            expect(policy.keeps).toMatch(/^(Keeps|Each layer keeps|Once the prompt is read, drops|Drops)/);
            expect(policy.when.length).toBeGreaterThan(40);
            // No paper names, equations or section numbers in the first sentence.
            expect(policy.keeps).not.toMatch(/et al|Eq\.|§|RASR|Algorithm|sparsity breakpoint/);
            if (policy.id === "full") expect(policy.paper).toBeNull();
            else expect(policy.paper?.url).toMatch(/^https:\/\/arxiv\.org\/abs\/\d{4}\.\d{5}$/);
        }
    });
});
