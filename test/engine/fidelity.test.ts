import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {LlamaModel, Token} from "node-llama-cpp";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {fullTrace, kl, logSoftmax, measureFidelity} from "../../main/engine/generation/fidelity.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";

describe("fidelity against the full cache", () => {
    let engine: Engine;
    let model: LlamaModel;
    const prompt = Array.from({length: 40}, (_, i) => (((i * 37) % 500) + 10) as Token);

    beforeAll(async () => {
        engine = new Engine({loadLlama: loadRuntime});
        const {llama} = await engine.runtime();
        model = await llama.loadModel({modelPath: await getFixtureModel("tiny-qwen2")});
    });
    afterAll(async () => {
        await model.dispose();
        await engine.dispose();
    });

    it("computes KL and log-softmax correctly", () => {
        const p = logSoftmax(Float32Array.of(0, 0));
        expect(Math.exp(p[0]!)).toBeCloseTo(0.5);
        expect(kl(p, p)).toBe(0);
        // KL([0.5, 0.5] || [0.9, 0.1]) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1)
        const q = Float32Array.of(Math.log(0.9), Math.log(0.1));
        expect(kl(p, q)).toBeCloseTo(0.5 * Math.log(0.5 / 0.9) + 0.5 * Math.log(5), 5);
    });

    it("finds a cache large enough never to prune identical to the full run", async () => {
        const reference = await fullTrace(model, prompt, 60);
        const report = await measureFidelity({
            model,
            prompt,
            steps: 60,
            reference,
            cells: 256,
            compression: {...defaultCompressionSettings, policy: "h2o"}
        });
        expect(report.top1Agreement).toBe(1);
        expect(report.meanKl).toBeLessThan(1e-4);
        expect(report.firstDivergence).toBeNull();
        expect(report.finalSample.pruneRounds).toBeGreaterThan(0);
        expect(report.finalSample.tokensEvicted).toBe(0);
    });

    it("sees a small pruned cache depart from the full run", async () => {
        const reference = await fullTrace(model, prompt, 120);
        const report = await measureFidelity({
            model,
            prompt,
            steps: 120,
            reference,
            cells: 64,
            compression: {...defaultCompressionSettings, policy: "streamingllm", pruneEvery: 8}
        });
        expect(report.finalSample.tokensEvicted).toBeGreaterThan(50);
        expect(report.meanKl).toBeGreaterThan(1e-4);
        expect(report.top1Agreement).toBeLessThanOrEqual(1);
        expect(report.finalSample.cellsLive).toBeLessThanOrEqual(64);
    });

    it("records what the full run attended to, and bounds eviction with an oracle that knows the future", async () => {
        const steps = 120;
        const reference = await fullTrace(model, prompt, steps, 1, {attention: true});
        expect(reference.attention).toHaveLength(steps);
        // Each step's row is a distribution over the positions before it (and itself).
        for (const [step, row] of reference.attention!.entries()) {
            expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 3);
            expect(row.slice(prompt.length + step + 1).every((v) => v === 0)).toBe(true);
        }
        const cells = 80;
        const compression = {...defaultCompressionSettings, policy: "streamingllm" as const, pruneEvery: 8};
        const oracle = await measureFidelity({model, prompt, steps, reference, cells, compression, oracle: true});
        const streaming = await measureFidelity({model, prompt, steps, reference, cells, compression});
        expect(oracle.finalSample.cellsLive).toBeLessThanOrEqual(cells);
        expect(oracle.finalSample.tokensEvicted).toBeGreaterThan(50);
        // The oracle frees the cells the future needs least: less of the full run's attention lands on freed cells.
        expect(oracle.regret!).toBeLessThan(streaming.regret!);
        expect(oracle.meanKl).toBeLessThan(streaming.meanKl);
        expect(oracle.greedyText.length).toBeGreaterThan(0);

        // Regret is zero when nothing is freed.
        const roomy = await measureFidelity({model, prompt, steps, reference, cells: 256, compression});
        expect(roomy.regret).toBe(0);
    });

    it("records the largest weight one head gave each position, and stops where asked", async () => {
        const reference = await fullTrace(model, prompt, 40, 1, {attention: true});
        expect(reference.sharpest).toHaveLength(40);
        for (const [step, row] of reference.sharpest!.entries()) {
            const mean = reference.attention![step]!;
            // The mean over heads never exceeds the largest head's weight, and a head's weight is at most 1.
            for (let position = 0; position <= prompt.length + step; position++) {
                expect(row[position]!).toBeGreaterThanOrEqual(mean[position]! - 1e-6);
                expect(row[position]!).toBeLessThanOrEqual(1 + 1e-6);
            }
            expect(row.slice(prompt.length + step + 1).every((v) => v === 0)).toBe(true);
        }
        // Stopping at the 10th generated token: it is kept, but not fed, so one attention row fewer.
        const tenth = reference.tokens[9]!;
        const first = reference.tokens.indexOf(tenth);
        const stopped = await fullTrace(model, prompt, 40, 1, {attention: true, stop: (token) => token === tenth});
        expect(stopped.tokens).toEqual(reference.tokens.slice(0, first + 1));
        expect(stopped.sharpest).toHaveLength(first);
    });
});
