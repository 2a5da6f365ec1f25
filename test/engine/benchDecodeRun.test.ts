// The bench's decode run (test/bench/decodeRun.ts, the speed and overhead suites) through the patched engine: each policy
// gets what it reads and nothing else, as in the app (the controller turns it on), and LAVa prunes by its value norms.
import type {LlamaModel, Token} from "node-llama-cpp";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {PolicyId} from "../../preload/contract.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {decodeRun} from "../bench/decodeRun.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

describe("the bench's decode run (endless: tiny-qwen2's shape, no end)", () => {
    let model: LlamaModel;
    const prompt = Array.from({length: 32}, (_, i) => (((i * 31) % 200) + 10) as Token);
    const cells = 128;
    const length = 384;

    beforeAll(async () => {
        const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
        model = await llama.loadModel({modelPath: await getFixtureModel("endless")});
    });
    afterAll(async () => {
        await model?.dispose();
    });

    const run = (policy: PolicyId) =>
        decodeRun(model, {
            prompt,
            length,
            cells,
            window: 64,
            threads: 1,
            compression: {...defaultCompressionSettings, policy, pruneEvery: 16}
        });

    it("runs LAVa with its value norms and its window's rows scored, within the budget", async () => {
        const lava = await run("lava");
        expect(lava.reads).toEqual({scoringRows: 32, retention: false, valueNorms: true});
        // a round that read no norms would have thrown (lavaScores), so rounds ran on them
        expect(lava.pruneRounds).toBeGreaterThan(10);
        expect(lava.points).toHaveLength(length / 64);
        // live cells within the budget at every point: Full's bytes count the tokens seen (the newest one may not be in yet)
        for (const point of lava.points)
            expect(point.liveBytes / point.fullBytes).toBeLessThanOrEqual(cells / (prompt.length + point.tokens - 1));
    });

    it("leaves the value norms off for the policies that do not read them", async () => {
        expect((await run("h2o")).reads).toEqual({scoringRows: 512, retention: false, valueNorms: false});
        expect((await run("streamingllm")).reads).toEqual({scoringRows: 0, retention: false, valueNorms: false});
    });
});
