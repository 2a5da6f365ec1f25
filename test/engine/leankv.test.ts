// Keys and values at their own precision, and LeanKV's pruning rule, through the engine on a generated model whose heads
// (64 values) are whole 32-value blocks: every policy composes with K8V4 and its mirror, the memory figures count keys and
// values each at its size, quantized keys run without flash attention (quantized values need it), and LeanKV prunes
// by its significance rule with no budget binding.
import {afterAll, beforeAll, describe, expect, it} from "vitest";
import type {CompressionSettings, KvCacheType, PolicyId} from "../../preload/contract.js";
import {Engine} from "../../main/engine/runtime/Engine.js";
import {kvBytesPerCell} from "../../main/kv/kvMemory.js";
import {loadRuntime} from "../../main/engine/runtime/loadRuntime.js";
import type {ModelInspection} from "../../main/engine/EngineApi.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {resolveCombine} from "../../main/engine/policies/decide.js";
import {getFixtureModel} from "../fixtures/gguf/fixtures.js";
import {generateRun} from "./generateRun.js";

const modelInfo = (p: string) => ({
    id: "m",
    path: p,
    name: "fixture",
    sizeBytes: 0,
    architecture: null,
    contextLength: null,
    addedAt: 0,
    lastUsedAt: null,
    crashedAt: null
});

describe("K and V cache types and LeanKV on a generated model", () => {
    const engine = new Engine({loadLlama: loadRuntime, threads: 1});
    let inspection: ModelInspection;
    afterAll(() => engine.dispose());

    beforeAll(async () => {
        const model = await getFixtureModel("tiny-qwen3");
        inspection = await engine.loadModel(model, modelInfo(model));
        expect(inspection.keyLength).toBe(64);
    });

    const run = (compression: Partial<CompressionSettings>, cells: number, maxTokens: number) =>
        generateRun(engine, compression, cells, maxTokens);

    const pairs: [KvCacheType, KvCacheType][] = [
        ["q8_0", "q4_0"],
        ["q4_0", "q8_0"]
    ];
    const policies: PolicyId[] = ["full", "streamingllm", "h2o", "lethe", "refreekv", "leankv"];
    for (const [kvType, kvTypeV] of pairs) {
        for (const policy of policies) {
            it(`${policy} with ${kvType} keys and ${kvTypeV} values: generates within the budget, each cache counted at its size`, async () => {
                // A context of its own per case (cells differ), so counters start at zero.
                const cells = 160 + policies.indexOf(policy) + 8 * pairs.findIndex((pair) => pair[0] === kvType);
                const {result, samples, tokens, last} = await run({policy, kvType, kvTypeV, flashAttention: true}, cells, 3 * cells);
                const bytesPerCell = kvBytesPerCell(inspection, {k: kvType, v: kvTypeV})!;
                // Per layer a 2-head x 64 K row and V row: 4 blocks of q8_0 (34 bytes) and 4 of q4_0 (18 bytes).
                expect(bytesPerCell).toBe(inspection.layers! * 4 * (34 + 18));
                expect(last.bytesPerCell).toBe(bytesPerCell);
                expect(last.allocatedBytes).toBe(last.cellsAllocated * bytesPerCell);
                expect(last.liveBytes).toBe(last.cellsLive * bytesPerCell);
                for (const sample of samples) expect(sample.cellsLive).toBeLessThanOrEqual(cells);
                if (policy === "full") {
                    expect(result.stopReason).toBe("budget");
                    return;
                }
                expect(result.stopReason).toBe("maxTokens");
                expect(tokens).toBeGreaterThan(3 * cells - 8);
                // on per-head cells (H2O's own mode) a cell's heads hold different tokens: one is evicted once no head holds it
                if (resolveCombine("auto", policy) === "heads")
                    expect(last.cellsLive + last.tokensEvicted).toBeLessThanOrEqual(last.tokensSeen);
                else expect(last.cellsLive + last.tokensEvicted).toBe(last.tokensSeen);
                expect(last.pruneRounds).toBeGreaterThan(0);
            });
        }
    }

    it("runs quantized keys beside F16 values without flash attention, with LeanKV's scores", async () => {
        const {result, last, tokens} = await run({policy: "leankv", kvType: "q4_0", kvTypeV: "f16", flashAttention: false}, 200, 400);
        expect(result.stopReason).toBe("maxTokens");
        expect(tokens).toBeGreaterThan(390);
        expect(last.bytesPerCell).toBe(inspection.layers! * (4 * 18 + 128 * 2));
        expect(last.pruneRounds).toBeGreaterThan(0);
        expect(last.cellsLive).toBeLessThanOrEqual(200);
    });

    it("refuses quantized values without flash attention in words, before llama.cpp is asked", async () => {
        await expect(run({policy: "leankv", kvType: "q8_0", kvTypeV: "q4_0", flashAttention: false}, 256, 8)).rejects.toMatchObject({
            code: "BAD_REQUEST",
            message: "A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn flash attention on, or store the values as F16."
        });
    });

    it("LeanKV with a budget that never binds prunes by its rule alone, and alpha = 0 prunes nothing", async () => {
        // A high alpha on random weights: the rule frees cells long before 4,096 cells would.
        const pruned = await run(
            {
                policy: "leankv",
                kvType: "q8_0",
                kvTypeV: "q4_0",
                flashAttention: true,
                params: {
                    ...defaultCompressionSettings.params,
                    leankv: {alpha: 2, window: 64}
                }
            },
            4096,
            400
        );
        expect(pruned.tokens).toBeGreaterThan(390);
        expect(pruned.last.tokensEvicted).toBeGreaterThan(0);
        expect(pruned.last.forcedDrops).toBe(0);
        expect(pruned.last.cellsLive).toBeLessThan(pruned.last.tokensSeen);
        const kept = await run(
            {
                policy: "leankv",
                kvType: "q8_0",
                kvTypeV: "q4_0",
                flashAttention: true,
                params: {
                    ...defaultCompressionSettings.params,
                    leankv: {alpha: 0, window: 64}
                }
            },
            4000,
            200
        );
        expect(kept.last.pruneRounds).toBeGreaterThan(0);
        expect(kept.last.tokensEvicted).toBe(0);
    });
});
