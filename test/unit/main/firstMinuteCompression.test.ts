import path from "node:path";
import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {inspectModel} from "../../../main/engine/runtime/inspectModel.js";
import type {RetentionInfo} from "../../../main/engine/retention/types.js";
import {
    demoFirstBudgetCells,
    firstMinuteCompression,
    multiFirstBudgetCells,
    shippedFirstBudgetCells
} from "../../../main/services/firstMinuteCompression.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";
import {FakeEngine} from "./FakeEngine.js";

const info = (budget: number | null): RetentionInfo => ({
    version: 1,
    gate: "trimkv-rg",
    activation: "silu",
    modelArchitecture: "llama",
    layers: 4,
    embeddingLength: 128,
    headCountKv: 4,
    hidden: 512,
    budget,
    reduction: "shared",
    source: "test",
    weightBytes: 1
});

describe("what new conversations start under", () => {
    it("is TRIM-KV with a budget that prunes for a model with gates: the shipped model's first budget, the trained budget otherwise", () => {
        const gates = {available: true as const, path: "/m.retention.gguf", info: info(512)};
        expect(firstMinuteCompression(defaultCompressionSettings, gates, demoFirstBudgetCells)).toEqual({
            ...defaultCompressionSettings,
            policy: "trimkv",
            budget: {kind: "cells", cells: demoFirstBudgetCells}
        });
        expect(shippedFirstBudgetCells).toEqual({"ponder-demo.gguf": 320, "ponder-multi.gguf": 256});
        expect(firstMinuteCompression(defaultCompressionSettings, gates, null)?.budget).toEqual({kind: "cells", cells: 512});
        // Never below the smallest budget.
        expect(firstMinuteCompression(defaultCompressionSettings, {...gates, info: info(16)}, null)?.budget).toEqual({
            kind: "cells",
            cells: 64
        });
    });

    it("keeps the defaults without gates, or when the gates' trained budget is unknown", () => {
        expect(firstMinuteCompression(defaultCompressionSettings, {available: false, reason: "no retention gates"}, 320)).toBeNull();
        expect(firstMinuteCompression(defaultCompressionSettings, {available: true, path: "/m", info: info(null)}, null)).toBeNull();
    });
});

describe("a new conversation", () => {
    const demo = path.resolve(import.meta.dirname, "../../../resources/models/ponder-demo.gguf");

    /** The app's services on a fresh database, with `model` loaded (none: a model without gates) and `bundled` shipped. */
    async function servicesFor(model: string | null, bundled?: string) {
        const engine = new FakeEngine();
        if (model) engine.inspection = await inspectModel(model);
        return new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {
            version: "t",
            modelsDir: "/tmp/x",
            ...(bundled ? {bundledModelPath: bundled} : {})
        });
    }

    it("starts under TRIM-KV at the demo's budget with the demo model (it has gates) until a default is saved", async () => {
        const services = await servicesFor(demo, demo);
        // What the budget controller is told new conversations start with, before one is made.
        expect(await services.newConversationCompression()).toMatchObject({
            source: "gates",
            compression: {policy: "trimkv", budget: {kind: "cells", cells: demoFirstBudgetCells}}
        });
        const first = await services.createConversation();
        expect(services.conversations.settingsOf(services.conversations.require(first.id)).compression).toMatchObject({
            policy: "trimkv",
            budget: {kind: "cells", cells: demoFirstBudgetCells}
        });
        expect(first.policy).toBe("trimkv");
        // A saved default wins.
        services.settings.update({
            defaultConversationSettings: {
                ...services.settings.get().defaultConversationSettings,
                compression: {...defaultCompressionSettings, policy: "lethe", budget: {kind: "cells", cells: 256}}
            }
        });
        expect((await services.createConversation()).policy).toBe("lethe");
        expect(await services.newConversationCompression()).toMatchObject({source: "default", compression: {policy: "lethe"}});
        await services.dispose();
    });

    it("starts the many-task model a fresh install loads at its first budget, and the demo model beside it at its own", async () => {
        const multi = path.resolve(import.meta.dirname, "../../../resources/models/ponder-multi.gguf");
        for (const [model, cells] of [
            [multi, multiFirstBudgetCells],
            [demo, demoFirstBudgetCells]
        ] as const) {
            const services = await servicesFor(model, multi);
            expect((await services.newConversationCompression()).compression).toMatchObject({
                policy: "trimkv",
                budget: {kind: "cells", cells}
            });
            await services.dispose();
        }
    });

    it("keeps the defaults with a model without gates", async () => {
        const services = await servicesFor(null);
        expect((await services.createConversation()).policy).toBe("full");
        expect(await services.newConversationCompression()).toEqual({source: "default", compression: defaultCompressionSettings});
        await services.dispose();
    });
});
