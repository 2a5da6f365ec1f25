// The budget estimate carries the cells a model's TRIM-KV gates were trained at (the sidecar's ponder.retention.budget:
// config.json's memory_size for the authors' converted gates), which the budget controller offers when TRIM-KV is chosen.
import {describe, expect, it} from "vitest";
import type {ModelInspection} from "../../../main/engine/EngineApi.js";
import type {RetentionInfo} from "../../../main/engine/retention/types.js";
import {estimateBudget} from "../../../main/services/CompressionService.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";

const model: ModelInspection = {
    path: "/m.gguf",
    name: "tiny-qwen3",
    sizeBytes: 1,
    architecture: "qwen3",
    contextLength: 4096,
    layers: 4,
    headCount: 4,
    headCountKv: 2,
    embeddingLength: 160,
    hasChatTemplate: true
};
const info = (budget: number | null): RetentionInfo => ({
    version: 1,
    gate: "trimkv-rg",
    activation: "silu",
    modelArchitecture: "qwen3",
    layers: 4,
    embeddingLength: 160,
    headCountKv: 2,
    hidden: 48,
    budget,
    reduction: "per-head",
    source: "converted from trimkv_weights.pth",
    weightBytes: 1
});

describe("the gates' trained budget in the estimate", () => {
    it("is the sidecar's budget and source, whatever the policy drafted", () => {
        for (const policy of ["trimkv", "full"] as const)
            expect(
                estimateBudget(model, {...defaultCompressionSettings, policy}, 2 ** 32, {
                    retention: {available: true, path: "/m.retention.gguf", info: info(512)}
                }).trainedBudget
            ).toEqual({cells: 512, source: "converted from trimkv_weights.pth"});
    });

    it("is absent without gates, or when the gates do not say", () => {
        expect(
            estimateBudget(model, defaultCompressionSettings, 2 ** 32, {
                retention: {available: true, path: "/m.retention.gguf", info: info(null)}
            }).trainedBudget
        ).toBeNull();
        expect(
            estimateBudget(model, defaultCompressionSettings, 2 ** 32, {retention: {available: false, reason: "no retention gates"}})
                .trainedBudget
        ).toBeNull();
        expect(estimateBudget(model, defaultCompressionSettings, 2 ** 32).trainedBudget).toBeNull();
    });
});
