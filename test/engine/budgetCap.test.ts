// The engine refuses a context before llama.cpp is asked for it: a budget above the model's context (1,048,576 cells
// on a 4,096-token model allocated 2 GiB before), and one the fit estimate says does not fit in free memory.
import {LlamaModel} from "node-llama-cpp";
import {afterAll, beforeAll, describe, expect, it, vi} from "vitest";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {GenerateRequest} from "../../main/engine/EngineApi.js";
import {estimateBudget} from "../../main/services/CompressionService.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

const mib = 1024 * 1024;
const modelInfo = (p: string) => ({
    id: "m",
    path: p,
    name: "fixture",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});

describe("the engine's checks before a context is made", () => {
    let free = 64 * 1024 * mib;
    const engine = new Engine({threads: 1, loadLlama: loadRuntime, freeMemory: async () => free});
    const createContext = vi.spyOn(LlamaModel.prototype, "createContext");
    let file: string;

    beforeAll(async () => {
        file = await getFixtureModel("tiny-qwen3");
        await engine.loadModel(file, modelInfo(file));
    });
    afterAll(async () => {
        createContext.mockRestore();
        await engine.dispose();
    });

    function request(cells: number): GenerateRequest {
        return {
            history: [{role: "user", text: "hello"}],
            systemPrompt: "",
            temperature: 0,
            maxTokens: 2,
            seed: 1,
            signal: new AbortController().signal,
            kv: {compression: defaultCompressionSettings, cells},
            onChunk() {}
        };
    }

    it("refuses a budget above the model's context with its code and the cap in words, without asking llama.cpp", async () => {
        expect((await inspectModel(file)).contextLength).toBe(4096);
        createContext.mockClear();
        for (const cells of [1_048_576, 4097]) {
            await expect(engine.generate(request(cells))).rejects.toMatchObject({
                code: "BUDGET_ABOVE_CONTEXT",
                message: expect.stringMatching(/more than tiny-qwen3 can use: at most 4,096 cells, the model's context/)
            });
        }
        expect(createContext).not.toHaveBeenCalled();
        expect(engine.status.state).toBe("ready");
        // At the cap it answers.
        expect((await engine.generate(request(4096))).stopReason).toMatch(/eogToken|maxTokens/);
        expect(createContext).toHaveBeenCalledTimes(1);
    });

    it("refuses a context the fit estimate says does not fit in free memory, before llama.cpp is asked; answers once it fits", async () => {
        const inspection = await inspectModel(file);
        const estimate = estimateBudget(inspection, {...defaultCompressionSettings, budget: {kind: "cells", cells: 2048}}, 64 * 1024 * mib);
        // Free memory a little short of the KV cache and compute buffer of 2,048 cells (the weights are loaded).
        free = estimate.neededBytes - 1;
        createContext.mockClear();
        await expect(engine.generate(request(2048))).rejects.toMatchObject({
            code: "BUDGET_DOES_NOT_FIT",
            message: expect.stringMatching(
                /A KV cache of 2,048 cells \(f16 KV\) with llama\.cpp's compute buffer needs [\d.]+ MiB, and [\d.]+ MiB is free/
            )
        });
        expect(createContext).not.toHaveBeenCalled();
        free = estimate.neededBytes;
        expect((await engine.generate(request(2048))).stopReason).toMatch(/eogToken|maxTokens/);
        expect(createContext).toHaveBeenCalledTimes(1);
        // The same context is used again without a new check: nothing is allocated.
        free = 0;
        expect((await engine.generate(request(2048))).stopReason).toMatch(/eogToken|maxTokens/);
        expect(createContext).toHaveBeenCalledTimes(1);
        free = 64 * 1024 * mib;
    });
});
