import {describe, expect, it, vi} from "vitest";
import type {Events} from "../../../preload/contract.js";
import {kvBounds} from "../../../preload/kvBounds.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {maxBudgetCells, minBudgetCells} from "../../../main/kv/budgetCap.js";
import type {ModelInspection} from "../../../main/engine/EngineApi.js";
import {assertBudgetAboveMin, resolveKv} from "../../../main/kv/resolveKv.js";
import {ponderExtensionSchema} from "../../../main/server/openaiSchemas.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {estimateBudget} from "../../../main/services/CompressionService.js";
import {compressionSettingsSchema, defaultCompressionSettings} from "../../../main/services/schemas.js";
import {budgetLimits} from "../../../renderer/lib/policies.js";
import {FakeEngine} from "./FakeEngine.js";

const qwen15b: ModelInspection = {
    path: "/m.gguf",
    name: "R1-Distill-Qwen-1.5B",
    sizeBytes: 1,
    architecture: "qwen2",
    contextLength: 4096,
    layers: 28,
    headCount: 12,
    headCountKv: 2,
    embeddingLength: 1536,
    hasChatTemplate: true
};
const gib = 2 ** 30;

describe("a generation's KV settings resolved once", () => {
    it("turns each kind of budget into cells on the model, capped, and is frozen", () => {
        const at = (budget: typeof defaultCompressionSettings.budget, free = 8 * gib) =>
            resolveKv(qwen15b, {...defaultCompressionSettings, budget}, free);
        expect(at({kind: "cells", cells: 1000})).toMatchObject({
            cells: 1000,
            bytesPerCell: 28_672,
            maxCells: 4096,
            aboveCap: null,
            cappedByMemory: false
        });
        expect(at({kind: "mib", mib: 56}).cells).toBe(2048);
        expect(at({kind: "auto"}).cells).toBe(4096);
        // Auto within half the free memory, in steps of 1,024 cells: 64 MiB free holds 1,170 cells of 28,672 bytes at half.
        expect(at({kind: "auto"}, 64 * 2 ** 20)).toMatchObject({cells: 1024, cappedByMemory: true});
        const above = at({kind: "cells", cells: 10_000});
        expect(above.cells).toBe(4096);
        expect(above.aboveCap?.code).toBe("BUDGET_ABOVE_CONTEXT");
        expect(Object.isFrozen(above)).toBe(true);
        expect(() => resolveKv({...qwen15b, layers: null}, defaultCompressionSettings, gib)).toThrow(/layer or head counts/);
    });

    it("refuses a budget in MiB that rounds below the smallest budget as too small, naming the smallest", () => {
        const at = (budget: typeof defaultCompressionSettings.budget) =>
            resolveKv(qwen15b, {...defaultCompressionSettings, budget}, 8 * gib);
        // 0.01 MiB is 0 cells of 28,672 bytes; 64 cells are 1.75 MiB.
        expect(() => assertBudgetAboveMin(at({kind: "mib", mib: 0.01}))).toThrow(
            "A KV budget of 0.01 MiB holds 0 cells of f16 KV, which is below the smallest budget of 1.75 MiB (64 cells): ask for at least that much"
        );
        expect(() => assertBudgetAboveMin(at({kind: "mib", mib: 0.01}))).not.toThrow(/free memory/);
        expect(() => assertBudgetAboveMin(at({kind: "mib", mib: 1.75}))).not.toThrow();
        expect(() => assertBudgetAboveMin(at({kind: "cells", cells: minBudgetCells}))).not.toThrow();
    });

    it("is what the estimate shows", () => {
        for (const budget of [
            {kind: "cells", cells: 300},
            {kind: "cells", cells: 9000},
            {kind: "mib", mib: 100},
            {kind: "auto"}
        ] as const) {
            for (const free of [32 * 2 ** 20, 8 * gib]) {
                const compression = {...defaultCompressionSettings, budget};
                const resolved = resolveKv(qwen15b, compression, free);
                const estimate = estimateBudget(qwen15b, compression, free);
                expect({
                    cells: estimate.cells,
                    bytesPerCell: estimate.bytesPerCell,
                    maxCells: estimate.maxCells,
                    aboveCap: estimate.aboveCap
                }).toEqual({
                    cells: resolved.cells,
                    bytesPerCell: resolved.bytesPerCell,
                    maxCells: resolved.maxCells,
                    aboveCap: resolved.aboveCap
                });
            }
        }
    });

    it("gives chat its cells without the estimate", async () => {
        const engine = new FakeEngine();
        const services = new AppServices(
            new AppDatabase(":memory:"),
            engine.asEngine(),
            <C extends keyof Events>(_channel: C, _payload: Events[C]) => {},
            {version: "test", modelsDir: "/tmp/ponder-test-models", chat: {flushIntervalMs: 0}}
        );
        const estimate = vi.spyOn(services.compression, "estimate");
        const conversation = services.conversations.create();
        const compression = {...defaultCompressionSettings, policy: "lethe" as const, budget: {kind: "cells" as const, cells: 512}};
        services.conversations.updateSettings(conversation.id, {compression});
        services.chat.send(conversation.id, "What is 2 + 2?");
        await services.chat.idle();
        expect(estimate).not.toHaveBeenCalled();
        expect(engine.requests.at(-1)?.kv).toEqual({compression, cells: 512});
    });

    it("gives completions their cells and fit without the estimate, as the estimate would show them", async () => {
        const engine = new FakeEngine();
        const services = new AppServices(
            new AppDatabase(":memory:"),
            engine.asEngine(),
            <C extends keyof Events>(_channel: C, _payload: Events[C]) => {},
            {version: "test", modelsDir: "/tmp/ponder-test-models"}
        );
        const lethe = {...defaultCompressionSettings, policy: "lethe" as const, budget: {kind: "cells" as const, cells: 768}};
        const shown = await services.compression.estimate(lethe);
        const estimate = vi.spyOn(services.compression, "estimate");
        const resolve = vi.spyOn(services.compression, "resolve");
        const result = await services.completions.complete({
            history: [{role: "user", text: "hi"}],
            systemPrompt: "",
            temperature: 0,
            maxTokens: 10,
            policy: "lethe",
            budget: {kind: "cells", cells: 768},
            signal: new AbortController().signal,
            onChunk: () => {}
        });
        expect(estimate).not.toHaveBeenCalled();
        expect(resolve).toHaveBeenCalledTimes(1);
        const resolved = (await resolve.mock.results[0]!.value) as Awaited<ReturnType<typeof services.compression.resolve>>;
        expect(engine.requests.at(-1)?.kv).toEqual({compression: resolved.compression, cells: 768});
        expect(result.budgetCells).toBe(768);
        const {bytes, computeBytes, scoresBytes} = resolved.fit;
        expect({fits: resolved.fits, bytes, computeBytes, scoresBytes}).toEqual({
            fits: shown.fits,
            bytes: shown.bytes,
            computeBytes: shown.computeBytes,
            scoresBytes: shown.scoresBytes
        });
        expect(resolved.fit.scoresBytes).toBeGreaterThan(0);
    });
});

describe("the bounds of a KV budget", () => {
    it("are written once, and each check reads them", () => {
        expect([minBudgetCells, maxBudgetCells]).toEqual([kvBounds.minCells, kvBounds.maxCells]);
        expect(budgetLimits).toMatchObject(kvBounds);
        const settings = (budget: object, pruneEvery = 16) =>
            compressionSettingsSchema.safeParse({...defaultCompressionSettings, budget, pruneEvery}).success;
        expect(settings({kind: "mib", mib: kvBounds.maxMib})).toBe(true);
        expect(settings({kind: "mib", mib: kvBounds.maxMib + 1})).toBe(false);
        expect(settings({kind: "cells", cells: kvBounds.minCells})).toBe(true);
        expect(settings({kind: "cells", cells: kvBounds.minCells - 1})).toBe(false);
        expect(settings({kind: "cells", cells: kvBounds.maxCells + 1})).toBe(false);
        expect(settings({kind: "auto"}, kvBounds.maxPruneEvery)).toBe(true);
        expect(settings({kind: "auto"}, kvBounds.maxPruneEvery + 1)).toBe(false);
        expect(settings({kind: "auto"}, kvBounds.minPruneEvery - 1)).toBe(false);
        expect(ponderExtensionSchema.safeParse({budget: {mib: kvBounds.maxMib}}).success).toBe(true);
        expect(ponderExtensionSchema.safeParse({budget: {mib: kvBounds.maxMib + 1}}).success).toBe(false);
        expect(ponderExtensionSchema.safeParse({budget: {cells: kvBounds.minCells - 1}}).success).toBe(false);
    });
});
