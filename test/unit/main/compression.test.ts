import {describe, expect, it} from "vitest";
import {estimateBudget} from "../../../main/services/CompressionService.js";
import {compressionSettingsSchema, defaultCompressionSettings, defaultConversationSettings, mergeConversationSettings} from "../../../main/services/schemas.js";
import {exportConversation} from "../../../main/services/exportConversation.js";
import type {ModelInspection} from "../../../main/engine/types.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {FakeEngine} from "./FakeEngine.js";

const qwen15b: ModelInspection = {
    path: "/m.gguf", name: "R1-Distill-Qwen-1.5B", sizeBytes: 1, architecture: "qwen2", contextLength: 131072,
    layers: 28, headCount: 12, headCountKv: 2, embeddingLength: 1536, hasChatTemplate: true
};

describe("budget estimate", () => {
    it("turns cells and MiB into bytes with the model's own shape", () => {
        const cells = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "cells", cells: 4096}}, 8 * 2 ** 30);
        expect(cells).toMatchObject({cells: 4096, allocatedCells: 4096, bytesPerCell: 28672, bytes: 4096 * 28672, fits: true, compressionSupported: true});
        const odd = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "cells", cells: 1000}}, 8 * 2 ** 30);
        expect(odd).toMatchObject({cells: 1000, allocatedCells: 1024, bytes: 1024 * 28672});
        const mib = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "mib", mib: 112}}, 8 * 2 ** 30);
        expect(mib.cells).toBe(4096);
        const q8 = estimateBudget(qwen15b, {...defaultCompressionSettings, kvType: "q8_0", budget: {kind: "cells", cells: 4096}}, 8 * 2 ** 30);
        expect(q8.bytes).toBeLessThan(cells.bytes * 0.6);
    });

    it("caps auto at half the free memory and says so; reports a budget that does not fit", () => {
        const auto = estimateBudget(qwen15b, defaultCompressionSettings, 2 ** 30);
        expect(auto.cells).toBe(Math.floor(2 ** 29 / 28672 / 1024) * 1024);
        expect(auto.notes.join(" ")).toMatch(/Capped at half the free memory/);
        const huge = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "cells", cells: 131072}}, 2 ** 30);
        expect(huge.fits).toBe(false);
    });

    it("counts the weights (unless loaded), the KV cache and the compute buffer against free memory", () => {
        const model = {...qwen15b, weightsBytes: 1_100_000_000};
        const budget = {...defaultCompressionSettings, budget: {kind: "cells" as const, cells: 4096}};
        const loaded = estimateBudget(model, budget, 2 ** 30);
        // no flash attention: 512 ubatch tokens x 4096 cells x (12 heads + mask) f32 dominate the compute buffer
        expect(loaded.computeBytes).toBeGreaterThan(512 * 4096 * 13 * 4);
        expect(loaded.computeBytes).toBeLessThan(512 * 4096 * 13 * 4 * 1.25);
        expect(loaded.neededBytes).toBe(loaded.bytes + loaded.computeBytes!);
        expect(loaded.fits).toBe(true);
        const notLoaded = estimateBudget(model, budget, 2 ** 30, {modelLoaded: false});
        expect(notLoaded.neededBytes).toBe(1_100_000_000 + notLoaded.bytes + notLoaded.computeBytes!);
        expect(notLoaded.fits).toBe(false);
        // flash attention keeps only an f16 mask of the scores; the feed-forward's rows are then the largest part
        const flash = estimateBudget(model, {...budget, flashAttention: true}, 2 ** 30);
        expect(flash.computeBytes).toBeGreaterThan(512 * 4096 * 2 + 3 * 512 * 4 * 4 * 1536);
        expect(flash.computeBytes).toBeLessThan(loaded.computeBytes! / 2);
    });

    it("counts the scores a scoring policy keeps beside the KV cache, and its scoring branch in the compute buffer", () => {
        const model = {...qwen15b, weightsBytes: 1_100_000_000};
        const budget = {...defaultCompressionSettings, budget: {kind: "cells" as const, cells: 4096}};
        const full = estimateBudget(model, budget, 2 ** 33);
        expect(full.scoresBytes).toBe(0);
        for (const policy of ["h2o", "lethe", "refreekv"] as const) {
            const scored = estimateBudget(model, {...budget, policy}, 2 ** 33);
            // Accumulated and last scores: 2 x f32 x 28 layers x 12 query heads x 4,096 cells.
            expect(scored.scoresBytes).toBe(2 * 4 * 28 * 12 * 4096);
            expect(scored.neededBytes).toBe(scored.bytes + scored.scoresBytes! + scored.computeBytes!);
        }
        // H2O and Lethe score every row of a ubatch: without flash attention that adds the transposed rows.
        expect(estimateBudget(model, {...budget, policy: "lethe"}, 2 ** 33).computeBytes! - full.computeBytes!).toBeGreaterThanOrEqual(512 * 4096 * 12 * 4);
        expect(estimateBudget(model, {...budget, policy: "streamingllm"}, 2 ** 33).scoresBytes).toBe(0);
    });

    it("says compression is off for sliding-window models", () => {
        const gemma = estimateBudget({...qwen15b, architecture: "gemma3"}, {...defaultCompressionSettings, policy: "lethe"}, 2 ** 33);
        expect(gemma.compressionSupported).toBe(false);
        expect(gemma.notes.join(" ")).toMatch(/sliding-window/);
    });
});

describe("compression settings", () => {
    it("refuses absurd budgets and parameters with a readable reason", () => {
        const bad = (patch: object) => compressionSettingsSchema.safeParse({...defaultCompressionSettings, ...patch});
        expect(bad({budget: {kind: "cells", cells: 10}}).error?.issues[0]?.message).toMatch(/below 64 cells/);
        expect(bad({budget: {kind: "cells", cells: 1e12}}).success).toBe(false);
        expect(bad({budget: {kind: "mib", mib: -5}}).success).toBe(false);
        expect(bad({budget: {kind: "cells", cells: 100.5}}).success).toBe(false);
        expect(bad({policy: "magic"}).success).toBe(false);
        expect(bad({params: {...defaultCompressionSettings.params, lethe: {...defaultCompressionSettings.params.lethe, sparseRatio: 0.5}}}).success).toBe(false);
        expect(bad({budget: {kind: "cells", cells: 2048}}).success).toBe(true);
    });

    it("keeps valid stored fields and resets damaged ones to the defaults", () => {
        const merged = mergeConversationSettings(defaultConversationSettings, {
            temperature: 1.2,
            compression: {policy: "lethe", budget: {kind: "cells", cells: 3}, params: {lethe: {sparseRatio: 100}}}
        });
        expect(merged.temperature).toBe(1.2);
        expect(merged.compression.policy).toBe("lethe");
        expect(merged.compression.budget).toEqual({kind: "auto"});
        expect(merged.compression.params.lethe.sparseRatio).toBe(100);
        expect(merged.compression.params.lethe.recentRatio).toBe(0.3);
    });

    it("refuses a quantized cache without flash attention (llama.cpp cannot make that context), and repairs a stored one", () => {
        const parse = (patch: object) => compressionSettingsSchema.safeParse({...defaultCompressionSettings, ...patch});
        for (const kvType of ["q8_0", "q4_0"]) {
            const refused = parse({kvType, flashAttention: false});
            expect(refused.success).toBe(false);
            expect(refused.error?.issues[0]).toMatchObject({path: ["flashAttention"], message: expect.stringMatching(/needs flash attention/)});
            expect(parse({kvType, flashAttention: true}).success).toBe(true);
        }
        expect(parse({kvType: "f16", flashAttention: false}).success).toBe(true);

        const stored = mergeConversationSettings(defaultConversationSettings, {compression: {policy: "lethe", kvType: "q8_0", flashAttention: false}});
        expect(stored.compression).toMatchObject({policy: "lethe", kvType: "f16", flashAttention: false});

        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
        const c = services.conversations.create();
        expect(() => services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, kvType: "q4_0"}})).toThrow(/needs flash attention/);
        services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, kvType: "q4_0", flashAttention: true}});
        expect(services.conversations.get(c.id).settings.compression).toMatchObject({kvType: "q4_0", flashAttention: true});
    });

    it("persists a per-conversation policy and budget through the service, refusing invalid ones", () => {
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
        const c = services.conversations.create();
        services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, policy: "refreekv", budget: {kind: "cells", cells: 1024}}});
        expect(services.conversations.get(c.id).settings.compression).toMatchObject({policy: "refreekv", budget: {kind: "cells", cells: 1024}});
        expect(() => services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, budget: {kind: "cells", cells: 1}}})).toThrow(/64 cells/);
        expect(services.conversations.get(c.id).settings.compression.budget).toEqual({kind: "cells", cells: 1024});
    });
});

describe("export", () => {
    it("writes Markdown with thinking and stats, and JSON that parses back", async () => {
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
        const c = services.conversations.create("Sums / primes?");
        services.chat.send(c.id, "2+2?");
        await services.chat.idle();
        const detail = services.conversations.get(c.id);
        const md = exportConversation(detail, "markdown");
        expect(md.fileName).toBe("Sums-primes.md");
        expect(md.content).toContain("## Assistant");
        expect(md.content).toContain("<summary>Thinking</summary>");
        expect(md.content).toContain("The answer is 4");
        const json = JSON.parse(exportConversation(detail, "json").content) as typeof detail;
        expect(json.messages).toHaveLength(2);
    });
});
