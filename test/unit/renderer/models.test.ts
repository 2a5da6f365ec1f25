import {describe, expect, test} from "vitest";
import type {EngineStatus, ModelInfo} from "../../../preload/contract.js";
import {createModels} from "../../../renderer/state/models.svelte.js";
import {createFakeBridge} from "./fakeBridge.js";

const model = (id: string, path: string): ModelInfo => ({
    id,
    path,
    name: path.split("/").at(-1)!,
    sizeBytes: 1024,
    architecture: "qwen2",
    contextLength: 4096,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});
const status = (state: EngineStatus["state"], loaded: ModelInfo | null = null, progress: number | null = null): EngineStatus => ({
    state,
    model: loaded,
    progress,
    message: null,
    build: {kind: "local", gpu: false, patched: true, llamaCppRelease: "b6000", seriesHash: "abc"}
});

describe("models state", () => {
    test("refresh reads the known models and the engine status", async () => {
        const bridge = createFakeBridge();
        bridge.reply("models:list", [model("m1", "/models/a.gguf")]);
        bridge.reply("app:status", {version: "0.1.0", engine: status("idle")});
        const models = createModels(bridge.api);
        await models.refresh();
        expect(models.state.models.map((m) => m.id)).toEqual(["m1"]);
        expect(models.state.version).toBe("0.1.0");
        expect(models.state.engine?.state).toBe("idle");
        expect(models.state.error).toBeNull();
    });

    test("without a file dialog (headless), pick asks for a typed path, which add registers", async () => {
        const bridge = createFakeBridge();
        bridge.reply("models:pick", null);
        bridge.handle("models:add", ({path}) => ({ok: true, value: model("m2", path)}));
        const models = createModels(bridge.api);
        expect(await models.pick()).toBeNull();
        expect(models.state.pickUnavailable).toBe(true);

        models.state.path = "  /models/b.gguf ";
        const added = await models.add();
        expect(added?.path).toBe("/models/b.gguf");
        expect(models.state.models).toHaveLength(1);
        expect(models.state.path).toBe("");
        expect(models.state.pickUnavailable).toBe(false);
    });

    test("Get TRIM-KV gates: the picked weights (and config) are converted, the result said in words, the details read again", async () => {
        const bridge = createFakeBridge();
        const converted: unknown[] = [];
        bridge.reply("models:pickTrimkv", {weights: "/dl/trimkv_weights.pth", config: "/dl/config.json"});
        bridge.handle("models:convertTrimkv", (request) => {
            converted.push(request);
            return {
                ok: true,
                value: {layers: 28, hidden: 512, budget: 512, baseModel: "Qwen/Qwen3-1.7B", source: "converted from trimkv_weights.pth"}
            };
        });
        bridge.reply("models:details", {retention: {available: true, reason: null}} as never);
        const models = createModels(bridge.api);
        expect(await models.getTrimkvGates("m1")).toBe(true);
        expect(converted).toEqual([{id: "m1", weights: "/dl/trimkv_weights.pth", config: "/dl/config.json"}]);
        expect(models.state.trimkvResult).toEqual({
            id: "m1",
            ok: true,
            text: "Converted 28 layers of gates (hidden 512), trained at a budget of 512 cells for Qwen/Qwen3-1.7B"
        });
        expect(models.state.details.m1?.retention).toEqual({available: true, reason: null});
        expect(models.state.convertingId).toBeNull();

        bridge.reply("models:pickTrimkv", {weights: "/dl/rg2.pth", config: null});
        bridge.handle("models:convertTrimkv", () => ({
            ok: false,
            error: {code: "BAD_REQUEST", message: 'The TRIM-KV gates could not be converted: config.json says retention_gate "rg2"'}
        }));
        expect(await models.getTrimkvGates("m1")).toBe(false);
        expect(models.state.trimkvResult).toMatchObject({id: "m1", ok: false, text: expect.stringMatching(/retention_gate "rg2"/)});

        bridge.reply("models:pickTrimkv", null); // cancelled: nothing converted, nothing said
        converted.length = 0;
        expect(await models.getTrimkvGates("m1")).toBe(false);
        expect(converted).toEqual([]);
        expect(models.state.trimkvResult).toBeNull();
    });

    test("a picked file is added", async () => {
        const bridge = createFakeBridge();
        bridge.reply("models:pick", "/models/c.gguf");
        bridge.handle("models:add", ({path}) => ({ok: true, value: model("m3", path)}));
        const models = createModels(bridge.api);
        expect((await models.pick())?.id).toBe("m3");
    });

    test("load follows engine:status events to ready", async () => {
        const bridge = createFakeBridge();
        const m1 = model("m1", "/models/a.gguf");
        let finish: () => void = () => {};
        bridge.handle("models:load", () => new Promise((resolve) => (finish = () => resolve({ok: true, value: status("ready", m1)}))));
        const models = createModels(bridge.api);
        const loading = models.load("m1");
        expect(models.busy).toBe(true);
        bridge.emit("engine:status", status("loading", null, 0.4));
        expect(models.state.engine?.progress).toBe(0.4);
        finish();
        expect(await loading).toBe(true);
        expect(models.busy).toBe(false);
        expect(models.loadedModel?.id).toBe("m1");
    });

    test("errors surface as readable messages", async () => {
        const bridge = createFakeBridge();
        const models = createModels(bridge.api);
        models.state.path = "";
        expect(await models.add()).toBeNull();
        expect(models.state.error).toBe("Enter the path of a .gguf model file");

        bridge.handle("models:add", () => ({ok: false, error: {code: "MODEL_INVALID", message: "Not a GGUF file: /etc/passwd"}}));
        expect(await models.add("/etc/passwd")).toBeNull();
        expect(models.state.error).toBe("Could not add the model: Not a GGUF file: /etc/passwd");

        bridge.reply("models:load", {...status("error"), message: "Out of memory"});
        expect(await models.load("m1")).toBe(false);
        expect(models.state.error).toBe("Could not load the model: Out of memory");
    });

    test("an error goes once the person moves on: another action, an edited path, a model that became ready", async () => {
        const bridge = createFakeBridge();
        const models = createModels(bridge.api);
        const fail = () => bridge.handle("models:add", () => ({ok: false, error: {code: "MODEL_INVALID", message: "Not a GGUF file"}}));
        fail();
        await models.add("/etc/passwd");
        expect(models.state.error).toMatch(/Could not add the model/);
        bridge.handle("models:details", () => ({ok: false, error: {code: "NOT_FOUND", message: "gone"}}));
        await models.toggleDetails("m1");
        expect(models.state.error).toBeNull();

        await models.add("/etc/passwd");
        models.clearError();
        expect(models.state.error).toBeNull();

        await models.add("/etc/passwd");
        bridge.emit("engine:status", status("ready", model("m1", "/models/a.gguf")));
        expect(models.state.error).toBeNull();
    });

    test("details are fetched once and toggled; remove forgets the model", async () => {
        const bridge = createFakeBridge();
        const m1 = model("m1", "/models/a.gguf");
        bridge.reply("models:list", [m1, model("m2", "/models/b.gguf")]);
        bridge.reply("app:status", {version: "0.1.0", engine: status("ready", m1)});
        bridge.handle("models:details", ({id}) => ({
            ok: true,
            value: {
                ...model(id, "/models/a.gguf"),
                layers: 28,
                headCount: 28,
                headCountKv: 4,
                embeddingLength: 3584,
                keyLength: 128,
                kvBytesPerToken: 57_344,
                weightsBytes: 4_000_000_000,
                parameterCount: 7_600_000_000,
                quantization: "Q4_K",
                compressionSupported: true,
                compressionNote: null,
                fit: null
            }
        }));
        const models = createModels(bridge.api);
        await models.refresh();
        await models.toggleDetails("m2");
        expect(models.state.detailsId).toBe("m2");
        expect(models.state.details.m2?.kvBytesPerToken).toBe(57_344);
        await models.toggleDetails("m2");
        expect(models.state.detailsId).toBeNull();
        await models.toggleDetails("m2");
        expect(bridge.calls.filter((call) => call.channel === "models:details")).toHaveLength(1);

        bridge.fail("models:remove", "BUSY", "This model is loaded: load another model before removing it");
        expect(await models.remove("m1")).toBe(false);
        expect(models.state.error).toBe("Could not remove the model: This model is loaded: load another model before removing it");
        bridge.reply("models:remove", undefined);
        expect(await models.remove("m2")).toBe(true);
        expect(models.state.models.map((entry) => entry.id)).toEqual(["m1"]);
        expect(models.state.detailsId).toBeNull();
    });

    test("setting a model's GPU layers stores it and reads the details (and their fit) again; a refusal says why", async () => {
        const bridge = createFakeBridge();
        bridge.reply("models:list", [model("m1", "/models/a.gguf")]);
        bridge.reply("app:status", {version: "0.1.0", engine: status("idle")});
        bridge.handle("models:setGpuLayers", ({id, gpuLayers}) => ({ok: true, value: {...model(id, "/models/a.gguf"), gpuLayers}}));
        bridge.handle("models:details", ({id}) => ({
            ok: true,
            value: {
                ...model(id, "/models/a.gguf"),
                gpuLayers: 0,
                layers: 4,
                headCount: 4,
                headCountKv: 2,
                embeddingLength: 64,
                keyLength: 16,
                kvBytesPerToken: 512,
                weightsBytes: 1000,
                parameterCount: 250,
                quantization: "F32",
                compressionSupported: true,
                compressionNote: null,
                fit: null
            }
        }));
        const models = createModels(bridge.api);
        await models.refresh();
        expect(models.state.models[0]!.gpuLayers ?? "auto").toBe("auto");
        expect(await models.setGpuLayers("m1", 0)).toBe(true);
        expect(bridge.calls.find((call) => call.channel === "models:setGpuLayers")?.payload).toEqual({id: "m1", gpuLayers: 0});
        expect(models.state.models[0]!.gpuLayers).toBe(0);
        expect(models.state.details.m1?.gpuLayers).toBe(0);

        bridge.fail("models:setGpuLayers", "BAD_REQUEST", "a.gguf has 4 layers and an output layer: at most 5 can go to the GPU");
        expect(await models.setGpuLayers("m1", 9)).toBe(false);
        expect(models.state.detailsError).toMatch(/Could not set the GPU layers: a.gguf has 4 layers/);
        expect(models.state.models[0]!.gpuLayers).toBe(0);
    });
});
