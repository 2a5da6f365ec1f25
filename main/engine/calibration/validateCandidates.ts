import {LlamaText, resolveChatWrapper, type ChatModelResponse, type LlamaModel, type Token} from "node-llama-cpp";
import type {CompressionSettings, PolicyId, PolicyParams} from "../../../preload/contract.js";
import {fullTrace, measureFidelity} from "../generation/fidelity.js";
import {policies} from "../policies/index.js";
import type {ValidationPoint, ValidationReport} from "./types.js";

// Validation of candidate retention gates before they are kept: held-out prompts, Full's greedy thought and
// answer teacher-forced through a cache pruned to 25% and 50% of its cells, top-1 agreement with Full for TRIM-KV with
// the candidate gates (combined as the app combines them: per-head cells for gates fitted per head) and for Lethe, the best policy without gates. The answer (after the thought's closing marker) is
// scored apart from the thought and weighs as much: it is a few tokens against hundreds, and it is what a person reads.

export type ValidationOptions = {
    model: LlamaModel;
    /** The user messages, rendered with the model's chat template as the engine renders an answer (thinking opened). */
    prompts: string[];
    /** The candidate gate files. */
    candidates: string[];
    /** Shares of each text's Full cells. Defaults to `[0.25, 0.5]`. */
    shares?: number[];
    /** Tokens Full may write per prompt. Defaults to `1024`. */
    maxTokens?: number;
    threads?: number;
    signal?: AbortSignal;
    onProgress?: (done: number, total: number) => void;
};

/** Generated tokens between prune rounds in validation: the bench's quality suite's. */
const pruneEvery = 8;
/** The candidate gates run under TRIM-KV; the baseline they must beat is Lethe: gates that do worse are not installed. */
const gatesPolicy: PolicyId = "trimkv";
const baselinePolicy: PolicyId = "lethe";

/**
 * Measures candidate gate files against Lethe on the prompts (see the module's comment), Full's traces and Lethe's runs
 * shared between them: one report per candidate, in their order. Agreement is pooled over tokens (longer thoughts weigh
 * more). A candidate passes when its score (`validationScore`) is at least Lethe's.
 */
export async function validateCandidates(options: ValidationOptions): Promise<ValidationReport[]> {
    const shares = options.shares ?? [0.25, 0.5];
    const maxTokens = options.maxTokens ?? 1024;
    const wrapper = resolveChatWrapper(options.model);
    // per share: Lethe's sums, then each candidate's
    const runs = [null, ...options.candidates];
    const sums = shares.map(() => runs.map(() => ({all: 0, answers: 0})));
    // the closing marker without the whitespace around it ("\n</think>\n\n" -> "</think>"): a model may space it otherwise
    const thoughtSuffix = wrapper.settings.segments?.thought?.suffix;
    const marker = thoughtSuffix == null ? null : LlamaText(thoughtSuffix).toString().trim();
    let counted = 0;
    let answerTokens = 0;
    let skipped = 0;
    const total = options.prompts.length * (1 + runs.length * shares.length);
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
        const answerStart = thoughtEnd(options.model, reference.tokens, marker);
        for (const [k, cells] of budgets.entries()) {
            for (const [r, gates] of runs.entries()) {
                if (fits) {
                    const report = await measureFidelity({
                        model: options.model,
                        prompt,
                        steps,
                        reference,
                        cells,
                        threads: options.threads ?? 1,
                        compression: gates == null ? settings(baselinePolicy, false) : settings(gatesPolicy, true),
                        retentionGates: gates,
                        divergence: false
                    });
                    const sum = sums[k]![r]!;
                    sum.all += report.top1Agreement * steps;
                    sum.answers += report.agreed.subarray(answerStart).reduce((n, a) => n + a, 0);
                }
                step();
            }
        }
        if (fits) {
            counted += steps;
            answerTokens += steps - answerStart;
        } else skipped++;
    }
    if (counted === 0)
        throw new Error(
            `The model wrote nothing on the ${options.prompts.length} validation prompts: there is no thinking to validate the gates on`
        );
    return options.candidates.map((_, c) => {
        const points: ValidationPoint[] = shares.map((share, k) => {
            const [lethe, gates] = [sums[k]![0]!, sums[k]![c + 1]!];
            return {
                share,
                gates: gates.all / counted,
                lethe: lethe.all / counted,
                answers: answerTokens > 0 ? {gates: gates.answers / answerTokens, lethe: lethe.answers / answerTokens} : null
            };
        });
        return {
            points,
            prompts: options.prompts.length - skipped,
            skipped,
            tokens: counted,
            answerTokens,
            passed: gatesPass(points, counted, answerTokens)
        };
    });
}

/**
 * The validation's verdict: whether the gates' score, averaged over the shares, is at least Lethe's. A score is the mean
 * of the agreement on the thought's tokens and on the answers' (`answerTokens` of the `tokens`), or the agreement on
 * every token where no answer (or no thought) was measured.
 */
export function gatesPass(points: readonly ValidationPoint[], tokens: number, answerTokens: number): boolean {
    return validationScore(points, tokens, answerTokens, "gates") >= validationScore(points, tokens, answerTokens, "lethe");
}

/** One policy's score in the validation, averaged over the shares; see `gatesPass`. */
export function validationScore(
    points: readonly ValidationPoint[],
    tokens: number,
    answerTokens: number,
    policy: "gates" | "lethe"
): number {
    const thoughtTokens = tokens - answerTokens;
    const score = (all: number, answers: number | undefined) =>
        answers != null && answerTokens > 0 && thoughtTokens > 0
            ? ((all * tokens - answers * answerTokens) / thoughtTokens + answers) / 2
            : all;
    return points.reduce((total, point) => total + score(point[policy], point.answers?.[policy]), 0) / points.length;
}

/**
 * Index in `tokens` of the first token after the thought: after the shortest prefix whose text holds the template's
 * closing marker (`suffix`); `tokens.length` when the thought never closed, `0` when the template has no thought.
 */
export function thoughtEnd(model: Pick<LlamaModel, "detokenize">, tokens: readonly Token[], suffix: string | null): number {
    if (suffix == null || suffix === "") return 0;
    const closed = (n: number) => model.detokenize(tokens.slice(0, n), true).includes(suffix);
    if (!closed(tokens.length)) return tokens.length;
    let low = 0; // not closed
    let high = tokens.length; // closed
    while (high - low > 1) {
        const middle = (low + high) >> 1;
        if (closed(middle)) high = middle;
        else low = middle;
    }
    return high;
}

/**
 * The settings a validation run prunes under: Lethe on shared cells, the gates as the app uses them (`auto`: per-head
 * cells for gates fitted per head, as every calibration's are; shared cells for gates trained for the shared max).
 */
function settings(policy: PolicyId, gates: boolean): CompressionSettings {
    const params = Object.fromEntries(
        Object.entries(policies).map(([id, p]) => [id, {...(p as {defaults?: object}).defaults}])
    ) as unknown as PolicyParams;
    const combine = gates ? "auto" : "aggregate";
    return {policy, budget: {kind: "auto"}, kvType: "f16", kvTypeV: "f16", flashAttention: false, combine, pruneEvery, params};
}
