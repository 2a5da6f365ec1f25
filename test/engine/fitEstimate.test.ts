// The fit estimate against what llama.cpp itself allocates, on generated qwen3-shaped models whose heads (64) are wider
// than embedding / heads (160 / 4 = 40): KV bytes per cell and in all, weights, and the compute buffer; and the compute
// buffer of the 28-layer bench model, with and without flash attention.
import {setTimeout as delay} from "node:timers/promises";
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {Llama} from "node-llama-cpp";
import {inspectModel} from "../../main/engine/inspectModel.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import type {ModelInspection} from "../../main/engine/types.js";
import {estimateBudget} from "../../main/services/CompressionService.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {getFixtureModel, type FixtureName} from "../fixtures/gguf/fixtures.js";

const mib = 1024 * 1024;
let llama: Llama;
/** llama.cpp's own report of the compute buffer it reserved for the last context, in bytes. */
const computeLogs: number[] = [];
/** Its report of the score buffers a scoring policy turns on. */
const scoreLogs: number[] = [];

beforeAll(async () => {
    llama = await loadPatchedLlama({
        gpu: false, logLevel: "info",
        llamaOptions: {
            logger(_level, message) {
                const match = /CPU compute buffer size = +([\d.]+) MiB/.exec(message);
                if (match != null)
                    computeLogs.push(Number(match[1]) * mib);
                const scores = /attention score buffer size = +([\d.]+) MiB/.exec(message);
                if (scores != null)
                    scoreLogs.push(Number(scores[1]) * mib);
            }
        }
    });
});

afterAll(async () => {
    await llama?.dispose();
});

describe.each<[FixtureName, string]>([["tiny-qwen3", "GQA 4/2"], ["tiny-qwen3-mqa", "MQA 4/1"]])("fit estimate, %s (%s)", (fixture) => {
    let inspection: ModelInspection;

    beforeAll(async () => {
        inspection = await inspectModel(await getFixtureModel(fixture));
    });

    it("reads the declared head size, not embedding / heads", () => {
        expect(inspection.embeddingLength! / inspection.headCount!).toBe(40);
        expect(inspection.keyLength).toBe(64);
        expect(inspection.valueLength).toBe(64);
    });

    it.each([["f16", false], ["q8_0", true]] as const)("matches llama.cpp's KV cache, weights and compute buffer with a %s cache", async (kvType, flashAttention) => {
        const cells = 4096;
        const compression = {...defaultCompressionSettings, kvType, flashAttention, budget: {kind: "cells" as const, cells}};
        const estimate = estimateBudget(inspection, compression, 64 * 1024 * mib, {modelLoaded: false});
        const model = await llama.loadModel({modelPath: inspection.path});
        try {
            computeLogs.length = 0;
            const type = kvType === "f16" ? "F16" : "Q8_0";
            const context = await model.createContext({
                contextSize: cells, sequences: 1, flashAttention, threads: 1, experimentalKvCacheKeyType: type, experimentalKvCacheValueType: type
            });
            const kv = new NativeKv(context);
            try {
                const stats = await kv.stats();
                // KV: exact, per cell and in all.
                expect(estimate.bytesPerCell).toBe(stats.bytesPerCell);
                expect(estimate.allocatedCells).toBe(stats.cellsAllocated);
                expect(estimate.bytes).toBe(stats.bytesAllocated);
                // Weights: what llama.cpp counts as the model's size, within 1%.
                expect(Math.abs(estimate.weightsBytes! - model.size) / model.size).toBeLessThan(0.01);
                // Compute buffer: the log line arrives through the logger's queue.
                for (let i = 0; i < 50 && computeLogs.length === 0; i++)
                    await delay(20);
                const reported = computeLogs.at(-1)!;
                expect(reported).toBeGreaterThan(0);
                const error = Math.abs(estimate.computeBytes! - reported) / reported;
                expect(error).toBeLessThan(0.03);
                console.log(`${fixture} ${kvType}${flashAttention ? " flash" : ""}: KV ${stats.bytesAllocated} B, weights ${estimate.weightsBytes} vs ${model.size}, ` +
                    `compute ${estimate.computeBytes} vs ${reported} (${(error * 100).toFixed(1)}%)`);
            } finally {
                await kv.dispose();
                await context.dispose();
            }
        } finally {
            await model.dispose();
        }
    });
});

describe("compute buffer of the 28-layer bench-1.5b-shape model at 4,096 cells", () => {
    it.each([{flashAttention: false}, {flashAttention: true}])("flash attention $flashAttention: within 3 percent of llama.cpp's", async ({flashAttention}) => {
        const inspection = await inspectModel(await getFixtureModel("bench-1.5b-shape"));
        const compression = {...defaultCompressionSettings, flashAttention, budget: {kind: "cells" as const, cells: 4096}};
        const estimate = estimateBudget(inspection, compression, 64 * 1024 * mib, {modelLoaded: false});
        const model = await llama.loadModel({modelPath: inspection.path});
        try {
            computeLogs.length = 0;
            const context = await model.createContext({contextSize: 4096, sequences: 1, flashAttention, threads: 1});
            try {
                for (let i = 0; i < 50 && computeLogs.length === 0; i++)
                    await delay(20);
                const reported = computeLogs.at(-1)!;
                const error = Math.abs(estimate.computeBytes! - reported) / reported;
                console.log(`bench-1.5b-shape${flashAttention ? " flash" : ""}: compute ${estimate.computeBytes} vs ${reported} (${(error * 100).toFixed(1)}%)`);
                expect(error).toBeLessThan(0.03);
            } finally {
                await context.dispose();
            }
        } finally {
            await model.dispose();
        }
    });
});

describe("scoring policies on the bench-1.5b-shape model at 4,096 cells", () => {
    it.each([{flashAttention: false}, {flashAttention: true}])("flash attention $flashAttention: Lethe's scores and scoring branch as llama.cpp allocates them", async ({flashAttention}) => {
        const inspection = await inspectModel(await getFixtureModel("bench-1.5b-shape"));
        const compression = {...defaultCompressionSettings, policy: "lethe" as const, flashAttention, budget: {kind: "cells" as const, cells: 4096}};
        const estimate = estimateBudget(inspection, compression, 64 * 1024 * mib, {modelLoaded: false});
        const model = await llama.loadModel({modelPath: inspection.path});
        try {
            const context = await model.createContext({contextSize: 4096, sequences: 1, flashAttention, threads: 1});
            const kv = new NativeKv(context);
            try {
                computeLogs.length = 0;
                scoreLogs.length = 0;
                // As KvController turns it on for Lethe; the graph is reserved again at the next decode.
                await kv.configureScoring({enabled: true, rows: flashAttention ? 32 : 512, gamma: compression.params.lethe.gamma});
                await context.getSequence().evaluateWithoutGeneratingNewTokens(model.tokenize("hello"));
                for (let i = 0; i < 50 && computeLogs.length === 0; i++)
                    await delay(20);
                expect(estimate.scoresBytes).toBe(scoreLogs.at(-1));
                const reported = computeLogs.at(-1)!;
                const error = Math.abs(estimate.computeBytes! - reported) / reported;
                console.log(`bench-1.5b-shape lethe${flashAttention ? " flash" : ""}: compute ${estimate.computeBytes} vs ${reported} (${(error * 100).toFixed(1)}%)`);
                expect(error).toBeLessThan(0.05);
            } finally {
                await kv.dispose();
                await context.dispose();
            }
        } finally {
            await model.dispose();
        }
    });
});
