import {describe, expect, it} from "vitest";
import {estimateBudget} from "../../../main/services/CompressionService.js";
import {
    compressionSettingsSchema,
    conversationSettingsSchema,
    defaultCompressionSettings,
    defaultConversationSettings,
    mergeConversationSettings
} from "../../../main/services/schemas.js";
import {exportConversation} from "../../../main/services/exportConversation.js";
import type {ModelInspection} from "../../../main/engine/EngineApi.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {FakeEngine} from "./FakeEngine.js";

const qwen15b: ModelInspection = {
    path: "/m.gguf",
    name: "R1-Distill-Qwen-1.5B",
    sizeBytes: 1,
    architecture: "qwen2",
    contextLength: 131072,
    layers: 28,
    headCount: 12,
    headCountKv: 2,
    embeddingLength: 1536,
    hasChatTemplate: true
};

describe("budget estimate", () => {
    it("turns cells and MiB into bytes with the model's own shape", () => {
        const cells = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "cells", cells: 4096}}, 8 * 2 ** 30);
        expect(cells).toMatchObject({
            cells: 4096,
            allocatedCells: 4096,
            bytesPerCell: 28672,
            bytes: 4096 * 28672,
            fits: true,
            compressionSupported: true
        });
        const odd = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "cells", cells: 1000}}, 8 * 2 ** 30);
        expect(odd).toMatchObject({cells: 1000, allocatedCells: 1024, bytes: 1024 * 28672});
        const mib = estimateBudget(qwen15b, {...defaultCompressionSettings, budget: {kind: "mib", mib: 112}}, 8 * 2 ** 30);
        expect(mib.cells).toBe(4096);
        const q8 = estimateBudget(
            qwen15b,
            {...defaultCompressionSettings, kvType: "q8_0", kvTypeV: "q8_0", flashAttention: true, budget: {kind: "cells", cells: 4096}},
            8 * 2 ** 30
        );
        expect(q8.bytes).toBeLessThan(cells.bytes * 0.6);
    });

    it("counts keys and values each at its own type: K8V4, its mirror K4V8, and a MiB budget in cells of the pair", () => {
        // 28 layers x (K row + V row) of 2 KV heads x 128 = 256 values, 8 blocks: q8_0 34 bytes a block, q4_0 18.
        const k8v4 = {...defaultCompressionSettings, kvType: "q8_0" as const, kvTypeV: "q4_0" as const, flashAttention: true};
        const estimate = estimateBudget(qwen15b, {...k8v4, budget: {kind: "cells", cells: 4096}}, 8 * 2 ** 30);
        expect(estimate).toMatchObject({bytesPerCell: 28 * (8 * 34 + 8 * 18), bytes: 4096 * 11_648, fullContextBytes: 131072 * 11_648});
        const k4v8 = estimateBudget(qwen15b, {...k8v4, kvType: "q4_0", kvTypeV: "q8_0", budget: {kind: "cells", cells: 4096}}, 8 * 2 ** 30);
        expect(k4v8.bytes).toBe(estimate.bytes);
        // Quantized keys with F16 values: 28 x (144 + 512).
        const k4 = estimateBudget(
            qwen15b,
            {...defaultCompressionSettings, kvType: "q4_0", budget: {kind: "cells", cells: 4096}},
            8 * 2 ** 30
        );
        expect(k4).toMatchObject({bytesPerCell: 28 * (8 * 18 + 512)});
        expect(k4.notes.join(" ")).not.toMatch(/flash attention/);
        // 112 MiB of K8V4 is 117,440,512 / 11,648 = 10,082 cells.
        expect(estimateBudget(qwen15b, {...k8v4, budget: {kind: "mib", mib: 112}}, 8 * 2 ** 30).cells).toBe(10_082);
        // A pair llama.cpp cannot make is said in words.
        expect(
            estimateBudget(qwen15b, {...k8v4, flashAttention: false, budget: {kind: "cells", cells: 4096}}, 8 * 2 ** 30).notes
        ).toContain(
            "A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn flash attention on, or store the values as F16."
        );
    });

    it("names the policy in its notes as the app does, never by its raw id", () => {
        for (const [policy, name] of [
            ["lethe", "Lethe"],
            ["h2o", "H2O"],
            ["refreekv", "ReFreeKV"],
            ["streamingllm", "StreamingLLM"]
        ] as const) {
            const notes = estimateBudget(
                qwen15b,
                {...defaultCompressionSettings, policy, budget: {kind: "cells", cells: 4096}},
                8 * 2 ** 30
            ).notes.join(" ");
            expect(notes).toContain(`${name} prunes while the model thinks`);
            expect(notes).not.toMatch(new RegExp(`\\b${policy}\\b`));
        }
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
        expect(estimateBudget(model, {...budget, policy: "lethe"}, 2 ** 33).computeBytes! - full.computeBytes!).toBeGreaterThanOrEqual(
            512 * 4096 * 12 * 4
        );
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
        expect(
            bad({params: {...defaultCompressionSettings.params, lethe: {...defaultCompressionSettings.params.lethe, sparseRatio: 0.5}}})
                .success
        ).toBe(false);
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

    it("refuses a quantized V cache without flash attention (llama.cpp cannot make that context), in words, and repairs a stored one", () => {
        const parse = (patch: object) => compressionSettingsSchema.safeParse({...defaultCompressionSettings, ...patch});
        for (const [kvType, kvTypeV] of [
            ["q8_0", "q8_0"],
            ["q4_0", "q4_0"],
            ["q8_0", "q4_0"],
            ["q4_0", "q8_0"],
            ["f16", "q4_0"]
        ]) {
            const refused = parse({kvType, kvTypeV, flashAttention: false});
            expect(refused.success).toBe(false);
            expect(refused.error?.issues[0]).toMatchObject({
                path: ["flashAttention"],
                message:
                    "A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn flash attention on, or store the values as F16."
            });
            expect(parse({kvType, kvTypeV, flashAttention: true}).success).toBe(true);
        }
        // Quantized keys with F16 values: llama.cpp makes them without flash attention.
        expect(parse({kvType: "q4_0", kvTypeV: "f16", flashAttention: false}).success).toBe(true);
        expect(parse({kvType: "f16", kvTypeV: "f16", flashAttention: false}).success).toBe(true);
        expect(parse({kvType: "q8_0", kvTypeV: "q2_k", flashAttention: true}).success).toBe(false);

        const stored = mergeConversationSettings(defaultConversationSettings, {
            compression: {policy: "lethe", kvType: "q8_0", flashAttention: false}
        });
        expect(stored.compression).toMatchObject({policy: "lethe", kvType: "f16", kvTypeV: "f16", flashAttention: false});

        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x"
        });
        const c = services.conversations.create();
        expect(() =>
            services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, kvType: "q8_0", kvTypeV: "q4_0"}})
        ).toThrow(/V cache .* needs flash attention/);
        services.conversations.updateSettings(c.id, {
            compression: {...defaultCompressionSettings, kvType: "q8_0", kvTypeV: "q4_0", flashAttention: true}
        });
        expect(services.conversations.get(c.id).settings.compression).toMatchObject({
            kvType: "q8_0",
            kvTypeV: "q4_0",
            flashAttention: true
        });
        // A partial update of the keys alone keeps the values' type.
        services.conversations.updateSettings(c.id, {compression: {kvType: "q4_0"} as never});
        expect(services.conversations.get(c.id).settings.compression).toMatchObject({kvType: "q4_0", kvTypeV: "q4_0"});
    });

    it("reads settings stored when one type covered keys and values: that type is both", () => {
        for (const kvType of ["f16", "q8_0", "q4_0"] as const) {
            const stored = mergeConversationSettings(defaultConversationSettings, {
                compression: {policy: "h2o", kvType, flashAttention: true}
            });
            expect(stored.compression).toMatchObject({policy: "h2o", kvType, kvTypeV: kvType, flashAttention: true});
            expect(conversationSettingsSchema.safeParse(stored).success).toBe(true);
        }
        // Stored with both: each kept; a damaged value type falls back to the default.
        expect(
            mergeConversationSettings(defaultConversationSettings, {compression: {kvType: "q8_0", kvTypeV: "q4_0", flashAttention: true}})
                .compression
        ).toMatchObject({kvType: "q8_0", kvTypeV: "q4_0"});
        expect(
            mergeConversationSettings(defaultConversationSettings, {compression: {kvType: "q8_0", kvTypeV: "q3", flashAttention: true}})
                .compression
        ).toMatchObject({kvType: "q8_0", kvTypeV: "f16"});
        // The app's defaults, stored by the old version, load the same way.
        const db = new AppDatabase(":memory:");
        const services = new AppServices(db, new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
        const {kvTypeV: _, ...oldCompression} = {...defaultCompressionSettings, kvType: "q8_0" as const, flashAttention: true};
        db.settings.set("app", {theme: "dark", defaultConversationSettings: {...defaultConversationSettings, compression: oldCompression}});
        expect(services.settings.get().defaultConversationSettings.compression).toMatchObject({
            kvType: "q8_0",
            kvTypeV: "q8_0",
            flashAttention: true
        });
        expect(services.settings.get().theme).toBe("dark");
    });

    it("accepts LeanKV with its calibrated defaults and refuses a negative threshold", () => {
        const parse = (leankv: object) =>
            compressionSettingsSchema.safeParse({
                ...defaultCompressionSettings,
                policy: "leankv",
                params: {...defaultCompressionSettings.params, leankv}
            });
        expect(defaultCompressionSettings.params.leankv).toEqual({alpha: 1.2, window: 64});
        expect(parse({alpha: 0.5, window: 64}).success).toBe(true);
        expect(parse({alpha: 0, window: 0}).success).toBe(true);
        expect(parse({alpha: -1, window: 64}).error?.issues[0]?.message).toBe("alpha must be 0 (prune nothing) or more");
        expect(parse({alpha: 0.5, window: 1.5}).success).toBe(false);
    });

    it("persists a per-conversation policy and budget through the service, refusing invalid ones", () => {
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x"
        });
        const c = services.conversations.create();
        services.conversations.updateSettings(c.id, {
            compression: {...defaultCompressionSettings, policy: "refreekv", budget: {kind: "cells", cells: 1024}}
        });
        expect(services.conversations.get(c.id).settings.compression).toMatchObject({
            policy: "refreekv",
            budget: {kind: "cells", cells: 1024}
        });
        expect(() =>
            services.conversations.updateSettings(c.id, {compression: {...defaultCompressionSettings, budget: {kind: "cells", cells: 1}}})
        ).toThrow(/64 cells/);
        expect(services.conversations.get(c.id).settings.compression.budget).toEqual({kind: "cells", cells: 1024});
    });
});

describe("export", () => {
    it("writes Markdown with thinking and stats, and JSON that parses back", async () => {
        const services = new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x"
        });
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
