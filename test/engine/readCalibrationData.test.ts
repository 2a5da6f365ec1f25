// Calibration from written text on the demo model: the model writes two held-out problems' thoughts with Full KV
// (collectCalibrationData), then the same texts are read at prompt speed (readCalibrationData). Reading gives the same
// samples, the same labels at every read threshold and the gate inputs up to the rounding of batched kernels; and a
// text stored as a conversation (question, thought, answer) renders back to the tokens the model wrote.
import {describe, expect, test} from "vitest";
import type {Token} from "node-llama-cpp";
import {collectCalibrationData} from "../../main/engine/calibration/collectCalibrationData.js";
import {readCalibrationData} from "../../main/engine/calibration/readCalibrationData.js";
import {renderWrittenText, splitThought} from "../../main/engine/calibration/writtenTexts.js";
import {heldOutDemoProblems} from "../../main/demo/demoTask.js";
import {openKvContext, useDemoModel} from "../fixtures/demoModel.js";

describe("calibration data read from written text", () => {
    const demo = useDemoModel();
    const problems = heldOutDemoProblems(2, {minSteps: 10, maxSteps: 14});

    test("reading a written text gives the samples, labels and gate inputs that writing it gave", async () => {
        const {model, chatWrapper} = demo;
        const run = await openKvContext(model, {contextSize: 1024, threads: 2});
        const {kv, sequence} = run;
        try {
            const options = {maxSamples: 100_000, seed: 4, moreReadThresholds: [0.25]};
            const written = await collectCalibrationData(
                {model, chatWrapper, sequence, kv},
                problems.map((problem) => ({user: problem.question})),
                {...options, maxTokens: 400}
            );
            expect(written.texts.every((text) => text.stop === "eog")).toBe(true);
            const texts = written.texts.map((text) => ({tokens: Array.from(text.tokens) as Token[], promptTokens: text.promptTokens}));
            // in chunks smaller than a text, so that a text is read in several evaluations
            const read = await readCalibrationData({model, sequence, kv}, texts, {...options, chunk: 100});

            expect(read.tokens).toBe(written.tokens);
            expect(read.tokensSeen).toBe(written.tokensSeen);
            expect(read.headCountKv).toBe(written.headCountKv);
            for (const field of ["positions", "text", "tokenIds", "generated", "followers"] as const)
                expect(Array.from(read[field]), field).toEqual(Array.from(written[field]));
            expect(read.texts.map((t) => [t.promptTokens, t.generatedTokens, t.stop])).toEqual(
                written.texts.map((t) => [t.promptTokens, t.generatedTokens, "eog"])
            );
            // the labels at both thresholds: the same reads, up to batched kernels' rounding on a near-threshold weight
            const same = (a: Float32Array, b: Float32Array) => a.reduce((n, v, k) => n + (v === b[k] ? 1 : 0), 0) / a.length;
            expect(same(read.horizons, written.horizons)).toBeGreaterThan(0.99);
            expect(same(read.alternatives![0]!.horizons, written.alternatives![0]!.horizons)).toBeGreaterThan(0.99);
            expect(Math.max(...read.horizons)).toBeGreaterThan(100); // far reads are there
            // the gate inputs: the same attn_norm rows, up to rounding
            let worst = 0;
            for (let k = 0; k < read.features.length; k++)
                worst = Math.max(worst, Math.abs(read.features[k]! - written.features[k]!) / Math.max(1, Math.abs(written.features[k]!)));
            expect(worst).toBeLessThan(2e-2);
            expect(await kv.stats()).toMatchObject({readHorizon: false, attnNormCapture: false});

            // the same texts stored as conversations render back to the tokens the model wrote
            for (const [i, text] of written.texts.entries()) {
                const generated = Array.from(text.tokens.subarray(text.promptTokens)) as Token[];
                const {thought, answer} = splitThought(`<think>${model.detokenize(generated, true)}`.replace(/<\|im_end\|>$/, ""), null);
                const rendered = renderWrittenText(model, chatWrapper, {turns: [{user: problems[i]!.question, thought, answer}]}, 10_000);
                expect(rendered.promptTokens).toBe(text.promptTokens);
                expect(rendered.cut).toBe(false);
                const n = Math.min(rendered.tokens.length, text.tokens.length);
                expect(n).toBeGreaterThanOrEqual(text.tokens.length - 1);
                expect(rendered.tokens.slice(0, n)).toEqual(Array.from(text.tokens.subarray(0, n)));
                // cut to a limit, it says so
                const cut = renderWrittenText(model, chatWrapper, {turns: [{user: problems[i]!.question, thought, answer}]}, 50);
                expect(cut).toMatchObject({cut: true});
                expect(cut.tokens).toHaveLength(50);
            }
        } finally {
            await run.dispose();
        }
    });

    test("a text longer than the context is refused before anything is read", async () => {
        const {model} = demo;
        const run = await openKvContext(model, {contextSize: 256, threads: 1});
        const {kv, sequence} = run;
        try {
            const tokens = Array.from({length: 300}, () => 65 as Token);
            await expect(readCalibrationData({model, sequence, kv}, [{tokens, promptTokens: 10}])).rejects.toThrow(
                /Reading needs a context of 300 cells/
            );
            expect(await kv.stats()).toMatchObject({readHorizon: false, attnNormCapture: false});
        } finally {
            await run.dispose();
        }
    });
});
