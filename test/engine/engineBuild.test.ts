// The engine build chosen in the settings, on the builds this machine has: only the patched CPU build (no GPU here), so a
// GPU choice shows the fallback path: the CPU build runs and the build info says why. The GPU builds themselves are
// tested with fake folders only (test/unit/main/engineBuilds.test.ts).
import path from "node:path";
import {describe, expect, it} from "vitest";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {EngineProxy} from "../../main/engine/host/EngineProxy.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel, REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {spawnTestEngine} from "./spawnTestEngine.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");

describe("the engine build", () => {
    it("auto and cpu load the patched CPU build; a backend with no build falls back to it and says so", async () => {
        for (const build of ["auto", "cpu"] as const) {
            const runtime = await loadRuntime({build});
            expect(runtime.build).toMatchObject({kind: "local", gpu: false, patched: true, requested: build, fallback: null});
            expect(runtime.warning).toBeUndefined();
            await runtime.llama.dispose();
        }
        const runtime = await loadRuntime({build: "cuda"});
        expect(runtime.build).toMatchObject({kind: "local", gpu: false, patched: true, requested: "cuda"});
        expect(runtime.build.fallback).toBe("No CUDA build is present: running the CPU build instead.");
        expect(runtime.warning).toBe(runtime.build.fallback);
        await runtime.llama.dispose();
    });

    it("an engine in this process loads another build and the model again", async () => {
        const engine = new Engine({loadLlama: loadRuntime, runtime: {build: "cpu"}, threads: 1});
        try {
            const model = await getFixtureModel("tiny-qwen2");
            await engine.loadModel(model, null);
            const build = await engine.restart({build: "metal"});
            expect(build).toMatchObject({
                gpu: false,
                requested: "metal",
                fallback: "No Metal build is present: running the CPU build instead."
            });
            expect(engine.status).toMatchObject({state: "ready", build: {requested: "metal"}, message: build.fallback});
            expect(engine.inspection?.path).toBe(model);
            const result = await engine.generate({
                history: [{role: "user", text: "hi"}],
                systemPrompt: "",
                temperature: 0,
                maxTokens: 4,
                signal: new AbortController().signal,
                kv: {compression: defaultCompressionSettings, cells: 256},
                onChunk: () => {}
            });
            expect(result.stopReason).not.toBe("abort");
        } finally {
            await engine.dispose();
        }
    });

    it("restarts the engine process on the chosen build and loads the model again", async () => {
        const proxy = new EngineProxy({spawn: spawnTestEngine(), runtime: {build: "cpu"}});
        try {
            expect(await proxy.start()).toMatchObject({gpu: false, patched: true, requested: "cpu", fallback: null});
            await proxy.loadModel(demoModel, null);
            const firstPid = proxy.pid;

            const build = await proxy.restart({build: "vulkan"});
            expect(build).toMatchObject({
                gpu: false,
                patched: true,
                requested: "vulkan",
                fallback: "No Vulkan build is present: running the CPU build instead."
            });
            expect(proxy.pid).not.toBe(firstPid);
            expect(proxy.status).toMatchObject({state: "ready", build: {requested: "vulkan"}, message: build.fallback});
            expect(proxy.inspection?.path).toBe(demoModel);

            await proxy.restart({build: "auto"});
            expect(proxy.status).toMatchObject({
                state: "ready",
                build: {gpu: false, requested: "auto", fallback: null},
                message: "The engine now runs the CPU build (patched)."
            });
        } finally {
            await proxy.dispose();
        }
    });
});
