// The GPU layers setting: stored per model, checked at the IPC boundary and against the model, passed to the engine's
// load, and the fit estimate's split of weights, KV cache and compute buffer between VRAM and RAM.
import {describe, expect, it} from "vitest";
import type {BuildInfo} from "../../../preload/contract.js";
import {AppDatabase} from "../../../main/db/AppDatabase.js";
import {createDispatch} from "../../../main/ipc/dispatch.js";
import {createHandlers} from "../../../main/ipc/handlers.js";
import {AppServices} from "../../../main/services/AppServices.js";
import {gpuOffload} from "../../../main/kv/gpuOffload.js";
import {getFixtureModel} from "../../fixtures/gguf/fixtures.js";
import {FakeEngine} from "./FakeEngine.js";

const cuda: BuildInfo = {kind: "local", gpu: "cuda", patched: true, llamaCppRelease: "b1", seriesHash: null};

function setup() {
    const engine = new FakeEngine();
    const services = new AppServices(new AppDatabase(":memory:"), engine.asEngine(), () => {}, {version: "t", modelsDir: "/tmp/x"});
    return {engine, services};
}

describe("gpuOffload", () => {
    // 4 layers of 200 bytes, an output layer of 100, token embeddings of 100; KV 100 per layer; compute 50.
    const model = {layers: 4, sizeBytes: 1100, weightsBytes: 1000, layerWeightsBytes: 800, outputWeightsBytes: 100, tiedOutputBytes: 0};
    const input = {kvBytes: 400, computeBytes: 50, modelLoaded: false, freeVramBytes: 10_000, freeRamBytes: 10_000};

    it("puts each offloaded layer's weights and KV in VRAM, the output layer last, the token embeddings never", () => {
        expect(gpuOffload(model, {...input, gpuLayers: 0})).toMatchObject({
            gpuLayers: 0,
            totalLayers: 5,
            vramBytes: 0,
            ramBytes: 1000 + 400 + 50
        });
        expect(gpuOffload(model, {...input, gpuLayers: 2})).toMatchObject({gpuLayers: 2, vramBytes: 400 + 200 + 50, ramBytes: 600 + 200});
        expect(gpuOffload(model, {...input, gpuLayers: 4})).toMatchObject({vramBytes: 800 + 400 + 50, ramBytes: 200});
        expect(gpuOffload(model, {...input, gpuLayers: "max"})).toMatchObject({gpuLayers: 5, vramBytes: 900 + 400 + 50, ramBytes: 100});
        expect(gpuOffload(model, {...input, gpuLayers: 99}).gpuLayers).toBe(5);
    });

    it("copies tied embeddings to the output layer and keeps them in RAM for the input", () => {
        const tied = {...model, outputWeightsBytes: 10, tiedOutputBytes: 190};
        expect(gpuOffload(tied, {...input, gpuLayers: "max"})).toMatchObject({vramBytes: 800 + 10 + 190 + 400 + 50, ramBytes: 190});
    });

    it("resolves auto to the most layers that fit in free VRAM, and counts no weights for a loaded model", () => {
        expect(gpuOffload(model, {...input, gpuLayers: "auto", freeVramBytes: 700}).gpuLayers).toBe(2);
        expect(gpuOffload(model, {...input, gpuLayers: "auto", freeVramBytes: 10}).gpuLayers).toBe(0);
        expect(gpuOffload(model, {...input, gpuLayers: "auto"}).gpuLayers).toBe(5);
        expect(gpuOffload(model, {...input, gpuLayers: 2, modelLoaded: true})).toMatchObject({vramBytes: 200 + 50, ramBytes: 200});
    });
});

describe("GPU layers setting", () => {
    it("is auto for a new model, stored per model, and passed to the engine's load", async () => {
        const {engine, services} = setup();
        const model = await services.models.add(await getFixtureModel("tiny-qwen3"));
        expect(model.gpuLayers).toBe("auto");
        expect(services.models.setGpuLayers(model.id, 3).gpuLayers).toBe(3);
        expect(services.models.list()[0]!.gpuLayers).toBe(3);
        // Adding the same file again refreshes its metadata and keeps the setting.
        expect((await services.models.add(model.path)).gpuLayers).toBe(3);
        await services.models.load(model.id);
        expect(engine.loads.at(-1)).toEqual({path: model.path, options: {gpuLayers: 3}});
        services.models.setGpuLayers(model.id, "max");
        await services.models.load(model.id);
        expect(engine.loads.at(-1)!.options).toEqual({gpuLayers: "max"});
        expect(engine.status.model?.gpuLayers).toBe("max");
    });

    it("refuses more layers than the model has (its 4 and the output layer), and malformed values at the IPC boundary", async () => {
        const {services} = setup();
        const model = await services.models.add(await getFixtureModel("tiny-qwen3"));
        expect(() => services.models.setGpuLayers(model.id, 6)).toThrow(/4 layers and an output layer: at most 5/);
        expect(services.models.setGpuLayers(model.id, 5).gpuLayers).toBe(5);
        const dispatch = createDispatch(createHandlers(services, {openExternal: async () => {}, pickModelFile: async () => null}));
        for (const gpuLayers of [-1, 2.5, "half", null, "MAX", 1e9])
            expect(await dispatch("models:setGpuLayers", {id: model.id, gpuLayers}), String(gpuLayers)).toMatchObject({
                ok: false,
                error: {code: "BAD_REQUEST"}
            });
        expect(await dispatch("models:setGpuLayers", {id: model.id, gpuLayers: 6})).toMatchObject({
            ok: false,
            error: {code: "BAD_REQUEST"}
        });
        expect(await dispatch("models:setGpuLayers", {id: "missing", gpuLayers: 1})).toMatchObject({ok: false, error: {code: "NOT_FOUND"}});
        expect(await dispatch("models:setGpuLayers", {id: model.id, gpuLayers: "auto"})).toMatchObject({
            ok: true,
            value: {gpuLayers: "auto"}
        });
    });

    it("moves the fit estimate between VRAM and RAM on a GPU build: with 0 layers the weights use RAM", async () => {
        const {engine, services} = setup();
        const model = await services.models.add(await getFixtureModel("tiny-qwen3"));
        const compression = {
            ...services.settings.get().defaultConversationSettings.compression,
            budget: {kind: "cells" as const, cells: 1024}
        };
        // A CPU build: everything in RAM, no split.
        expect((await services.compression.estimate(compression, model.id)).offload ?? null).toBeNull();

        engine.status = {...engine.status, build: cuda};
        engine.freeVramBytes = 8 * 2 ** 30;
        services.models.setGpuLayers(model.id, 0);
        const none = await services.compression.estimate(compression, model.id);
        expect(none.offload).toMatchObject({
            gpuLayers: 0,
            totalLayers: 5,
            vramBytes: 0,
            ramBytes: none.weightsBytes! + none.bytes + none.computeBytes!
        });
        expect(none.notes.join(" ")).toMatch(/No layer is on the GPU/);

        services.models.setGpuLayers(model.id, "max");
        const all = await services.compression.estimate(compression, model.id);
        const inspection = services.models.inspectionOf(model.id);
        // The header's walk of the tensors: the output layer is output.weight (581 x 160 f16) and its f32 norm; the
        // token embeddings (581 x 160 f16) are what is neither a layer nor the output.
        expect(inspection.outputWeightsBytes).toBe(581 * 160 * 2 + 160 * 4);
        expect(inspection.weightsBytes! - inspection.layerWeightsBytes! - inspection.outputWeightsBytes!).toBe(581 * 160 * 2);
        expect(inspection.tiedOutputBytes).toBe(0);
        expect(all.offload).toMatchObject({
            gpuLayers: 5,
            target: "the GPU",
            ramBytes: inspection.weightsBytes! - inspection.layerWeightsBytes! - inspection.outputWeightsBytes!
        });
        expect(all.offload!.vramBytes + all.offload!.ramBytes).toBe(all.neededBytes + inspection.tiedOutputBytes!);
        expect(all.fits).toBe(true);

        // Too little VRAM for every layer: does not fit; auto takes fewer layers.
        engine.freeVramBytes = all.offload!.vramBytes - 1;
        expect((await services.compression.estimate(compression, model.id)).fits).toBe(false);
        services.models.setGpuLayers(model.id, "auto");
        const auto = await services.compression.estimate(compression, model.id);
        expect(auto.offload!.gpuLayers).toBeLessThan(5);
        expect(auto.fits).toBe(true);
    });

    it("counts the connected rpc-servers' free memory where the offloaded layers go on a CPU build", async () => {
        const {engine, services} = setup();
        const model = await services.models.add(await getFixtureModel("tiny-qwen3"));
        const compression = {
            ...services.settings.get().defaultConversationSettings.compression,
            budget: {kind: "cells" as const, cells: 1024}
        };
        const cpu: BuildInfo = {kind: "local", gpu: false, patched: true, llamaCppRelease: "b1", seriesHash: null};
        const server = {
            endpoint: "10.0.0.5:50052",
            devices: [{name: "RPC0", description: "10.0.0.5:50052", freeBytes: 2 ** 30, totalBytes: 2 ** 31}]
        };
        engine.freeVramBytes = 2 ** 30;
        services.models.setGpuLayers(model.id, "max");
        // A server that could not be used changes nothing: RAM only.
        engine.status = {
            ...engine.status,
            build: {...cpu, rpc: {protocol: "7.0.0", servers: [{...server, connected: false, error: "connection refused", devices: []}]}}
        };
        expect((await services.compression.estimate(compression, model.id)).offload ?? null).toBeNull();
        engine.status = {...engine.status, build: {...cpu, rpc: {protocol: "7.0.0", servers: [{...server, connected: true, error: null}]}}};
        const split = await services.compression.estimate(compression, model.id);
        expect(split.offload).toMatchObject({gpuLayers: 5, freeVramBytes: 2 ** 30, target: "the RPC servers"});
        services.models.setGpuLayers(model.id, 2);
        expect((await services.compression.estimate(compression, model.id)).notes.join(" ")).toMatch(
            /2 of 5 layers are on the RPC servers/
        );
        services.models.setGpuLayers(model.id, "max");
        engine.freeVramBytes = split.offload!.vramBytes - 1;
        expect((await services.compression.estimate(compression, model.id)).fits).toBe(false);
    });
});
