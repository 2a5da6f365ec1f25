import {describe, expect, it} from "vitest";
import {AppError} from "../../../main/AppError.js";
import type {EngineApi, GenerateRequest, ModelInspection} from "../../../main/engine/EngineApi.js";
import {resolveKv} from "../../../main/kv/resolveKv.js";
import {GenerationQueue, QueueAbortError} from "../../../main/services/GenerationQueue.js";
import {generationFailure, GenerationRunner} from "../../../main/services/GenerationRunner.js";
import {defaultCompressionSettings} from "../../../main/services/schemas.js";

const model: ModelInspection = {
    path: "/m.gguf",
    name: "m",
    sizeBytes: 1,
    architecture: "qwen2",
    contextLength: 4096,
    layers: 28,
    headCount: 12,
    headCountKv: 2,
    embeddingLength: 1536,
    hasChatTemplate: true
};
const compression = {...defaultCompressionSettings, budget: {kind: "cells" as const, cells: 512}};

function setup(generate: (request: GenerateRequest) => Promise<unknown>) {
    const queue = new GenerationQueue(4);
    const resolved: string[] = [];
    const engine = {generate} as unknown as EngineApi;
    const runner = new GenerationRunner(engine, queue, {
        resolve: async (settings) => {
            resolved.push(settings.policy);
            return resolveKv(model, settings, 2 ** 33);
        }
    });
    const ask = (signal = new AbortController().signal) => ({
        history: [],
        systemPrompt: "",
        temperature: 0,
        maxTokens: 1,
        signal,
        onChunk: () => {}
    });
    return {queue, resolved, runner, ask};
}

describe("the generation runner", () => {
    it("resolves the budget once its turn comes and hands the engine the resolved cells", async () => {
        const requests: GenerateRequest[] = [];
        const {queue, resolved, runner, ask} = setup(async (request) => {
            requests.push(request);
            return {stopReason: "eogToken", promptTokens: 3};
        });
        const held = await queue.acquire();
        const running = runner.run({signal: new AbortController().signal, kv: {resolve: compression}, request: () => ask()});
        await Promise.resolve();
        expect(resolved).toEqual([]);
        held();
        const {kv, result} = await running;
        expect(resolved).toEqual(["full"]);
        expect(kv.cells).toBe(512);
        expect(result.promptTokens).toBe(3);
        expect(requests[0]?.kv).toEqual({compression, cells: 512});
        expect(queue.running).toBe(false);
    });

    it("uses a value resolved before queuing as it is, and gives the turn back when the engine fails", async () => {
        const {queue, resolved, runner, ask} = setup(async () => {
            throw new AppError("ENGINE_STOPPED", "The engine stopped");
        });
        const early = resolveKv(model, {...compression, budget: {kind: "cells", cells: 1024}}, 2 ** 33);
        const failed = await runner
            .run({signal: new AbortController().signal, kv: {resolved: early}, request: () => ask()})
            .catch((err: unknown) => err);
        expect(resolved).toEqual([]);
        expect(generationFailure(failed)).toEqual({status: "interrupted", error: "The engine stopped"});
        expect(queue.running).toBe(false);
    });

    it("stops without resolving or running when its signal aborts before the turn", async () => {
        let ran = false;
        const {queue, resolved, runner, ask} = setup(async () => {
            ran = true;
            return {stopReason: "eogToken", promptTokens: 0};
        });
        const held = await queue.acquire();
        const abort = new AbortController();
        const running = runner
            .run({signal: abort.signal, kv: {resolve: compression}, request: () => ask(abort.signal)})
            .catch((err: unknown) => err);
        abort.abort();
        const failed = await running;
        held();
        expect(failed).toBeInstanceOf(QueueAbortError);
        expect(generationFailure(failed)).toEqual({status: "stopped", error: null});
        expect(generationFailure(new Error("disk"))).toEqual({status: "error", error: "disk"});
        expect([resolved, ran]).toEqual([[], false]);
    });
});
