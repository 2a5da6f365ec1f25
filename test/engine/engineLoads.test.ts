import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type {LlamaModel} from "node-llama-cpp";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {AppError} from "../../main/AppError.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {GenerationChunk} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {writeGguf, gguf} from "../fixtures/gguf/writeGguf.js";

const fullKv = {compression: defaultCompressionSettings, cells: 1024};
const modelInfo = (p: string) => ({
    id: path.basename(p),
    path: p,
    name: path.basename(p),
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});

describe("Engine loads and sends, one at a time", () => {
    /** Every model the runtime loaded, to tell which are still held, and the GPU layers each was asked for. */
    const models: LlamaModel[] = [];
    const gpuLayersAsked: unknown[] = [];
    const engine = new Engine({
        threads: 1,
        loadLlama: async () => {
            const runtime = await loadRuntime();
            const loadModel = runtime.llama.loadModel.bind(runtime.llama);
            runtime.llama.loadModel = async (options) => {
                gpuLayersAsked.push(options.gpuLayers);
                const model = await loadModel(options);
                models.push(model);
                return model;
            };
            return runtime;
        }
    });
    const live = () => models.filter((model) => !model.disposed).length;
    let dir: string;
    let qwen: string;
    let llama: string;

    beforeAll(async () => {
        dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-loads-"));
        qwen = await getFixtureModel("tiny-qwen2");
        llama = await getFixtureModel("tiny-llama");
    });
    afterAll(async () => {
        await engine.dispose();
        fs.rmSync(dir, {recursive: true, force: true});
    });

    function generate(text: string, maxTokens = 30) {
        const chunks: GenerationChunk[] = [];
        const result = engine.generate({
            history: [{role: "user", text}],
            systemPrompt: "",
            temperature: 0.8,
            maxTokens,
            seed: 1,
            signal: new AbortController().signal,
            kv: fullKv,
            onChunk: (chunk) => chunks.push(chunk)
        });
        return {chunks, result};
    }

    it("two loads at once leave one model held: the one asked for last", async () => {
        const results = await Promise.allSettled([engine.loadModel(qwen, modelInfo(qwen)), engine.loadModel(llama, modelInfo(llama))]);
        expect(results.map((result) => result.status)).toEqual(["fulfilled", "fulfilled"]);
        expect(live()).toBe(1);
        expect(engine.status).toMatchObject({state: "ready", model: {path: llama}});
    });

    it("a model that fails to load puts the working one back, which still answers", async () => {
        await engine.loadModel(qwen, modelInfo(qwen));
        // A valid header with no weights: it passes the header check and fails inside llama.cpp.
        const broken = path.join(dir, "no-weights.gguf");
        await writeGguf(broken, {
            metadata: [
                ["general.architecture", gguf.string("llama")],
                ["general.name", gguf.string("no weights")]
            ],
            tensors: []
        });
        const error = await engine.loadModel(broken, modelInfo(broken)).catch((err: unknown) => err);
        expect(error).toBeInstanceOf(AppError);
        expect((error as AppError).code).toBe("MODEL_INVALID");
        expect(engine.status).toMatchObject({
            state: "ready",
            model: {path: qwen},
            message: expect.stringMatching(/Could not load no weights.*tiny-qwen2 is loaded again/)
        });
        expect(live()).toBe(1);
        const {chunks, result} = generate("still there?");
        expect((await result).stopReason).not.toBe("abort");
        expect(chunks.length).toBeGreaterThan(0);
    });

    it("loads with the GPU layers asked for, and puts a failed load's predecessor back with its own", async () => {
        // A CPU build offloads nothing, whatever is asked: "max" or a layer count (a model set up on a GPU machine)
        // loads on the CPU instead of failing as "Not enough VRAM".
        for (const gpuLayers of [0, "auto", "max", 3] as const) {
            await engine.loadModel(qwen, modelInfo(qwen), {gpuLayers});
            expect(gpuLayersAsked.at(-1)).toBe(gpuLayers === "auto" ? "auto" : 0);
            expect(models.at(-1)!.gpuLayers).toBe(0);
            const {chunks, result} = generate("hello");
            expect((await result).stopReason).not.toBe("abort");
            expect(chunks.length).toBeGreaterThan(0);
        }
        await engine.loadModel(qwen, modelInfo(qwen), {gpuLayers: 0});
        const broken = path.join(dir, "no-weights-gpu.gguf");
        await writeGguf(broken, {
            metadata: [
                ["general.architecture", gguf.string("llama")],
                ["general.name", gguf.string("no weights")]
            ],
            tensors: []
        });
        await expect(engine.loadModel(broken, modelInfo(broken), {gpuLayers: "auto"})).rejects.toThrow(/Could not load/);
        expect(gpuLayersAsked.slice(-2)).toEqual(["auto", 0]);
        expect(engine.status).toMatchObject({state: "ready", model: {path: qwen}});
    });

    it("a send while a load runs waits for it and answers with the new model; a load while a send runs is refused", async () => {
        await engine.loadModel(qwen, modelInfo(qwen));
        const loading = engine.loadModel(llama, modelInfo(llama));
        const {chunks, result} = generate("hello", 40);
        await loading;
        expect(await result).toMatchObject({stopReason: expect.stringMatching(/eogToken|maxTokens/)});
        expect(chunks.length).toBeGreaterThan(0);
        expect(engine.status.model?.path).toBe(llama);

        const second = generate("and again", 40);
        await expect(engine.loadModel(qwen, modelInfo(qwen))).rejects.toMatchObject({code: "BUSY"});
        expect(await second.result).toMatchObject({stopReason: expect.stringMatching(/eogToken|maxTokens/)});
        expect(live()).toBe(1);
    });
});
