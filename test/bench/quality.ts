import {resolveChatWrapper, type Llama, type LlamaModel, type Token} from "node-llama-cpp";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {fullTrace, measureFidelity} from "../../main/engine/generation/fidelity.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {kvBytesPerCell} from "../../main/kv/kvMemory.js";
import {retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {extractDemoAnswer, heldOutDemoProblems, isDemoAnswerCorrect} from "../eval/demoTask.js";
import {heldOutMergeProblems} from "../eval/mergeTask.js";
import {heldOutRecurProblems} from "../eval/recurTask.js";
import {heldOutMultiProblems, MULTI_FAMILIES} from "../../main/demo/multiTask.js";
import {table} from "./plot.js";

/** A quality row: a policy (or the oracle, or ReFreeKV as its paper runs it) at a share of the cells Full used. */
type QualityRow = {
    policy: PolicyId | "oracle" | "refreekv (paper)";
    share: number;
    accuracy: number;
    meanCells: number;
    /** Share of the problems whose thought is Full's, token for token (a one-digit answer is right by chance 1 in 10). */
    thoughtExact: number | null;
    /** Mean KV memory held at the end of each answer (Full: every token of it). */
    meanLiveKiB: number;
    /** Mean of (KV memory at the end) / (KV memory of that problem's Full run). */
    memoryVsFull: number;
    /** Fidelity against Full on the problems it was measured on (teacher-forced: `measureFidelity`, main/engine/generation/fidelity.ts); null for Full. */
    fidelity: {problems: number; top1Agreement: number; meanKl: number; regret: number} | null;
};

/** Full's run of one problem: the cells it used (what each budget is a share of), its thought, and whether it answered right. */
export type FullRun = {cells: number; thought: string; correct: boolean};

/** A held-out problem of a task: the question, and the answer that grades a run. */
export type TaskProblem = {question: string; answer: string};

/** A shipped model the bench runs its task suites on, named as `--models` names it. */
export type TaskModel = "demo" | "merge" | "multi" | "recur";

/** A problem set: the shipped model trained on its task, its held-out problems, and what it is in words. */
type ProblemSet = {
    model: TaskModel;
    problems: (count: number) => TaskProblem[];
    title: string;
    /** Run only when `--sets` names it, not among its model's sets by default. */
    byName?: boolean;
};

/**
 * The problem sets, each with the shipped model trained on its task: the demo task's training distribution (operands
 * anywhere back), one that reads mostly recent steps, and the merge task (two pointers through the question): its
 * held-out set (k in the second half of the merge) and, as in training, any k; the many-task model's families, one set
 * each (held-out sizes, asked in the phrasings a person might type), and all of them mixed (by name only).
 */
export const problemSets: {[name: string]: ProblemSet} = {
    demo: {model: "demo", problems: (count) => heldOutDemoProblems(count, {}, 0), title: "the demo task (operands anywhere back)"},
    local: {
        model: "demo",
        problems: (count) => heldOutDemoProblems(count, {locality: {recentSteps: 4, farShare: 0.1}}, 100_000),
        title: "mostly recent steps (90% of step operands among the last 4 steps)"
    },
    merge: {
        model: "merge",
        problems: (count) => heldOutMergeProblems(count),
        title: "the merge task (two sorted lists, k in the second half, the merge model)"
    },
    "merge-any": {
        model: "merge",
        problems: (count) => heldOutMergeProblems(count, {minKShare: 0}),
        title: "the merge task asking any position (as in training; an early k is answered before far reads matter)"
    },
    recur: {
        model: "recur",
        problems: (count) => heldOutRecurProblems(count),
        title: "the recurrence task (a question of two values, a thought of 60 to 120 lines reading its own lines far back)"
    },
    multi: {
        model: "multi",
        problems: (count) => heldOutMultiProblems(count),
        title: "the many-task model's six families mixed (held-out sizes, asked in words)",
        byName: true
    },
    ...Object.fromEntries(
        MULTI_FAMILIES.map((family, index) => [
            `multi-${family}`,
            {
                model: "multi",
                // Each family's own seeds, apart from the mixed set's and from each other's.
                problems: (count: number) => heldOutMultiProblems(count, [family], 1_000_000 * (index + 1)),
                title: `the many-task model's ${family} family (held-out sizes, asked in words)`
            } satisfies ProblemSet
        ])
    )
};

const pruneEvery = 8;

/**
 * Accuracy of the set's model on held-out problems of its task with Full KV, then per policy at each share of the cells that
 * problem's Full run used, through the app's own engine (chat template, thought segments, pruning); beside them the
 * oracle (the cells the rest of Full's trace attends to most: it knows the future, docs/BENCHMARKS.md) at the same budgets, and ReFreeKV as its paper runs it (once
 * after the prompt, no cap), with the KV it saved.
 */
export async function qualitySuite(options: {
    /** Policies to run through the engine; `"oracle"` adds the oracle's rows. */
    llama: Llama;
    modelPath: string;
    policies: (PolicyId | "oracle")[];
    budgets: number[];
    problems: number;
    threads: number;
    /** How many of the problems fidelity (top-1 agreement, KL, regret vs Full) is measured on. */
    fidelityProblems: number;
    set?: keyof typeof problemSets;
    /** How the selectors' choices combine on shared cells, for every policy of the run. Defaults to the app's default. */
    combine?: CompressionSettings["combine"];
    /** Full's runs of these problems from an earlier report of the same model and set (`fullRuns`), not run again. */
    fullRuns?: FullRun[];
    onProgress?: (line: string) => void;
}) {
    const combineMode = options.combine ?? defaultCompressionSettings.combine;
    const bytesPerCell = kvBytesPerCell(await inspectModel(options.modelPath));
    if (bytesPerCell == null) throw new Error(`${options.modelPath}: incomplete attention metadata, KV memory cannot be accounted`);
    const engine = new Engine({
        loadLlama: async () => ({
            llama: options.llama,
            build: {kind: "local", gpu: options.llama.gpu, patched: true, llamaCppRelease: "", seriesHash: null}
        }),
        threads: options.threads,
        ownsRuntime: false
    });
    await engine.loadModel(options.modelPath, null);
    const set = problemSets[options.set ?? "demo"]!;
    const problems = set.problems(options.problems);

    async function solve(
        question: string,
        policy: PolicyId,
        cells: number,
        params = defaultCompressionSettings.params,
        combine: CompressionSettings["combine"] = combineMode
    ) {
        let text = "";
        let thought = "";
        let tokens = 0;
        let live = 0;
        const result = await engine.generate({
            history: [{role: "user", text: question}],
            systemPrompt: "",
            temperature: 0,
            maxTokens: 4096,
            signal: new AbortController().signal,
            kv: {compression: {...defaultCompressionSettings, policy, pruneEvery, params, combine}, cells},
            onChunk(chunk) {
                tokens += chunk.tokens;
                if (chunk.segment === "answer") text += chunk.text;
                else if (chunk.segment === "thought") thought += chunk.text;
            },
            onSample(sample) {
                live = sample.liveBytes;
            }
        });
        return {answer: extractDemoAnswer(text), thought, tokens, promptTokens: result.promptTokens, live, stopReason: result.stopReason};
    }

    const failures: string[] = [];
    if (options.fullRuns != null && options.fullRuns.length !== problems.length)
        throw new Error(`${options.fullRuns.length} runs of Full given for ${problems.length} problems`);
    const fullRuns: FullRun[] = options.fullRuns ?? [];
    if (options.fullRuns == null)
        for (const [index, problem] of problems.entries()) {
            // The demo model's whole context: a budget above it is refused (budgetCap).
            const run = await solve(problem.question, "full", 4096);
            fullRuns.push({
                cells: run.promptTokens + run.tokens + 4,
                thought: run.thought,
                correct: isDemoAnswerCorrect(problem, run.answer)
            });
            options.onProgress?.(`full: problem ${index + 1}/${problems.length}, ${run.tokens} tokens`);
        }
    const used = fullRuns.map((run) => run.cells);
    const fullThoughts = fullRuns.map((run) => run.thought);
    const fullCorrect = fullRuns.filter((run) => run.correct).length;
    // Full KV holds every token of the answer: its memory is what each pruned run is measured against.
    const fullBytes = used.map((cells) => cells * bytesPerCell);
    const rows: QualityRow[] = [
        {
            policy: "full",
            share: 1,
            accuracy: fullCorrect / problems.length,
            thoughtExact: 1,
            meanCells: mean(used),
            meanLiveKiB: mean(fullBytes) / 1024,
            memoryVsFull: 1,
            fidelity: null
        }
    ];

    async function policyRow(
        policy: QualityRow["policy"],
        share: number,
        run: (problem: TaskProblem, index: number, cells: number) => Promise<{answer: string; thought?: string; live: number} | null>
    ) {
        let correct = 0;
        let exact = 0;
        let withThought = 0;
        const cells: number[] = [];
        const live: number[] = [];
        const vsFull: number[] = [];
        for (const [index, problem] of problems.entries()) {
            const budget = Math.max(32, Math.round(used[index]! * share));
            cells.push(budget);
            const result = await run(problem, index, budget).catch((err: unknown) => {
                failures.push(`${policy} ${Math.round(share * 100)}% problem ${index}: ${(err as Error).message}`);
                return null;
            });
            if (result == null) continue;
            live.push(result.live / 1024);
            vsFull.push(result.live / fullBytes[index]!);
            if (isDemoAnswerCorrect(problem, result.answer)) correct++;
            if (result.thought != null) {
                withThought++;
                if (result.thought === fullThoughts[index]) exact++;
            }
        }
        options.onProgress?.(`${policy} at ${Math.round(share * 100)}%: accuracy ${(correct / problems.length).toFixed(3)}`);
        return {
            policy,
            share,
            accuracy: correct / problems.length,
            thoughtExact: withThought === 0 ? null : exact / problems.length,
            meanCells: mean(cells),
            meanLiveKiB: mean(live),
            memoryVsFull: mean(vsFull),
            fidelity: null
        };
    }

    const policies = options.policies.filter((policy): policy is PolicyId => policy !== "oracle");
    const withOracle = options.policies.includes("oracle");
    const demo = await demoFidelity({...options, policies}, withOracle, problems, used);
    for (const share of options.budgets) {
        for (const policy of policies) {
            const row: QualityRow = await policyRow(policy, share, (problem, _index, cells) => solve(problem.question, policy, cells));
            rows.push({...row, fidelity: demo.fidelity.get(`${policy}@${share}`) ?? null});
        }
        if (!withOracle) continue;
        const oracle: QualityRow = await policyRow(
            "oracle",
            share,
            async (_problem, index) => demo.oracle.get(`${index}@${share}`) ?? null
        );
        rows.push({...oracle, fidelity: demo.fidelity.get(`oracle@${share}`) ?? null});
    }
    if (policies.includes("refreekv")) {
        // The paper's ReFreeKV: the 1% test once after the prompt, per layer and head (a cell goes only when no head
        // keeps it: `union`), then every generated token kept (a budget that never binds).
        rows.push(
            await policyRow("refreekv (paper)", 1, (problem, index) =>
                solve(problem.question, "refreekv", used[index]! * 2 + 256, undefined, "union")
            )
        );
    }
    await engine.dispose();

    const fullAccuracy = rows[0]!.accuracy;
    return {
        problems: problems.length,
        title: set.title,
        rows,
        fullRuns,
        json: {problems: problems.length, set: options.set ?? "demo", rows, failures},
        failures,
        table: table(
            [
                "policy",
                "budget (share of Full)",
                "accuracy",
                "vs Full",
                "thought = Full's",
                "mean cells",
                "KV KiB at end",
                "KV vs Full",
                "top-1 agreement",
                "mean KL (nats)",
                "regret"
            ],
            rows.map((r) => [
                combineMode === defaultCompressionSettings.combine || r.policy === "full" || r.policy === "oracle"
                    ? r.policy
                    : `${r.policy} (${combineMode})`,
                r.policy === "full" ? "100%" : r.policy === "refreekv (paper)" ? "no cap" : `${Math.round(r.share * 100)}%`,
                r.accuracy.toFixed(3),
                (r.accuracy - fullAccuracy).toFixed(3),
                r.thoughtExact == null ? "n/a" : r.thoughtExact.toFixed(3),
                r.meanCells.toFixed(0),
                r.meanLiveKiB.toFixed(1),
                r.memoryVsFull.toFixed(3),
                r.fidelity == null
                    ? r.policy === "full"
                        ? "1.000"
                        : "n/a"
                    : `${r.fidelity.top1Agreement.toFixed(3)} (n=${r.fidelity.problems})`,
                r.fidelity == null ? (r.policy === "full" ? "0" : "n/a") : r.fidelity.meanKl.toFixed(4),
                r.fidelity == null ? (r.policy === "full" ? "0" : "n/a") : r.fidelity.regret.toFixed(4)
            ])
        )
    };
}

/**
 * Teacher-forced fidelity on real reasoning (`measureFidelity`, main/engine/generation/fidelity.ts) and the oracle, one problem at a time: each question's Full
 * greedy trace with what every step attended to; on the first `fidelityProblems` problems each policy's pruned cache
 * replays it at each share of that problem's Full cells (top-1 agreement, KL, regret); on every problem the oracle runs
 * at each share (its free greedy run is graded). A budget counts where the question fits with a prune round to spare.
 */
async function demoFidelity(
    options: Omit<Parameters<typeof qualitySuite>[0], "policies"> & {policies: PolicyId[]},
    withOracle: boolean,
    problems: TaskProblem[],
    used: number[]
) {
    const sums = new Map<string, {problems: number; top1: number; kl: number; regret: number}>();
    const oracle = new Map<string, {answer: string; live: number} | null>();
    const add = (key: string, report: {top1Agreement: number; meanKl: number; regret: number | null}) => {
        const sum = sums.get(key) ?? {problems: 0, top1: 0, kl: 0, regret: 0};
        sums.set(key, {
            problems: sum.problems + 1,
            top1: sum.top1 + report.top1Agreement,
            kl: sum.kl + report.meanKl,
            regret: sum.regret + (report.regret ?? 0)
        });
    };
    const settings = (policy: PolicyId) => ({
        ...defaultCompressionSettings,
        policy,
        pruneEvery,
        combine: options.combine ?? defaultCompressionSettings.combine
    });
    const model: LlamaModel = await options.llama.loadModel({modelPath: options.modelPath});
    try {
        const wrapper = resolveChatWrapper(model);
        for (const [index, problem] of problems.entries()) {
            if (!withOracle && index >= options.fidelityProblems) break;
            // As the engine prompts: the assistant's turn opened with a thought segment (`<think>\n` for this template).
            const prompt: Token[] = wrapper
                .generateContextState({
                    chatHistory: [
                        {type: "user", text: problem.question},
                        {type: "model", response: [{type: "segment", segmentType: "thought", text: "", ended: false}]}
                    ]
                })
                .contextText.tokenize(model.tokenizer);
            // A few steps past Full's answer: the oracle's greedy run is graded up to its end-of-turn token.
            const steps = Math.max(1, used[index]! - prompt.length + 8);
            const reference = await fullTrace(model, prompt, steps, options.threads, {attention: true});
            for (const share of options.budgets) {
                const cells = Math.max(32, Math.round(used[index]! * share));
                if (prompt.length + pruneEvery + 16 > cells) {
                    oracle.set(`${index}@${share}`, null);
                    continue;
                }
                const measure = (policy: PolicyId, isOracle: boolean) =>
                    measureFidelity({
                        model,
                        prompt,
                        steps,
                        reference,
                        cells,
                        threads: options.threads,
                        compression: settings(policy),
                        oracle: isOracle,
                        retentionGates: retentionSidecarPath(options.modelPath)
                    });
                if (withOracle) {
                    const best = await measure("streamingllm", true);
                    oracle.set(`${index}@${share}`, {
                        answer: extractDemoAnswer(best.greedyText.split("<|im_end|>")[0]!),
                        live: best.finalSample.liveBytes
                    });
                    if (index < options.fidelityProblems) add(`oracle@${share}`, best);
                }
                if (index >= options.fidelityProblems) continue;
                for (const policy of options.policies) add(`${policy}@${share}`, await measure(policy, false));
            }
            options.onProgress?.(
                `oracle and fidelity: problem ${index + 1}/${problems.length} (${prompt.length}-token question, ${steps} steps)`
            );
        }
    } finally {
        await model.dispose();
    }
    return {
        fidelity: new Map(
            [...sums].map(([key, sum]) => [
                key,
                {
                    problems: sum.problems,
                    top1Agreement: sum.top1 / sum.problems,
                    meanKl: sum.kl / sum.problems,
                    regret: sum.regret / sum.problems
                }
            ])
        ),
        oracle
    };
}

function mean(values: number[]): number {
    return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}
