// The embedded demo model: a fresh install registers and loads it offline, and it reasons correctly with Full KV,
// while a cache that keeps only the sinks and the recent tokens (StreamingLLM) loses the answers: the task needs
// distant tokens. Greedy decoding on one thread, so the outcome is fixed for a given model and build.
import fs from "node:fs/promises";
import path from "node:path";
import {afterAll, describe, expect, it} from "vitest";
import type {KvSample, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {extractDemoAnswer, heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {REPO_ROOT} from "../fixtures/gguf/fixtures.js";
import {greedySolve} from "./greedyAnswer.js";
import {withTestApp} from "./withTestApp.js";

const demoModel = path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf");
// Mid-length problems (30-50 steps: about 400-650 thinking tokens), to keep the test short.
const problems = heldOutDemoProblems(6, {minSteps: 30, maxSteps: 50});

describe("the demo model", () => {
    it("ships under 20 MB", async () => {
        const {size} = await fs.stat(demoModel);
        expect(size).toBeGreaterThan(1_000_000);
        expect(size).toBeLessThan(20 * 2 ** 20);
    });

    it("is what a fresh install loads, and answers a held-out problem in a conversation", async () => {
        await withTestApp({bundledModelPath: demoModel}, async (app, done) => {
            await app.restoreLastModel();
            expect(app.status().engine.model?.path).toBe(demoModel);
            expect(app.models.list().map((m) => m.path)).toEqual([demoModel]);

            const conversation = app.conversations.create("demo");
            app.conversations.updateSettings(conversation.id, {temperature: 0});
            const problem = problems[0]!;
            app.chat.send(conversation.id, problem.question);
            await app.chat.idle();
            expect(done).toHaveLength(1);
            const saved = app.conversations.get(conversation.id).messages.at(-1)!;
            expect(saved.status).toBe("complete");
            expect(saved.thinkingTokens).toBeGreaterThan(300);
            expect(isDemoAnswerCorrect(problem, extractDemoAnswer(saved.text))).toBe(true);
        });
    });

    describe("through the engine, greedy", () => {
        const engine = new Engine({loadLlama: loadRuntime, threads: 1});
        afterAll(() => engine.dispose());
        const fullCells: number[] = [];

        async function solve(question: string, policy: PolicyId, cells: number) {
            const run = await greedySolve(engine, question, policy, cells);
            return {answer: extractDemoAnswer(run.answer), used: run.used};
        }

        it("answers held-out problems with Full KV", async () => {
            await engine.loadModel(demoModel, null);
            let correct = 0;
            for (const problem of problems) {
                const run = await solve(problem.question, "full", 4096);
                fullCells.push(run.used);
                if (isDemoAnswerCorrect(problem, run.answer)) correct++;
            }
            expect(correct).toBeGreaterThanOrEqual(problems.length - 1);
        });

        it("reads a question longer than the budget in chunks with a pruning policy, within the budget; Full KV refuses it", async () => {
            const long = heldOutDemoProblems(1, {minSteps: 105, maxSteps: 110}, 1000)[0]!;
            const samples: KvSample[] = [];
            const rebuild: number[] = [];
            const cells = 300;
            const result = await engine.generate({
                history: [{role: "user", text: long.question}],
                systemPrompt: "",
                temperature: 0,
                maxTokens: 64,
                signal: new AbortController().signal,
                kv: {compression: {...defaultCompressionSettings, policy: "lethe", pruneEvery: 8}, cells},
                onChunk() {},
                onSample: (sample) => samples.push(sample),
                onRebuild: (progress, reason) => {
                    rebuild.push(progress);
                    // A first message: read as a message, never as a rebuild for new settings.
                    expect(reason).toBe("message");
                }
            });
            const questionTokens = samples.at(-1)!.tokensSeen - samples.at(-1)!.step;
            expect(questionTokens).toBeGreaterThan(cells);
            expect(result.promptTokens).toBeGreaterThanOrEqual(questionTokens - 4);
            expect(result.stopReason).toBe("maxTokens");
            expect(rebuild.at(-1)).toBe(1);
            for (const sample of samples) expect(sample.cellsLive).toBeLessThanOrEqual(cells);

            await expect(solve(long.question, "full", cells)).rejects.toThrow(/more than the KV budget of 300 cells/);
        });

        it("answers a question that nearly fills the budget without running out of cells (default cadence)", async () => {
            if (engine.inspection == null) await engine.loadModel(demoModel, null);
            const long = heldOutDemoProblems(1, {minSteps: 112, maxSteps: 116}, 1000)[0]!;
            const cells = 512;
            const samples: KvSample[] = [];
            const result = await engine.generate({
                history: [{role: "user", text: long.question}],
                systemPrompt: "",
                temperature: 0,
                maxTokens: 256,
                signal: new AbortController().signal,
                kv: {compression: {...defaultCompressionSettings, policy: "lethe"}, cells},
                onChunk() {},
                onSample: (sample) => samples.push(sample)
            });
            const questionTokens = samples.at(-1)!.tokensSeen - samples.at(-1)!.step;
            expect(questionTokens).toBeGreaterThan(cells - 64);
            expect(result.stopReason).toBe("maxTokens");
            expect(samples.at(-1)!.step).toBeGreaterThanOrEqual(250);
            for (const sample of samples) expect(sample.cellsLive).toBeLessThanOrEqual(cells);
        });

        it("loses the answers under StreamingLLM at half the cells: the task needs distant tokens", async () => {
            expect(fullCells).toHaveLength(problems.length);
            let correct = 0;
            for (const [index, problem] of problems.entries()) {
                const run = await solve(problem.question, "streamingllm", Math.round(fullCells[index]! / 2));
                if (isDemoAnswerCorrect(problem, run.answer)) correct++;
            }
            expect(correct).toBeLessThanOrEqual(2);
        });
    });
});
