// The fit estimate against what llama.cpp itself allocates, on generated models: qwen3-shaped ones whose heads (64) are
// wider than embedding / heads (160 / 4 = 40), GQA and MQA, f16, q8_0 and keys and values at different types (LeanKV's
// K8V4, its mirror K4V8), with and without flash attention (KV bytes per cell and in all, weights, and the compute
// buffer); the compute buffer of llama- and qwen2-shaped ones at other context and ubatch sizes; and that of the
// 28-layer bench model, plain and with the scoring policies' branches.
import {setTimeout as delay} from "node:timers/promises";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {Llama, LlamaContext, LlamaContextOptions} from "node-llama-cpp";
import {computeBufferBytes} from "../../main/kv/computeBufferBytes.js";
import {inspectModel} from "../../main/engine/runtime/inspectModel.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {scoring} from "../../main/engine/policies/scoring.js";
import type {ModelInspection} from "../../main/engine/EngineApi.js";
import {estimateBudget} from "../../main/services/CompressionService.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel, type FixtureName} from "../fixtures/gguf/fixtures.js";

const mib = 1024 * 1024;
let llama: Llama;
/** llama.cpp's own report of the compute buffer it reserved for the last context, in bytes (to 0.01 MiB). */
const computeLogs: number[] = [];
/** Its report of the score buffers a scoring policy turns on. */
const scoreLogs: number[] = [];

beforeAll(async () => {
    llama = await loadPatchedLlama({
        gpu: false,
        logLevel: "info",
        llamaOptions: {
            logger(_level, message) {
                const match = /CPU compute buffer size = +([\d.]+) MiB/.exec(message);
                if (match != null) computeLogs.push(Number(match[1]) * mib);
                const scores = /attention score buffer size = +([\d.]+) MiB/.exec(message);
                if (scores != null) scoreLogs.push(Number(scores[1]) * mib);
            }
        }
    });
});

afterAll(async () => {
    await llama?.dispose();
});

/** The compute buffer llama.cpp reports next: its log line arrives through the logger's queue. */
async function reportedComputeBytes(): Promise<number> {
    for (let i = 0; i < 50 && computeLogs.length === 0; i++) await delay(20);
    const reported = computeLogs.at(-1);
    expect(reported).toBeGreaterThan(0);
    return reported!;
}

/** The estimate's error against llama.cpp's report, logged per case. */
function relativeError(label: string, estimate: number, reported: number): number {
    const error = Math.abs(estimate - reported) / reported;
    console.log(`${label}: compute ${estimate} vs ${reported} (${(error * 100).toFixed(2)}%)`);
    return error;
}

/** Runs `use` on a one-sequence, one-thread context of the model, with the compute buffer reports cleared before it is created. */
async function withContext(modelPath: string, options: LlamaContextOptions, use: (context: LlamaContext) => Promise<void>): Promise<void> {
    const model = await llama.loadModel({modelPath});
    try {
        computeLogs.length = 0;
        const context = await model.createContext({sequences: 1, threads: 1, ...options});
        try {
            await use(context);
        } finally {
            await context.dispose();
        }
    } finally {
        await model.dispose();
    }
}

describe.each<[FixtureName, string]>([
    ["tiny-qwen3", "GQA 4/2"],
    ["tiny-qwen3-mqa", "MQA 4/1"]
])("fit estimate, %s (%s)", (fixture) => {
    let inspection: ModelInspection;

    beforeAll(async () => {
        inspection = await inspectModel(await getFixtureModel(fixture));
    });

    it("reads the declared head size, not embedding / heads", () => {
        expect(inspection.embeddingLength! / inspection.headCount!).toBe(40);
        expect(inspection.keyLength).toBe(64);
        expect(inspection.valueLength).toBe(64);
    });

    // Keys and values each at its own type: LeanKV's K8V4 and its mirror K4V8 among them.
    const caches = [
        ["f16", "f16", false],
        ["f16", "f16", true],
        ["q8_0", "q8_0", true],
        ["q8_0", "q4_0", true],
        ["q4_0", "q8_0", true]
    ] as const;
    it.each(caches)(
        "matches llama.cpp's KV cache, weights and compute buffer: K %s, V %s, flash attention %s",
        async (kvType, kvTypeV, flashAttention) => {
            const cells = 4096;
            const compression = {...defaultCompressionSettings, kvType, kvTypeV, flashAttention, budget: {kind: "cells" as const, cells}};
            const estimate = estimateBudget(inspection, compression, 64 * 1024 * mib, {modelLoaded: false});
            const ggml = {f16: "F16", q8_0: "Q8_0", q4_0: "Q4_0"} as const;
            const options = {
                contextSize: cells,
                flashAttention,
                experimentalKvCacheKeyType: ggml[kvType],
                experimentalKvCacheValueType: ggml[kvTypeV]
            } as const;
            await withContext(inspection.path, options, async (context) => {
                const kv = new NativeKv(context);
                try {
                    const stats = await kv.stats();
                    // KV: exact, per cell and in all.
                    expect(estimate.bytesPerCell).toBe(stats.bytesPerCell);
                    expect(estimate.allocatedCells).toBe(stats.cellsAllocated);
                    expect(estimate.bytes).toBe(stats.bytesAllocated);
                    // Weights: what llama.cpp counts as the model's size, within 1%.
                    expect(Math.abs(estimate.weightsBytes! - context.model.size) / context.model.size).toBeLessThan(0.01);
                    const label = `${fixture} ${kvType}/${kvTypeV}${flashAttention ? " flash" : ""}`;
                    expect(relativeError(label, estimate.computeBytes!, await reportedComputeBytes())).toBeLessThan(0.01);
                } finally {
                    await kv.dispose();
                }
            });
        }
    );

    // llama.cpp runs a quantized V only with flash attention; a quantized K it runs without.
    it("q8_0 without flash attention: refused for V; a q8_0 K beside an f16 V within 1 percent", async () => {
        const refused = withContext(
            inspection.path,
            {
                contextSize: 4096,
                flashAttention: false,
                experimentalKvCacheKeyType: "Q8_0",
                experimentalKvCacheValueType: "Q8_0"
            },
            async () => {}
        );
        await expect(refused).rejects.toThrow();
        const estimate = computeBufferBytes(inspection, {cells: 4096, flashAttention: false, kvTypes: {k: "q8_0", v: "f16"}})!;
        const options: LlamaContextOptions = {
            contextSize: 4096,
            flashAttention: false,
            experimentalKvCacheKeyType: "Q8_0",
            experimentalKvCacheValueType: "F16"
        };
        await withContext(inspection.path, options, async () => {
            expect(relativeError(`${fixture} q8_0 K, f16 V`, estimate, await reportedComputeBytes())).toBeLessThan(0.01);
        });
    });
});

// Sizes whose buffers (2.6 MiB and up) keep the report's 0.01 MiB rounding under 0.2%.
const otherShapes: [FixtureName, number, number][] = [
    ["tiny-llama", 4096, 256],
    ["tiny-qwen2", 2048, 512]
];
describe.each(otherShapes)("compute buffer of %s at %i cells, %i-token ubatches", (fixture, cells, ubatch) => {
    it.each([{flashAttention: false}, {flashAttention: true}])(
        "flash attention $flashAttention: within 1 percent of llama.cpp's",
        async ({flashAttention}) => {
            const inspection = await inspectModel(await getFixtureModel(fixture));
            const estimate = computeBufferBytes(inspection, {cells, ubatch, flashAttention})!;
            await withContext(inspection.path, {contextSize: cells, batchSize: ubatch, flashAttention}, async () => {
                expect(relativeError(`${fixture}${flashAttention ? " flash" : ""}`, estimate, await reportedComputeBytes())).toBeLessThan(
                    0.01
                );
            });
        }
    );
});

describe("compute buffer of the 28-layer bench-1.5b-shape model at 4,096 cells", () => {
    it.each([{flashAttention: false}, {flashAttention: true}])(
        "flash attention $flashAttention: within 1 percent of llama.cpp's",
        async ({flashAttention}) => {
            const inspection = await inspectModel(await getFixtureModel("bench-1.5b-shape"));
            const compression = {...defaultCompressionSettings, flashAttention, budget: {kind: "cells" as const, cells: 4096}};
            const estimate = estimateBudget(inspection, compression, 64 * 1024 * mib, {modelLoaded: false});
            await withContext(inspection.path, {contextSize: 4096, flashAttention}, async () => {
                const label = `bench-1.5b-shape${flashAttention ? " flash" : ""}`;
                expect(relativeError(label, estimate.computeBytes!, await reportedComputeBytes())).toBeLessThan(0.01);
            });
        }
    );
});

describe("scoring policies on the bench-1.5b-shape model at 4,096 cells", () => {
    // Lethe scores every row of a ubatch (32 with flash attention), ReFreeKV the last one, LeanKV every row either way.
    it.each([
        {policy: "lethe" as const, flashAttention: false},
        {policy: "lethe" as const, flashAttention: true},
        {policy: "refreekv" as const, flashAttention: false},
        {policy: "refreekv" as const, flashAttention: true},
        {policy: "leankv" as const, flashAttention: true}
    ])(
        "$policy, flash attention $flashAttention: the scores and the scoring branch as llama.cpp allocates them",
        async ({policy, flashAttention}) => {
            const inspection = await inspectModel(await getFixtureModel("bench-1.5b-shape"));
            const compression = {...defaultCompressionSettings, policy, flashAttention, budget: {kind: "cells" as const, cells: 4096}};
            const estimate = estimateBudget(inspection, compression, 64 * 1024 * mib, {modelLoaded: false});
            await withContext(inspection.path, {contextSize: 4096, flashAttention}, async (context) => {
                const kv = new NativeKv(context);
                try {
                    // The context's own report first, so that the one read below is the scored graph's.
                    await reportedComputeBytes();
                    computeLogs.length = 0;
                    scoreLogs.length = 0;
                    // As KvController turns it on; the graph is reserved again at the next decode.
                    const {rows, gamma} = scoring(compression);
                    await kv.configureScoring({enabled: true, rows, gamma});
                    await context.getSequence().evaluateWithoutGeneratingNewTokens(context.model.tokenize("hello"));
                    const reported = await reportedComputeBytes();
                    expect(estimate.scoresBytes).toBe(scoreLogs.at(-1));
                    const label = `bench-1.5b-shape ${policy}${flashAttention ? " flash" : ""}`;
                    expect(relativeError(label, estimate.computeBytes!, reported)).toBeLessThan(0.01);
                } finally {
                    await kv.dispose();
                }
            });
        }
    );
});
