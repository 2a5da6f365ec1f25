import {describe, expect, it} from "vitest";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {getFixtureModel} from "../../fixtures/gguf/fixtures.js";
import {FakeEngine} from "./FakeEngine.js";

function services() {
    return new AppServices(new AppDatabase(":memory:"), new FakeEngine().asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
}

describe("model details and fit before loading", () => {
    it("reports the declared head size, the KV cost it implies, the weights, and what loading at the default budget needs", async () => {
        const app = services();
        const model = await app.models.add(await getFixtureModel("tiny-qwen3"));
        const details = await app.modelDetails(model.id);
        // 4 layers x 2 KV heads x (64 + 64) f16 elements: 2,048 bytes (160 / 4 = 40 per head would say 1,280).
        expect(details).toMatchObject({headCount: 4, embeddingLength: 160, keyLength: 64, kvBytesPerToken: 2048});
        expect(details.weightsBytes).toBeGreaterThan(1_000_000);
        // Its chat template has a thought segment: thinking can be turned off.
        expect(app.models.inspectionOf(model.id).thinkingToggle).toBe(true);
        const fit = details.fit!;
        expect(fit.modelLoaded).toBe(false);
        expect(fit.bytesPerCell).toBe(2048);
        expect(fit.neededBytes).toBe(details.weightsBytes! + fit.bytes + fit.computeBytes!);
    });

    it("reads a model stored by an older version again, so the estimate has its head size and weights", async () => {
        const app = services();
        const model = await app.models.add(await getFixtureModel("tiny-qwen3-mqa"));
        const row = app.db.models.get(model.id)!;
        const {keyLength: _k, valueLength: _v, weightsBytes: _w, ...old} = JSON.parse(row.metadata) as Record<string, unknown>;
        app.db.models.upsert({...row, metadata: JSON.stringify(old)});
        expect(app.models.inspectionOf(model.id).weightsBytes).toBeUndefined();

        const estimate = await app.compression.estimate(
            {...app.settings.get().defaultConversationSettings.compression, budget: {kind: "cells", cells: 1024}},
            model.id
        );
        expect(estimate.bytesPerCell).toBe(4 * 1 * (64 + 64) * 2);
        expect(estimate.weightsBytes).toBeGreaterThan(1_000_000);
        expect(app.models.inspectionOf(model.id).keyLength).toBe(64);
    });
});

describe("generation capabilities of the loaded model", () => {
    it("say whether thinking can be turned off and what its family recommends; nothing without a model", () => {
        const engine = new FakeEngine();
        const app = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
        engine.inspection = {...engine.inspection!, name: "Qwen3-4B", architecture: "qwen3", thinkingToggle: true};
        expect(app.models.capabilities()).toMatchObject({thinkingToggle: true, recommended: {label: "Qwen3 model card"}});
        engine.inspection = {...engine.inspection, name: "tiny", architecture: "llama", thinkingToggle: false};
        expect(app.models.capabilities()).toEqual({thinkingToggle: false, recommended: null});
        engine.inspection = null;
        expect(app.models.capabilities()).toBeNull();
    });
});
