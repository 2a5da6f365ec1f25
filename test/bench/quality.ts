import {resolveChatWrapper, type Llama, type LlamaModel, type Token} from "node-llama-cpp";
import type {PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/Engine.js";
import {fullTrace, measureFidelity} from "../../main/engine/fidelity.js";
import {inspectModel} from "../../main/engine/inspectModel.js";
import {kvBytesPerCell} from "../../main/engine/kvMemory.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {extractDemoAnswer, heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {table} from "./plot.js";

export type QualityRow = {
    policy: PolicyId, share: number, accuracy: number, meanCells: number,
    /** Mean KV memory held at the end of each answer (Full: every token of it). */
    meanLiveKiB: number,
    /** Mean of (KV memory at the end) / (KV memory of that problem's Full run). */
    memoryVsFull: number,
    /** Fidelity against Full on the problems it was measured on (teacher-forced, DESIGN §6); null for Full. */
    fidelity: {problems: number, top1Agreement: number, meanKl: number} | null
};

/**
 * Accuracy of the demo model on held-out problems with Full KV, then per policy at each share of the cells
 * that problem's Full run used, through the app's own engine (chat template, thought segments, pruning).
 */
export async function qualitySuite(options: {
    llama: Llama, modelPath: string, policies: PolicyId[], budgets: number[], problems: number, threads: number,
    /** How many of the problems fidelity (top-1 agreement, KL vs Full) is measured on. */
    fidelityProblems: number,
    onProgress?: (line: string) => void
}) {
    const bytesPerCell = kvBytesPerCell(await inspectModel(options.modelPath));
    if (bytesPerCell == null)
        throw new Error(`${options.modelPath}: incomplete attention metadata, KV memory cannot be accounted`);
    const engine = new Engine({loadLlama: async () => ({llama: options.llama, build: {kind: "local", gpu: options.llama.gpu, patched: true, llamaCppRelease: "", seriesHash: null}}), threads: options.threads});
    await engine.loadModel(options.modelPath, null);
    const problems = heldOutDemoProblems(options.problems);

    async function solve(question: string, policy: PolicyId, cells: number) {
        let text = "";
        let tokens = 0;
        let live = 0;
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
            }
        });
        return {answer: extractDemoAnswer(text), tokens, promptTokens: result.promptTokens, live, stopReason: result.stopReason};
    }

    const used: number[] = [];
    const failures: string[] = [];
    let fullCorrect = 0;
    for (const [index, problem] of problems.entries()) {
        const run = await solve(problem.question, "full", 8192);
        used.push(run.promptTokens + run.tokens + 4);
        if (isDemoAnswerCorrect(problem, run.answer))
            fullCorrect++;
        options.onProgress?.(`full: problem ${index + 1}/${problems.length}, ${run.tokens} tokens`);
    }
    // Full KV holds every token of the answer: its memory is what each pruned run is measured against.
    const fullBytes = used.map((cells) => cells * bytesPerCell);
    const rows: QualityRow[] = [{
        policy: "full", share: 1, accuracy: fullCorrect / problems.length, meanCells: mean(used), meanLiveKiB: mean(fullBytes) / 1024, memoryVsFull: 1, fidelity: null
    }];
    const fidelity = await demoFidelity(options, problems.slice(0, options.fidelityProblems).map((p) => p.question), used);
    for (const share of options.budgets) {
        for (const policy of options.policies) {
            let correct = 0;
            const cells: number[] = [];
            const live: number[] = [];
            const vsFull: number[] = [];
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
                vsFull.push(run.live / fullBytes[index]!);
                if (isDemoAnswerCorrect(problem, run.answer))
                    correct++;
            }
            rows.push({
                policy, share, accuracy: correct / problems.length, meanCells: mean(cells), meanLiveKiB: mean(live), memoryVsFull: mean(vsFull),
                fidelity: fidelity.get(`${policy}@${share}`) ?? null
            });
            options.onProgress?.(`${policy} at ${Math.round(share * 100)}%: accuracy ${(correct / problems.length).toFixed(3)}`);
        }
    }
    await engine.dispose();

    const fullAccuracy = rows[0]!.accuracy;
    return {
        problems: problems.length,
        rows,
        json: {problems: problems.length, rows, failures},
        failures,
        table: table(["policy", "budget (share of Full)", "accuracy", "vs Full", "mean cells", "KV KiB at end", "KV vs Full", "top-1 agreement", "mean KL (nats)"],
            rows.map((r) => [r.policy, r.policy === "full" ? "100%" : `${Math.round(r.share * 100)}%`, r.accuracy.toFixed(3),
                (r.accuracy - fullAccuracy).toFixed(3), r.meanCells.toFixed(0), r.meanLiveKiB.toFixed(1), r.memoryVsFull.toFixed(3),
                r.fidelity == null ? (r.policy === "full" ? "1.000" : "n/a") : `${r.fidelity.top1Agreement.toFixed(3)} (n=${r.fidelity.problems})`,
                r.fidelity == null ? (r.policy === "full" ? "0" : "n/a") : r.fidelity.meanKl.toFixed(4)]))
    };
}

/**
 * Teacher-forced fidelity on real reasoning (DESIGN §6): each question's Full greedy trace, replayed through each
 * policy's pruned cache at each share of that problem's Full cells. A problem counts where its question fits the
 * budget with a prune round to spare (the others are refused by the engine, as in the accuracy runs).
 */
async function demoFidelity(options: Parameters<typeof qualitySuite>[0], questions: string[], used: number[]) {
    const sums = new Map<string, {problems: number, top1: number, kl: number}>();
    if (questions.length === 0)
        return new Map<string, {problems: number, top1Agreement: number, meanKl: number}>();
    const model: LlamaModel = await options.llama.loadModel({modelPath: options.modelPath});
    try {
        const wrapper = resolveChatWrapper(model);
        const pruneEvery = 8;
        for (const [index, question] of questions.entries()) {
            const prompt: Token[] = wrapper.generateContextState({chatHistory: [{type: "user", text: question}, {type: "model", response: []}]})
                .contextText.tokenize(model.tokenizer);
            const steps = Math.max(1, used[index]! - prompt.length - 4);
            const reference = await fullTrace(model, prompt, steps, options.threads);
            for (const share of options.budgets) {
                const cells = Math.max(32, Math.round(used[index]! * share));
                if (prompt.length + pruneEvery > cells)
                    continue;
                for (const policy of options.policies) {
                    const report = await measureFidelity({
                        model, prompt, steps, reference, cells, threads: options.threads, compression: {...defaultCompressionSettings, policy, pruneEvery}
                    });
                    const key = `${policy}@${share}`;
                    const sum = sums.get(key) ?? {problems: 0, top1: 0, kl: 0};
                    sums.set(key, {problems: sum.problems + 1, top1: sum.top1 + report.top1Agreement, kl: sum.kl + report.meanKl});
                }
            }
            options.onProgress?.(`fidelity: problem ${index + 1}/${questions.length} (${prompt.length}-token question, ${steps} steps)`);
        }
    } finally {
        await model.dispose();
    }
    return new Map([...sums].map(([key, sum]) => [key, {problems: sum.problems, top1Agreement: sum.top1 / sum.problems, meanKl: sum.kl / sum.problems}]));
}

function mean(values: number[]): number {
    return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}
