import {describe, expect, it} from "vitest";
import type {KvCacheType} from "../../../preload/contract.js";
import {cacheTypeProblem, kvBytesPerCell, kvTypesOf, rowBytes} from "../../../main/kv/kvMemory.js";

describe("KV bytes per cell", () => {
    it("matches a hand count for DeepSeek-R1-Distill-Qwen-1.5B's shape", () => {
        // 28 layers, 12 query heads, 2 KV heads, width 1536 -> head_dim 128; f16 K and V: 28 * 2 * (2 * 128 * 2) = 28 672 bytes.
        const shape = {layers: 28, headCount: 12, headCountKv: 2, embeddingLength: 1536};
        expect(kvBytesPerCell(shape)).toBe(28 * 2 * 2 * 128 * 2);
        // q8_0: 256 elements = 8 blocks of 34 bytes per row.
        expect(kvBytesPerCell(shape, {k: "q8_0", v: "q8_0"})).toBe(28 * 2 * 8 * 34);
        expect(kvBytesPerCell(shape, {k: "q4_0", v: "q4_0"})).toBe(28 * 2 * 8 * 18);
    });

    it("sizes heads by attention.key_length / value_length when the GGUF declares them (Qwen3)", () => {
        // Qwen3-0.6B: 28 layers, 16 query heads, 8 KV heads, width 1024, heads of 128 (1024 / 16 would say 64).
        const qwen3small = {layers: 28, headCount: 16, headCountKv: 8, embeddingLength: 1024, keyLength: 128, valueLength: 128};
        expect(kvBytesPerCell(qwen3small)).toBe(28 * 2 * 8 * 128 * 2);
        // Qwen3-4B: 36 layers, 32 / 8 heads, width 2560 (80 per head by division), heads of 128: 1.6x the division.
        const qwen3medium = {layers: 36, headCount: 32, headCountKv: 8, embeddingLength: 2560, keyLength: 128, valueLength: 128};
        expect(kvBytesPerCell(qwen3medium)! / kvBytesPerCell({...qwen3medium, keyLength: null, valueLength: null})!).toBeCloseTo(1.6, 10);
        // Different K and V sizes, and q8_0 on each.
        expect(
            kvBytesPerCell(
                {layers: 2, headCount: 4, headCountKv: 1, embeddingLength: 64, keyLength: 192, valueLength: 128},
                {k: "q8_0", v: "f16"}
            )
        ).toBe(2 * (6 * 34 + 128 * 2));
    });

    it("counts keys and values each at its own type: K8V4 and its mirror K4V8 cost the same, 3/8 of F16 on R1-1.5B's shape", () => {
        // 28 layers, 2 KV heads of 128: a K or V row is 256 values, 8 blocks; q8_0 34 bytes a block, q4_0 18, f16 512 bytes a row.
        const shape = {layers: 28, headCount: 12, headCountKv: 2, embeddingLength: 1536};
        expect(kvBytesPerCell(shape, {k: "q8_0", v: "q4_0"})).toBe(28 * (8 * 34 + 8 * 18));
        expect(kvBytesPerCell(shape, {k: "q4_0", v: "q8_0"})).toBe(28 * (8 * 18 + 8 * 34));
        expect(kvBytesPerCell(shape, {k: "q8_0", v: "q4_0"})! / kvBytesPerCell(shape)!).toBeCloseTo((34 + 18) / (2 * 64), 10);
        expect(kvBytesPerCell(shape, {k: "q4_0", v: "f16"})).toBe(28 * (8 * 18 + 512));
        expect(kvTypesOf({kvType: "q8_0", kvTypeV: "q4_0"})).toEqual({k: "q8_0", v: "q4_0"});
    });

    it("rounds partial blocks up and refuses incomplete metadata", () => {
        expect(rowBytes("q8_0", 33)).toBe(68);
        expect(kvBytesPerCell({layers: null, headCount: 2, headCountKv: 1, embeddingLength: 8})).toBeNull();
    });
});

describe("cache types llama.cpp cannot make", () => {
    const qwen3 = {layers: 28, headCount: 16, headCountKv: 8, embeddingLength: 1024, keyLength: 128, valueLength: 128};
    const narrow = {layers: 4, headCount: 4, headCountKv: 2, embeddingLength: 64};

    const types = (kvType: KvCacheType, kvTypeV: KvCacheType, flashAttention: boolean) => ({kvType, kvTypeV, flashAttention});

    it("says why in words: a quantized V cache needs flash attention, and a quantized K or V heads of whole 32-value blocks", () => {
        expect(cacheTypeProblem(qwen3, types("f16", "f16", false))).toBeNull();
        expect(cacheTypeProblem(narrow, types("f16", "f16", true))).toBeNull();
        expect(cacheTypeProblem(qwen3, types("q8_0", "q8_0", true))).toBeNull();
        expect(cacheTypeProblem(qwen3, types("q4_0", "q4_0", false))).toBe(
            "A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn flash attention on, or store the values as F16."
        );
        expect(cacheTypeProblem(narrow, types("q8_0", "q8_0", true))).toBe(
            "This model's attention heads are 16 values wide, and a q8_0 K cache stores blocks of 32: choose F16 for K."
        );
        // A declared value length counts on its own.
        expect(cacheTypeProblem({...qwen3, valueLength: 80}, types("q4_0", "q4_0", true))).toMatch(/80 values wide, and a q4_0 V cache/);
        expect(cacheTypeProblem({...qwen3, valueLength: 80}, types("q4_0", "f16", true))).toBeNull();
    });

    it("takes K and V apart: llama.cpp makes quantized keys without flash attention, not quantized values", () => {
        // llama_init_from_model refuses only a quantized V without flash attention (measured in test/engine/leankv.test.ts).
        expect(cacheTypeProblem(qwen3, types("q4_0", "f16", false))).toBeNull();
        expect(cacheTypeProblem(qwen3, types("q8_0", "f16", false))).toBeNull();
        for (const [k, v] of [
            ["f16", "q4_0"],
            ["q8_0", "q4_0"],
            ["q4_0", "q8_0"]
        ] as const)
            expect(cacheTypeProblem(qwen3, types(k, v, false))).toMatch(/quantized V cache .* needs flash attention/);
        expect(cacheTypeProblem(qwen3, types("q8_0", "q4_0", true))).toBeNull();
        expect(cacheTypeProblem(narrow, types("f16", "q4_0", true))).toBe(
            "This model's attention heads are 16 values wide, and a q4_0 V cache stores blocks of 32: choose F16 for V."
        );
    });
});
