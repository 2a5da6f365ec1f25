// Shared set-up of the native-engine tests: the patched build, fixture models, and small evaluation helpers.
import type {
    ControlledEvaluateInputItem,
    Llama,
    LlamaContext,
    LlamaContextOptions,
    LlamaContextSequence,
    LlamaModel,
    Token
} from "node-llama-cpp";
import {getFixtureModel, type FixtureName} from "../fixtures/gguf/fixtures.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";

let llamaPromise: Promise<Llama> | null = null;

/** The patched CPU build (built by `npm run build:native`); one per test file. */
export function getTestLlama(): Promise<Llama> {
    llamaPromise ??= loadPatchedLlama({gpu: false, logLevel: "error"});
    return llamaPromise;
}

export const MODEL_SHAPES = {
    /** qwen2, 4 query heads on 2 KV heads, 4 layers. */
    gqa: "tiny-qwen2",
    /** qwen2, 4 query heads on 1 KV head. */
    mqa: "tiny-mqa"
} as const satisfies Record<string, FixtureName>;

export type ModelShape = keyof typeof MODEL_SHAPES;

export async function loadTestModel(shape: ModelShape): Promise<LlamaModel> {
    const llama = await getTestLlama();
    return await llama.loadModel({modelPath: await getFixtureModel(MODEL_SHAPES[shape])});
}

export type TestContext = {
    context: LlamaContext;
    sequence: LlamaContextSequence;
    kv: NativeKv;
    dispose(): Promise<void>;
};

export async function createTestContext(
    model: LlamaModel,
    {
        contextSize = 256,
        flashAttention = false,
        batchSize,
        kvCacheKeyType,
        kvCacheValueType
    }: {
        contextSize?: number;
        flashAttention?: boolean;
        batchSize?: number;
        /** The cache's K and V types by ggml name ("Q8_0", "Q4_0"); F16 when unset. */
        kvCacheKeyType?: LlamaContextOptions["experimentalKvCacheKeyType"];
        kvCacheValueType?: LlamaContextOptions["experimentalKvCacheValueType"];
    } = {}
): Promise<TestContext> {
    const context = await model.createContext({
        contextSize,
        flashAttention,
        batchSize,
        threads: 2,
        experimentalKvCacheKeyType: kvCacheKeyType,
        experimentalKvCacheValueType: kvCacheValueType
    });
    const sequence = context.getSequence();
    const kv = new NativeKv(context);
    return {
        context,
        sequence,
        kv,
        async dispose() {
            await kv.dispose();
            await context.dispose();
        }
    };
}

/** Deterministic pseudo-random byte tokens (ids 40..249 of the fixture vocabulary: no specials). */
export function randomTokens(count: number, seed: number): Token[] {
    let state = seed >>> 0 || 1;
    const tokens: Token[] = [];
    for (let i = 0; i < count; i++) {
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        tokens.push((40 + ((state >>> 8) % 210)) as Token);
    }
    return tokens;
}

/** Evaluates `tokens` and returns the raw logits after the last one, dense over the vocabulary. */
export async function evaluateForLogits(sequence: LlamaContextSequence, tokens: Token[]): Promise<Float32Array> {
    const input: ControlledEvaluateInputItem[] = tokens.map((token, index) =>
        index === tokens.length - 1 ? [token, {generateNext: {logits: true}}] : token
    );
    const outputs = await sequence.controlledEvaluate(input);
    const logits = outputs[tokens.length - 1]?.next.logits;
    if (logits == null) throw new Error("no logits returned");

    const dense = new Float32Array(Math.max(...logits.keys()) + 1);
    for (const [token, value] of logits) dense[token] = value;
    return dense;
}

export function sum(values: ArrayLike<number>): number {
    let total = 0;
    for (let i = 0; i < values.length; i++) total += values[i]!;
    return total;
}

export function maxAbsDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
    if (a.length !== b.length) throw new Error(`length mismatch: ${a.length} vs ${b.length}`);
    let max = 0;
    for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
    return max;
}
