import type {Llama} from "node-llama-cpp";
import type {PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/Engine.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {extractDemoAnswer, heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {table} from "./plot.js";

export type QualityRow = {policy: PolicyId, share: number, accuracy: number, meanCells: number, meanLiveKiB: number, meanFullKiB: number};

/**
 * Accuracy of the demo model on held-out problems with Full KV, then per policy at each share of the cells
 * that problem's Full run used, through the app's own engine (chat template, thought segments, pruning).
 */
export async function qualitySuite(options: {llama: Llama, modelPath: string, policies: PolicyId[], budgets: number[], problems: number, threads: number}) {
    const engine = new Engine({loadLlama: async () => ({llama: options.llama, build: {kind: "local", gpu: options.llama.gpu, patched: true, llamaCppRelease: "", seriesHash: null}}), threads: options.threads});
    await engine.loadModel(options.modelPath, null);
    const problems = heldOutDemoProblems(options.problems);

    async function solve(question: string, policy: PolicyId, cells: number) {
        let text = "";
        let tokens = 0;
        let live = 0;
        let full = 0;
        const result = await engine.generate({
            history: [{role: "user", text: question}], systemPrompt: "", temperature: 0, maxTokens: 4096, signal: new AbortController().signal,
            kv: {compression: {...defaultCompressionSettings, policy, pruneEvery: 8}, cells},
            onChunk(chunk) {
                tokens += chunk.tokens;
                if (chunk.segment === "answer")
                    text += chunk.text;
            },
            onSample(sample) {
                live = sample.liveBytes;
                full = sample.fullBytes;
            }
        });
        return {answer: extractDemoAnswer(text), tokens, promptTokens: result.promptTokens, live, full, stopReason: result.stopReason};
    }

    const used: number[] = [];
    const failures: string[] = [];
    let fullCorrect = 0;
    for (const problem of problems) {
        const run = await solve(problem.question, "full", 8192);
        used.push(run.promptTokens + run.tokens + 4);
        if (isDemoAnswerCorrect(problem, run.answer))
            fullCorrect++;
    }
    const rows: QualityRow[] = [{policy: "full", share: 1, accuracy: fullCorrect / problems.length, meanCells: mean(used), meanLiveKiB: 0, meanFullKiB: 0}];
    for (const share of options.budgets) {
        for (const policy of options.policies) {
            let correct = 0;
            const cells: number[] = [];
            const live: number[] = [];
            const full: number[] = [];
            for (const [index, problem] of problems.entries()) {
                const budget = Math.max(32, Math.round(used[index]! * share));
                cells.push(budget);
                const run = await solve(problem.question, policy, budget).catch((err: unknown) => {
                    failures.push(`${policy} ${Math.round(share * 100)}% problem ${index}: ${(err as Error).message}`);
                    return null;
                });
                if (run == null)
                    continue;
                live.push(run.live / 1024);
                full.push(run.full / 1024);
                if (isDemoAnswerCorrect(problem, run.answer))
                    correct++;
            }
            rows.push({policy, share, accuracy: correct / problems.length, meanCells: mean(cells), meanLiveKiB: mean(live), meanFullKiB: mean(full)});
        }
    }
    await engine.dispose();

    const fullAccuracy = rows[0]!.accuracy;
    return {
        problems: problems.length,
        rows,
        json: {problems: problems.length, rows, failures},
        failures,
        table: table(["policy", "budget (share of Full)", "accuracy", "vs Full", "mean cells", "mean live KV KiB at end", "mean full-cache KiB"],
            rows.map((r) => [r.policy, r.policy === "full" ? "100%" : `${Math.round(r.share * 100)}%`, r.accuracy.toFixed(3),
                (r.accuracy - fullAccuracy).toFixed(3), r.meanCells.toFixed(0), r.meanLiveKiB.toFixed(1), r.meanFullKiB.toFixed(1)]))
    };
}

function mean(values: number[]): number {
    return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}
