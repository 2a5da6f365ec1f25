// The many-task model Ponder ships (qwen2 architecture: biases on q, k and v, grouped-query attention), asked in words:
// the app loads it like any model and offers a sample of each of its six families; with Full KV it thinks held-out
// problems of every family through and answers them; under TRIM-KV with the gates its calibration made (fitted per KV
// head) it keeps most of those answers at half the cells, where a cache of the sinks and the recent tokens
// (StreamingLLM) loses them: every family reads its question from far back. Measured on the shipped files (Full 12 of
// 12 right, 10 of them with the generator's thought; TRIM-KV at half 10, StreamingLLM 0; the samples at the first budget
// 6 of 6). Greedy on one thread, so the outcome is fixed for a given model and build.
import fs from "node:fs/promises";
import path from "node:path";
import {afterAll, describe, expect, it, vi} from "vitest";
import {isDemoAnswerCorrect} from "../../main/demo/demoTask.js";
import {heldOutMultiProblems, MULTI_FAMILIES} from "../../main/demo/multiTask.js";
import {FIRST_MODEL_FILE, multiSampleProblem, wordedSample} from "../../main/demo/shippedModelSample.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import {multiFirstBudgetCells} from "../../main/services/firstMinuteCompression.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {greedySolve, heldOutScorer} from "./greedyAnswer.js";
import {withTestApp} from "./withTestApp.js";

const models = path.join(REPO_ROOT, "resources", "models");
const multiModel = path.join(models, "ponder-multi.gguf");
// Two held-out problems of each family (seeds from 2^31, the upper half of each family's sizes).
const problems = MULTI_FAMILIES.flatMap((family) => heldOutMultiProblems(2, [family], 40));

describe("the many-task model", () => {
    it("ships under 40 MiB: qwen2, at least 6 layers of width 192, fewer key/value heads than query heads, with per-head gates", async () => {
        const {size} = await fs.stat(multiModel);
        expect(size).toBeLessThan(40 * 2 ** 20);
        const inspection = await inspectModel(multiModel);
        expect(inspection).toMatchObject({architecture: "qwen2", name: "Ponder Reasoner", hasChatTemplate: true, embeddingLength: 192});
        expect(inspection.layers).toBeGreaterThanOrEqual(6);
        expect(inspection.headCountKv).toBeLessThan(inspection.headCount!);
        const gates = await findRetentionGates(inspection);
        expect(gates.available).toBe(true);
        if (gates.available) expect(gates.info.reduction).toBe("per-head");
    });

    it("is what a fresh install loads: the app offers a sample of every family in turn, and answers one", async () => {
        await withTestApp({bundledModelPath: path.join(models, FIRST_MODEL_FILE)}, async (app) => {
            await app.restoreLastModel();
            expect(app.status().engine.model?.path).toBe(multiModel);
            // the family follows the offset: six offsets, six families, each asked in words
            const random = vi.spyOn(Math, "random");
            const samples = MULTI_FAMILIES.map((_, offset) => {
                random.mockReturnValue(offset / 2 ** 30);
                return app.demoSample()!;
            });
            random.mockRestore();
            expect(samples.map((sample) => sample.task)).toEqual(MULTI_FAMILIES.map(() => "multi"));
            expect(new Set(samples.map((sample) => sample.answerMeaning)).size).toBe(MULTI_FAMILIES.length);

            // A new conversation starts under TRIM-KV at the first budget, and answers the sample so.
            const problem = multiSampleProblem(samples[0]!.seed, MULTI_FAMILIES[0]);
            expect(samples[0]!.question).toBe(problem.question);
            const conversation = await app.createConversation("sample");
            expect(conversation.policy).toBe("trimkv");
            app.conversations.updateSettings(conversation.id, {temperature: 0});
            app.chat.send(conversation.id, problem.question);
            await app.chat.idle();
            const saved = app.conversations.get(conversation.id).messages.at(-1)!;
            expect(saved.status).toBe("complete");
            expect(isDemoAnswerCorrect(problem, saved.text)).toBe(true);
        });
    });

    describe("through the engine, greedy", () => {
        const engine = new Engine({loadLlama: loadRuntime, threads: 1});
        afterAll(() => engine.dispose());
        const {fullCells, score} = heldOutScorer(engine, problems);

        it("answers a sample of every family under TRIM-KV at the first budget, about half of each sample's cells", async () => {
            await engine.loadModel(multiModel, null);
            const rows = [];
            for (const [offset, family] of MULTI_FAMILIES.entries()) {
                // the samples the app shows (asked in words)
                const {problem} = wordedSample((0x80000000 + offset) >>> 0, family);
                const full = await greedySolve(engine, problem.question, "full", 4096);
                const pruned = await greedySolve(engine, problem.question, "trimkv", multiFirstBudgetCells);
                rows.push({family, share: multiFirstBudgetCells / full.used, right: isDemoAnswerCorrect(problem, pruned.answer)});
            }
            // about half: 256 cells of samples of about 430-590 tokens
            for (const row of rows) expect(row.share, row.family).toBeGreaterThan(0.4);
            for (const row of rows) expect(row.share, row.family).toBeLessThan(0.62);
            expect(rows.filter((row) => row.right).length, JSON.stringify(rows)).toBeGreaterThanOrEqual(5);
        });

        it("thinks held-out problems of every family through with Full KV and answers them", async () => {
            const full = await score("full", 1);
            expect(full.right, JSON.stringify(full.rows)).toBeGreaterThanOrEqual(10);
            // most from the thought the generator writes, line for line (a right answer may come from another thought)
            expect(full.same, JSON.stringify(full.rows)).toBeGreaterThanOrEqual(10);
        });

        it("keeps most answers under TRIM-KV with its calibrated per-head gates at half the cells, and StreamingLLM loses them", async () => {
            expect(fullCells).toHaveLength(problems.length);
            const trimkv = await score("trimkv", 0.5);
            expect(trimkv.right, JSON.stringify(trimkv.rows)).toBeGreaterThanOrEqual(10);
            // every family reads its question from far back: a cache of the sinks and the recent tokens loses it
            const streaming = await score("streamingllm", 0.5);
            expect(streaming.right, JSON.stringify(streaming.rows)).toBeLessThanOrEqual(2);
            expect(streaming.same).toBe(0);
        });
    });
});
