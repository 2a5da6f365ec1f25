import {afterAll, beforeAll, describe, expect, it} from "vitest";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {GenerateRequest} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

// A model with DeepSeek-R1-Distill-Qwen-1.5B's layer and head counts: a long prompt takes seconds to read here.
describe("Stop during a prefill", () => {
    const engine = new Engine({threads: 1, loadLlama: loadRuntime});

    beforeAll(async () => {
        const file = await getFixtureModel("bench-1.5b-shape");
        await engine.loadModel(file, {
            id: "b",
            path: file,
            name: "b",
            sizeBytes: 0,
            architecture: null,
            contextLength: null,
            addedAt: 0,
            lastUsedAt: null,
            crashedAt: null
        });
    });
    afterAll(() => engine.dispose());

    function request(text: string, signal: AbortSignal, extra: Partial<GenerateRequest> = {}): GenerateRequest {
        return {
            history: [{role: "user", text}],
            systemPrompt: "",
            temperature: 0.8,
            maxTokens: 4,
            seed: 1,
            signal,
            kv: {compression: defaultCompressionSettings, cells: 8192},
            onChunk() {},
            ...extra
        };
    }

    for (const policy of ["full", "lethe"] as const) {
        it(`ends a long prompt's evaluation within a second of the stop (${policy}), and the next answer works`, async () => {
            const kv = {compression: {...defaultCompressionSettings, policy}, cells: 8192};
            const abort = new AbortController();
            let stoppedAt = 0;
            const stop = () => {
                if (stoppedAt === 0) {
                    stoppedAt = performance.now();
                    abort.abort();
                }
            };
            // Stopped once the prompt is partly read (or after a second, whichever comes first).
            const timer = setTimeout(stop, 1000);
            let progress = 0;
            const result = await engine.generate(
                request("one two three four five six seven eight nine ten ".repeat(200), abort.signal, {
                    kv,
                    onRebuild: (value) => {
                        progress = value;
                        if (value > 0.05) stop();
                    }
                })
            );
            const latency = performance.now() - stoppedAt;
            clearTimeout(timer);
            expect(result.stopReason).toBe("abort");
            expect(progress).toBeLessThan(1);
            expect(latency).toBeLessThan(1000);

            const next = await engine.generate(request("short", new AbortController().signal, {kv}));
            expect(next.stopReason).toMatch(/eogToken|maxTokens/);
        });
    }
});
