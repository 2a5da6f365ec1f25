// The bench's decode run (test/bench/decodeRun.ts, the speed and overhead suites) through the patched engine: each policy
// gets what it reads and nothing else, as in the app (the controller turns it on), and LAVa prunes by its value norms; a
// model that ends its turns decodes the whole length.
import path from "node:path";
import type {LlamaModel} from "node-llama-cpp";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {PolicyId} from "../../preload/contract.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {decodeRun, fixedPrompt} from "../bench/decodeRun.js";
import {getFixtureModel, REPO_ROOT} from "../fixtures/gguf/fixtures.js";

describe("the bench's decode run (endless: tiny-qwen2's shape, no end)", () => {
    let model: LlamaModel;
    const prompt = fixedPrompt(200);
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

describe("the bench's decode run on a model that ends its turns (the many-task model)", () => {
    let model: LlamaModel;
    // the speed suite's prompt
    const prompt = fixedPrompt();
    const length = 1024;

    beforeAll(async () => {
        const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
        model = await llama.loadModel({modelPath: path.join(REPO_ROOT, "resources", "models", "ponder-multi.gguf")});
    });
    afterAll(async () => {
        await model?.dispose();
    });

    it("decodes the whole length past the model's end of turn", async () => {
        // plain greedy decoding stops at the end of the model's turn, well before the length
        const context = await model.createContext({contextSize: length + 64, threads: 1, sequences: 1});
        let plain = 0;
        try {
            for await (const _token of context.getSequence().evaluate(prompt, {temperature: 0})) {
                void _token;
                if (++plain >= length) break;
            }
        } finally {
            await context.dispose();
        }
        expect(plain).toBeLessThan(length);

        const run = await decodeRun(model, {
            prompt,
            length,
            cells: length + 64,
            window: 256,
            threads: 1,
            compression: {...defaultCompressionSettings, policy: "full"}
        });
        expect(run.points.map((point) => point.tokens)).toEqual([256, 512, 768, 1024]);
    });
});
