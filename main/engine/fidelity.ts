import type {ControlledEvaluateInputItem, LlamaContextSequence, LlamaModel, Token} from "node-llama-cpp";
import type {CompressionSettings, KvSample} from "../../preload/contract.js";
import {KvController} from "./KvController.js";
import {NativeKv} from "./native/NativeKv.js";

export type FidelityOptions = {
    model: LlamaModel,
    prompt: Token[],
    /** Tokens to generate and compare. */
    steps: number,
    compression: CompressionSettings,
    /** KV cells of the pruned run. */
    cells: number,
    threads?: number,
    /** A trace already made by `fullTrace` for the same prompt, to share between policies. */
    reference?: FullTrace
};

/** The full-cache run: its greedy tokens and, at each step, the log-probabilities it predicted. */
export type FullTrace = {tokens: Token[], logProbs: Float32Array[]};

export type FidelityReport = {
    steps: number,
    /** Share of teacher-forced steps whose argmax equals the full cache's token. */
    top1Agreement: number,
    /** Mean KL(full || pruned) of the next-token distributions, in nats. */
    meanKl: number,
    /** Index of the first token where a free-running greedy pruned run leaves the full run's tokens; `null` if never. */
    firstDivergence: number | null,
    /** Memory at the end of the teacher-forced run. */
    finalSample: KvSample
};

const positionLimit = 1 << 22;

/** Greedy decoding with a full cache: the reference every pruned run is measured against. */
export async function fullTrace(model: LlamaModel, prompt: Token[], steps: number, threads = 1): Promise<FullTrace> {
    const context = await model.createContext({contextSize: prompt.length + steps + 16, threads, sequences: 1});
    try {
        const sequence = context.getSequence();
        const tokens: Token[] = [];
        const logProbs: Float32Array[] = [];
        let logits = await evaluateForLogits(sequence, prompt, model);
        for (let i = 0; i < steps; i++) {
            const next = argmax(logits) as Token;
            tokens.push(next);
            logProbs.push(logSoftmax(logits));
            logits = await evaluateForLogits(sequence, [next], model);
        }
        return {tokens, logProbs};
    } finally {
        await context.dispose();
    }
}

/**
 * Fidelity of a pruned cache against the full one (DESIGN §6): teacher-forces the full run's tokens through
 * a context of `cells` cells pruned by the policy as it goes, comparing next-token distributions, then runs
 * greedily with pruning to find the first token where the two runs part.
 */
export async function measureFidelity(options: FidelityOptions): Promise<FidelityReport> {
    const reference = options.reference ?? await fullTrace(options.model, options.prompt, options.steps, options.threads);
    const steps = Math.min(options.steps, reference.tokens.length);

    let agree = 0;
    let klSum = 0;
    const forced = await prunedRun(options, async (sequence, controller, logits, step) => {
        const predicted = logSoftmax(logits);
        if (argmax(logits) === reference.tokens[step])
            agree++;
        klSum += kl(reference.logProbs[step]!, predicted);
        void controller;
        void sequence;
        return reference.tokens[step]!;
    }, steps);

    let firstDivergence: number | null = null;
    await prunedRun(options, async (_sequence, _controller, logits, step) => {
        const next = argmax(logits) as Token;
        if (firstDivergence == null && next !== reference.tokens[step])
            firstDivergence = step;
        return next;
    }, steps);

    return {steps, top1Agreement: agree / steps, meanKl: klSum / steps, firstDivergence, finalSample: forced};
}

type StepFn = (sequence: LlamaContextSequence, controller: KvController, logits: Float32Array, step: number) => Promise<Token>;

/** Decodes `steps` tokens chosen by `choose` in a context of `cells` cells with the policy pruning every few tokens. */
async function prunedRun(options: FidelityOptions, choose: StepFn, steps: number): Promise<KvSample> {
    const context = await options.model.createContext({contextSize: options.cells, threads: options.threads ?? 1, sequences: 1});
    const kv = new NativeKv(context);
    try {
        kv.setPositionLimit(positionLimit);
        const sequence = context.getSequence();
        const controller = new KvController({
            kv, sequenceId: 0, compression: options.compression, cells: options.cells,
            tokensSeen: () => sequence.nextTokenIndex, now: () => performance.now()
        });
        await controller.start();
        let logits = await evaluateForLogits(sequence, options.prompt, options.model);
        for (let step = 0; step < steps; step++) {
            const next = await choose(sequence, controller, logits, step);
            controller.onTokens(1);
            // Wait for the round so every run prunes at the same steps: the comparison is then repeatable.
            await controller.idle();
            if (controller.error != null)
                throw controller.error;
            logits = await evaluateForLogits(sequence, [next], options.model);
        }
        const sample = await controller.sample(0);
        await controller.dispose();
        return sample;
    } finally {
        await kv.dispose();
        await context.dispose();
    }
}

async function evaluateForLogits(sequence: LlamaContextSequence, tokens: Token[], model: LlamaModel): Promise<Float32Array> {
    const input: ControlledEvaluateInputItem[] = tokens.map((token, index) => (index === tokens.length - 1 ? [token, {generateNext: {logits: true}}] : token));
    const outputs = await sequence.controlledEvaluate(input);
    const logits = outputs[tokens.length - 1]?.next?.logits;
    if (logits == null)
        throw new Error("The engine returned no logits");
    const vocab = (model.fileInfo.metadata.tokenizer?.ggml?.tokens as unknown[] | undefined)?.length ?? Math.max(...logits.keys()) + 1;
    const dense = new Float32Array(vocab).fill(-Infinity);
    for (const [token, value] of logits)
        dense[token] = value;
    return dense;
}

export function argmax(values: Float32Array): number {
    let best = 0;
    for (let i = 1; i < values.length; i++) {
        if (values[i]! > values[best]!)
            best = i;
    }
    return best;
}

export function logSoftmax(logits: Float32Array): Float32Array {
    let max = -Infinity;
    for (const v of logits)
        max = Math.max(max, v);
    let sum = 0;
    for (const v of logits)
        sum += Math.exp(v - max);
    const logSum = max + Math.log(sum);
    return logits.map((v) => v - logSum);
}

/** KL(p || q) from log-probabilities, in nats. */
export function kl(logP: Float32Array, logQ: Float32Array): number {
    let total = 0;
    for (let i = 0; i < logP.length; i++) {
        const lp = logP[i]!;
        if (lp === -Infinity)
            continue;
        total += Math.exp(lp) * (lp - logQ[i]!);
    }
    return Math.max(0, total);
}
