import {resolveChatWrapper, type ChatModelResponse, type LlamaModel, type Token} from "node-llama-cpp";
import type {CompressionSettings, PolicyId, PolicyParams} from "../../../preload/contract.js";
import {fullTrace, measureFidelity} from "../fidelity.js";
import {policies} from "../policies/index.js";

// Validation of candidate retention gates before they are kept (issue 36): held-out prompts, Full's greedy thought
// teacher-forced through a cache pruned to 25% and 50% of its cells, top-1 agreement with Full for TRIM-KV with the
// candidate gates and for Lethe, the best policy without gates.

export type ValidationOptions = {
    model: LlamaModel;
    /** The user messages, rendered with the model's chat template as the engine renders an answer (thinking opened). */
    prompts: string[];
    /** The candidate gate file. */
    gates: string;
    /** Shares of each text's Full cells. Defaults to `[0.25, 0.5]`. */
    shares?: number[];
    /** Tokens Full may write per prompt. Defaults to `1024`. */
    maxTokens?: number;
    threads?: number;
    signal?: AbortSignal;
    onProgress?: (done: number, total: number) => void;
};

/** Top-1 agreement with Full at one share of the cells, over every teacher-forced token of the prompts. */
export type ValidationPoint = {share: number; gates: number; lethe: number};

export type ValidationReport = {
    points: ValidationPoint[];
    /** Prompts measured. */
    prompts: number;
    /** Prompts left out: the model wrote nothing (or only its end-of-turn token) on them. */
    skipped: number;
    /** Tokens teacher-forced per policy and share. */
    tokens: number;
    /** Whether the gates agree with Full at least as well as Lethe, on the mean over the shares. */
    passed: boolean;
};

/** Generated tokens between prune rounds in validation: the bench's quality suite's. */
const pruneEvery = 8;
/** The candidate gates run under TRIM-KV; the baseline they must beat is Lethe: gates that do worse are not installed. */
const gatesPolicy: PolicyId = "trimkv";
const baselinePolicy: PolicyId = "lethe";

/**
 * Measures the candidate gates against Lethe on the prompts; see the module's comment. Agreement is pooled over tokens
 * (longer thoughts weigh more). The gates pass when their mean agreement over the shares is at least Lethe's.
 */
export async function validateGates(options: ValidationOptions): Promise<ValidationReport> {
    const shares = options.shares ?? [0.25, 0.5];
    const maxTokens = options.maxTokens ?? 1024;
    const wrapper = resolveChatWrapper(options.model);
    const sums = shares.map(() => ({gates: 0, lethe: 0}));
    let counted = 0;
    let skipped = 0;
    const total = options.prompts.length * (1 + 2 * shares.length);
    let done = 0;
    const step = () => {
        done++;
        options.onProgress?.(done, total);
        options.signal?.throwIfAborted();
    };
    for (const text of options.prompts) {
        // As an answer opens (and collectCalibrationData): the template's thought prefix, where it has one.
        const opening: ChatModelResponse["response"] =
            wrapper.settings.segments?.thought != null ? [{type: "segment", segmentType: "thought", text: "", ended: false}] : [];
        const prompt: Token[] = wrapper
            .generateContextState({
                chatHistory: [
                    {type: "user", text},
                    {type: "model", response: opening}
                ]
            })
            .contextText.tokenize(options.model.tokenizer);
        const reference = await fullTrace(options.model, prompt, maxTokens, options.threads ?? 1, {
            stop: (token) => options.model.isEogToken(token)
        });
        step();
        const length = prompt.length + reference.tokens.length;
        const steps = reference.tokens.length;
        // The pruned runs read the prompt under the budget too (the controller splits its decodes), so any budget counts;
        // a prompt the model answered with nothing at once is left out.
        const budgets = shares.map((share) => Math.max(32, Math.round(length * share)));
        const fits = steps > 1;
        for (const [k, cells] of budgets.entries()) {
            for (const policy of [gatesPolicy, baselinePolicy]) {
                if (fits) {
                    const report = await measureFidelity({
                        model: options.model,
                        prompt,
                        steps,
                        reference,
                        cells,
                        threads: options.threads ?? 1,
                        compression: settings(policy),
                        retentionGates: policy === gatesPolicy ? options.gates : null,
                        divergence: false
                    });
                    sums[k]![policy === gatesPolicy ? "gates" : "lethe"] += report.top1Agreement * steps;
                }
                step();
            }
        }
        if (fits) counted += steps;
        else skipped++;
    }
    if (counted === 0)
        throw new Error(
            `The model wrote nothing on the ${options.prompts.length} validation prompts: there is no thinking to validate the gates on`
        );
    const points = shares.map((share, k) => ({share, gates: sums[k]!.gates / counted, lethe: sums[k]!.lethe / counted}));
    const mean = (key: "gates" | "lethe") => points.reduce((sum, p) => sum + p[key], 0) / points.length;
    return {points, prompts: options.prompts.length - skipped, skipped, tokens: counted, passed: mean("gates") >= mean("lethe")};
}

function settings(policy: PolicyId): CompressionSettings {
    const params = Object.fromEntries(
        Object.entries(policies).map(([id, p]) => [id, {...(p as {defaults?: object}).defaults}])
    ) as unknown as PolicyParams;
    return {policy, budget: {kind: "auto"}, kvType: "f16", kvTypeV: "f16", flashAttention: false, combine: "aggregate", pruneEvery, params};
}
