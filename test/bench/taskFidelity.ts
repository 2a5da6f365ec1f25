import fs from "node:fs/promises";
import {resolveChatWrapper, type Llama, type Token} from "node-llama-cpp";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {fullTrace, measureFidelity} from "../../main/engine/generation/fidelity.js";
import {retentionSidecarPath} from "../../main/engine/retention/findRetentionGates.js";
import {policyNeeds} from "../../main/engine/policies/scoring.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {problemSets} from "./quality.js";
import {table} from "./plot.js";

/** Prune rounds every 8 tokens, as the quality suite runs the same problems. */
const pruneEvery = 8;
/** The task models' context: Full's thought is traced up to it. */
const contextCells = 4096;

type Sum = {problems: number; cells: number; top1: number; kl: number; regret: number; forcedDrops: number; divergence: (number | null)[]};

/**
 * Fidelity on a task model's own problems (`measureFidelity`, main/engine/generation/fidelity.ts): per held-out problem, Full's greedy thought and answer up to its
 * end-of-turn token, with what each step attended to; then each policy under each combine mode, and the oracle, at
 * each share of that trace's cells, teacher-forced along it (top-1 agreement, KL, regret) and run freely once (the
 * first token where it leaves Full's). A budget counts on a problem where the question fits with a prune round to
 * spare; the means are over those problems.
 */
export async function taskFidelitySuite(options: {
    llama: Llama;
    modelPath: string;
    /** The problem set of the model's own task. */
    set: string;
    policies: PolicyId[];
    combines: CompressionSettings["combine"][];
    budgets: number[];
    problems: number;
    threads: number;
    /** Adds the oracle's rows (future attention of Full's trace). */
    oracle: boolean;
    onProgress?: (line: string) => void;
}) {
    const set = problemSets[options.set]!;
    const gates = retentionSidecarPath(options.modelPath);
    const hasGates = await fs.access(gates).then(
        () => true,
        () => false
    );
    for (const policy of options.policies) {
        if (policyNeeds({...defaultCompressionSettings, policy}).retention === true && !hasGates)
            throw new Error(`${policy} reads retention gates and ${options.modelPath} has none (${gates})`);
    }
    const sums = new Map<string, Sum>();
    const add = (key: string, cells: number, report: Awaited<ReturnType<typeof measureFidelity>>) => {
        const sum = sums.get(key) ?? {problems: 0, cells: 0, top1: 0, kl: 0, regret: 0, forcedDrops: 0, divergence: []};
        sum.problems++;
        sum.cells += cells;
        sum.top1 += report.top1Agreement;
        sum.kl += report.meanKl;
        sum.regret += report.regret ?? 0;
        sum.forcedDrops += report.finalSample.forcedDrops;
        sum.divergence.push(report.firstDivergence);
        sums.set(key, sum);
    };
    const problems = set.problems(options.problems);
    const model = await options.llama.loadModel({modelPath: options.modelPath});
    let fullCells = 0;
    try {
        const wrapper = resolveChatWrapper(model);
        for (const [index, problem] of problems.entries()) {
            // As the engine prompts: the assistant's turn opened with a thought segment.
            const prompt: Token[] = wrapper
                .generateContextState({
                    chatHistory: [
                        {type: "user", text: problem.question},
                        {type: "model", response: [{type: "segment", segmentType: "thought", text: "", ended: false}]}
                    ]
                })
                .contextText.tokenize(model.tokenizer);
            const reference = await fullTrace(model, prompt, contextCells - prompt.length - 16, options.threads, {
                attention: true,
                stop: (token) => model.isEogToken(token)
            });
            // Every token up to the end-of-turn token: the trace attends from each of them (the oracle reads that).
            const steps = reference.attention!.length;
            const full = prompt.length + steps + 1;
            fullCells += full;
            for (const share of options.budgets) {
                const cells = Math.max(32, Math.round(full * share));
                if (prompt.length + pruneEvery + 16 > cells) continue;
                const measure = (compression: CompressionSettings, oracle: boolean) =>
                    measureFidelity({
                        model,
                        prompt,
                        steps,
                        reference,
                        cells,
                        threads: options.threads,
                        compression,
                        oracle,
                        retentionGates: hasGates ? gates : null
                    });
                if (options.oracle)
                    add(
                        `oracle|-|${share}`,
                        cells,
                        await measure({...defaultCompressionSettings, policy: "streamingllm", pruneEvery}, true)
                    );
                for (const combine of options.combines) {
                    for (const policy of options.policies)
                        add(
                            `${policy}|${combine}|${share}`,
                            cells,
                            await measure({...defaultCompressionSettings, policy, combine, pruneEvery}, false)
                        );
                }
            }
            options.onProgress?.(`problem ${index + 1}/${problems.length}: ${prompt.length}-token question, ${steps} tokens`);
        }
    } finally {
        await model.dispose();
    }
    const rows = [...sums].map(([key, sum]) => {
        const [policy, combine, share] = key.split("|") as [string, string, string];
        return {
            policy,
            combine,
            share: Number(share),
            problems: sum.problems,
            meanCells: sum.cells / sum.problems,
            top1Agreement: sum.top1 / sum.problems,
            meanKl: sum.kl / sum.problems,
            regret: sum.regret / sum.problems,
            forcedDrops: sum.forcedDrops / sum.problems,
            firstDivergence: sum.divergence
        };
    });
    // The table by budget, then combine mode (the oracle first), then policy in the order given.
    const order = (row: (typeof rows)[number]) => [
        row.share,
        row.combine === "-" ? -1 : options.combines.indexOf(row.combine as CompressionSettings["combine"])
    ];
    rows.sort((a, b) => order(a)[0]! - order(b)[0]! || order(a)[1]! - order(b)[1]!);
    return {
        title: set.title,
        problems: problems.length,
        meanFullCells: fullCells / problems.length,
        rows,
        table: table(
            [
                "policy",
                "combine",
                "budget (mean cells)",
                "problems",
                "top-1 agreement",
                "mean KL (nats)",
                "first greedy divergence (per problem)",
                "regret",
                "forced drops"
            ],
            rows.map((row) => [
                row.policy,
                row.combine,
                `${Math.round(row.share * 100)}% (${row.meanCells.toFixed(0)})`,
                row.problems,
                row.top1Agreement.toFixed(3),
                row.meanKl.toFixed(4),
                row.firstDivergence.map((token) => token ?? "none").join(", "),
                row.regret.toFixed(4),
                row.forcedDrops.toFixed(0)
            ])
        )
    };
}
