import type {ControlledEvaluateInputItem, LlamaContextSequence, LlamaModel, Token} from "node-llama-cpp";
import type {CompressionSettings, KvSample} from "../../../preload/contract/compression.js";
import {KvController} from "../pruning/KvController.js";
import {protectNewest} from "../policies/decide.js";
import {NativeKv} from "../native/NativeKv.js";
import type {RetentionSnapshot} from "../native/types.js";
import {logSigmoid} from "../policies/scoreMath.js";
import {gateSequenceDecodes} from "../native/ponderAddon.js";

export type FidelityOptions = {
    model: LlamaModel;
    prompt: Token[];
    /** Tokens to generate and compare. */
    steps: number;
    compression: CompressionSettings;
    /** KV cells of the pruned run. */
    cells: number;
    threads?: number;
    /** A trace already made by `fullTrace` for the same prompt, to share between policies. */
    reference?: FullTrace;
    /**
     * Instead of the policy, keep at each round the cells the full run's rest of the trace attends to most (needs a
     * reference made with `attention: true`): the bound no eviction at this budget can beat. Defaults to `false`.
     */
    oracle?: boolean;
    /** The model's retention gate file, for a policy that reads the gates (TRIM-KV). */
    retentionGates?: string | null;
    /** Also run the pruned cache freely to find the first divergent token (a second pass). Defaults to `true`. */
    divergence?: boolean;
};

/** The full-cache run: its greedy tokens and, at each step, the log-probabilities it predicted. */
export type FullTrace = {
    tokens: Token[];
    logProbs: Float32Array[];
    /**
     * With `attention: true`: for each step, the attention its query paid to every earlier position (each layer's and
     * head's softmax row, averaged over layers and heads: sums to 1), indexed by position.
     */
    attention?: Float32Array[];
    /**
     * With `attention: true`: for each step, the largest weight any one layer's head gave each earlier position (a
     * sharp read shows as a value near 1 even where the mean over heads is small), indexed by position.
     */
    sharpest?: Float32Array[];
    /**
     * With `retention` (a gate file): per position, the largest log beta over layers and KV heads of the cell the token
     * was written to, the shared retention TRIM-KV's aggregate ranking uses.
     */
    logBeta?: Float64Array;
};

export type FidelityReport = {
    steps: number;
    /** Share of teacher-forced steps whose argmax equals the full cache's token. */
    top1Agreement: number;
    /** Per teacher-forced step, 1 where its argmax equals the full cache's token, else 0. */
    agreed: Uint8Array;
    /** Mean KL(full || pruned) of the next-token distributions, in nats. */
    meanKl: number;
    /**
     * Index of the first token where a free-running greedy pruned run leaves the full run's tokens; `null` if never (or
     * not looked for, `divergence: false`).
     */
    firstDivergence: number | null;
    /** Memory at the end of the teacher-forced run. */
    finalSample: KvSample;
    /**
     * Regret: the mean share of the attention the full run paid at each step that went to cells this run had freed
     * (teacher-forced; needs a reference made with `attention: true`), else `null`.
     */
    regret: number | null;
    /** With `oracle`: the text of the free greedy run (special tokens included), to grade an answer. */
    greedyText: string;
};

const positionLimit = 1 << 22;

/**
 * Greedy decoding with a full cache: the reference every pruned run is measured against. With `attention`, also what
 * each step attended to (the patched build's scores of the last query row), for the oracle and the regret read-out.
 */
export async function fullTrace(
    model: LlamaModel,
    prompt: Token[],
    steps: number,
    threads = 1,
    options: {attention?: boolean; stop?: (token: Token) => boolean; retention?: string} = {}
): Promise<FullTrace> {
    const context = await model.createContext({contextSize: prompt.length + steps + 16, threads, sequences: 1});
    const kv = options.attention === true || options.retention != null ? new NativeKv(context) : null;
    try {
        if (options.attention === true) await kv?.configureScoring({enabled: true, rows: 1, gamma: 1});
        if (options.retention != null) await kv?.configureRetention(options.retention);
        const sequence = context.getSequence();
        const tokens: Token[] = [];
        const logProbs: Float32Array[] = [];
        const attention: Float32Array[] = [];
        const sharpest: Float32Array[] = [];
        const total = prompt.length + steps;
        let logits = await evaluateForLogits(sequence, prompt, model);
        for (let i = 0; i < steps; i++) {
            const next = argmax(logits) as Token;
            tokens.push(next);
            logProbs.push(logSoftmax(logits));
            if (options.stop?.(next) === true) break;
            logits = await evaluateForLogits(sequence, [next], model);
            if (kv != null && options.attention === true) {
                const row = await lastRowAttention(kv, total);
                attention.push(row.mean);
                sharpest.push(row.sharpest);
            }
        }
        const logBeta = options.retention != null ? sharedLogBeta(await kv!.retention(0), total) : undefined;
        return options.attention === true ? {tokens, logProbs, attention, sharpest, logBeta} : {tokens, logProbs, logBeta};
    } finally {
        await kv?.dispose();
        await context.dispose();
    }
}

/** Per position, the max over layers and KV heads of log beta = logsigmoid(gate logit) (TRIM-KV, the shared reduction). */
function sharedLogBeta(snapshot: RetentionSnapshot, length: number): Float64Array {
    const out = new Float64Array(length).fill(Number.NEGATIVE_INFINITY);
    const n = snapshot.positions.length;
    for (const layer of snapshot.logits) {
        for (let h = 0; h < snapshot.heads; h++) {
            for (let j = 0; j < n; j++) {
                const position = snapshot.positions[j]!;
                if (position < length) out[position] = Math.max(out[position]!, logSigmoid(layer[h * n + j]!));
            }
        }
    }
    return out;
}

/**
 * The last decode's attention over positions, averaged over layers and heads (each row a softmax over the cells), and
 * the largest weight one head gave each position.
 */
async function lastRowAttention(kv: NativeKv, length: number): Promise<{mean: Float32Array; sharpest: Float32Array}> {
    const snapshot = await kv.scores(0);
    const out = new Float32Array(length);
    const sharpest = new Float32Array(length);
    const n = snapshot.positions.length;
    let rows = 0;
    for (const layer of snapshot.layers) {
        for (let h = 0; h < snapshot.heads; h++) {
            let sum = 0;
            for (let j = 0; j < n; j++) sum += layer.last[h * n + j]!;
            if (sum <= 0) continue;
            rows++;
            for (let j = 0; j < n; j++) {
                const position = snapshot.positions[j]!;
                if (position < length) {
                    const weight = layer.last[h * n + j]! / sum;
                    out[position] = out[position]! + weight;
                    sharpest[position] = Math.max(sharpest[position]!, weight);
                }
            }
        }
    }
    return {mean: rows > 0 ? out.map((v) => v / rows) : out, sharpest};
}

/** For each step, the attention that step and the rest of the trace pay to each position: suffix sums. */
function futureAttention(attention: Float32Array[]): Float32Array[] {
    const future: Float32Array[] = Array(attention.length);
    let running = new Float32Array(attention[0]?.length ?? 0);
    for (let step = attention.length - 1; step >= 0; step--) {
        const row = attention[step]!;
        running = running.map((v, p) => v + (row[p] ?? 0));
        future[step] = running;
    }
    return future;
}

/**
 * Fidelity of a pruned cache against the full one (the bench's `fidelity` suite, docs/BENCHMARKS.md): teacher-forces the full run's tokens through
 * a context of `cells` cells pruned by the policy as it goes, comparing next-token distributions, then runs
 * greedily with pruning to find the first token where the two runs part.
 */
export async function measureFidelity(options: FidelityOptions): Promise<FidelityReport> {
    const reference = options.reference ?? (await fullTrace(options.model, options.prompt, options.steps, options.threads));
    const steps = Math.min(options.steps, reference.tokens.length);

    if (options.oracle === true && reference.attention == null)
        throw new Error("The oracle needs a reference trace made with attention: true");

    let agree = 0;
    const agreed = new Uint8Array(steps);
    let klSum = 0;
    let regretSum = 0;
    const forced = await prunedRun(
        options,
        reference,
        async (kv, logits, step) => {
            const predicted = logSoftmax(logits);
            if (argmax(logits) === reference.tokens[step]) {
                agree++;
                agreed[step] = 1;
            }
            klSum += kl(reference.logProbs[step]!, predicted);
            if (reference.attention != null && step > 0) {
                // The full run's attention at this step (its query is the token fed at step - 1) to cells freed here.
                const row = reference.attention[step - 1]!;
                const live = new Set(await kv.positions());
                const newest = options.prompt.length + step - 1;
                let lost = 0;
                let all = 0;
                for (let p = 0; p < newest; p++) {
                    all += row[p]!;
                    if (!live.has(p)) lost += row[p]!;
                }
                regretSum += all > 0 ? lost / all : 0;
            }
            return reference.tokens[step]!;
        },
        steps
    );

    let firstDivergence: number | null = null;
    const greedy: Token[] = [];
    if (options.divergence !== false) {
        await prunedRun(
            options,
            reference,
            async (_kv, logits, step) => {
                const next = argmax(logits) as Token;
                if (firstDivergence == null && next !== reference.tokens[step]) firstDivergence = step;
                greedy.push(next);
                return next;
            },
            steps
        );
    }

    return {
        steps,
        top1Agreement: agree / steps,
        agreed,
        meanKl: klSum / steps,
        firstDivergence,
        finalSample: forced,
        regret: reference.attention != null && steps > 1 ? regretSum / (steps - 1) : null,
        greedyText: options.oracle === true ? options.model.detokenize(greedy, true) : ""
    };
}

type StepFn = (kv: {positions(): Promise<Int32Array>}, logits: Float32Array, step: number) => Promise<Token>;

/**
 * Decodes `steps` tokens chosen by `choose` in a context of `cells` cells with the policy pruning every few tokens
 * (or, with `oracle`, the reference's future attention choosing: positions only, scoring off).
 */
async function prunedRun(options: FidelityOptions, reference: FullTrace, choose: StepFn, steps: number): Promise<KvSample> {
    const context = await options.model.createContext({contextSize: options.cells, threads: options.threads ?? 1, sequences: 1});
    const kv = new NativeKv(context);
    try {
        kv.setPositionLimit(positionLimit);
        const sequence = context.getSequence();
        const future = options.oracle === true ? futureAttention(reference.attention!) : null;
        let current = 0;
        const controller = new KvController({
            kv,
            sequenceId: 0,
            cells: options.cells,
            compression: future != null ? {...options.compression, policy: "streamingllm"} : options.compression,
            tokensSeen: () => sequence.nextTokenIndex,
            now: () => performance.now(),
            retentionGates: options.retentionGates,
            chooseEvictions:
                future != null ? (snapshot, maxKeep) => oracleEvictions(snapshot.positions, future[current]!, maxKeep) : undefined
        });
        await controller.start();
        // Every decode waits for the round due before it: every run prunes at the same steps, so the comparison is repeatable.
        gateSequenceDecodes(sequence, (count, first) => controller.beforeDecode(count, first));
        controller.beginAnswer();
        const positions = async () => (await kv.scores(0)).positions;
        let logits = await evaluateForLogits(sequence, options.prompt, options.model);
        for (let step = 0; step < steps; step++) {
            current = step;
            const next = await choose({positions}, logits, step);
            controller.onTokens(1);
            logits = await evaluateForLogits(sequence, [next], options.model);
        }
        return await controller.sample(0);
    } finally {
        await kv.dispose();
        await context.dispose();
    }
}

async function evaluateForLogits(sequence: LlamaContextSequence, tokens: Token[], model: LlamaModel): Promise<Float32Array> {
    const input: ControlledEvaluateInputItem[] = tokens.map((token, index) =>
        index === tokens.length - 1 ? [token, {generateNext: {logits: true}}] : token
    );
    const outputs = await sequence.controlledEvaluate(input);
    const logits = outputs[tokens.length - 1]?.next?.logits;
    if (logits == null) throw new Error("The engine returned no logits");
    const vocab = (model.fileInfo.metadata.tokenizer?.ggml?.tokens as unknown[] | undefined)?.length ?? Math.max(...logits.keys()) + 1;
    const dense = new Float32Array(vocab).fill(-Infinity);
    for (const [token, value] of logits) dense[token] = value;
    return dense;
}

/**
 * The oracle's round: keep position 0, the newest `protectNewest` cells and then the cells with the most future
 * attention, up to `maxKeep`; free the rest.
 */
function oracleEvictions(positions: Int32Array, future: Float32Array, maxKeep: number): Int32Array {
    const n = positions.length;
    const order = Array.from({length: n}, (_, j) => j);
    let newest = -1;
    for (const p of positions) newest = Math.max(newest, p);
    const protect = (p: number) => p === 0 || p > newest - protectNewest;
    order.sort(
        (a, b) =>
            Number(protect(positions[b]!)) - Number(protect(positions[a]!)) || (future[positions[b]!] ?? 0) - (future[positions[a]!] ?? 0)
    );
    return Int32Array.from(order.slice(maxKeep).map((j) => positions[j]!)).sort();
}

function argmax(values: Float32Array): number {
    let best = 0;
    for (let i = 1; i < values.length; i++) {
        if (values[i]! > values[best]!) best = i;
    }
    return best;
}

export function logSoftmax(logits: Float32Array): Float32Array {
    let max = -Infinity;
    for (const v of logits) max = Math.max(max, v);
    let sum = 0;
    for (const v of logits) sum += Math.exp(v - max);
    const logSum = max + Math.log(sum);
    return logits.map((v) => v - logSum);
}

/** KL(p || q) from log-probabilities, in nats. */
export function kl(logP: Float32Array, logQ: Float32Array): number {
    let total = 0;
    for (let i = 0; i < logP.length; i++) {
        const lp = logP[i]!;
        if (lp === -Infinity) continue;
        total += Math.exp(lp) * (lp - logQ[i]!);
    }
    return Math.max(0, total);
}
