import {describe, expect, it} from "vitest";
import {cacheTypeProblem, kvBytesPerCell, rowBytes} from "../../../main/engine/kvMemory.js";

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
        expect(kvBytesPerCell({layers: 2, headCount: 4, headCountKv: 1, embeddingLength: 64, keyLength: 192, valueLength: 128}, {k: "q8_0", v: "f16"}))
            .toBe(2 * (6 * 34 + 128 * 2));
    });

    it("rounds partial blocks up and refuses incomplete metadata", () => {
        expect(rowBytes("q8_0", 33)).toBe(68);
        expect(kvBytesPerCell({layers: null, headCount: 2, headCountKv: 1, embeddingLength: 8})).toBeNull();
    });
});

describe("cache types llama.cpp cannot make", () => {
    const qwen3 = {layers: 28, headCount: 16, headCountKv: 8, embeddingLength: 1024, keyLength: 128, valueLength: 128};
    const narrow = {layers: 4, headCount: 4, headCountKv: 2, embeddingLength: 64};

    it("says why in words: a quantized cache needs flash attention and heads of whole 32-value blocks", () => {
        expect(cacheTypeProblem(qwen3, {kvType: "f16", flashAttention: false})).toBeNull();
        expect(cacheTypeProblem(narrow, {kvType: "f16", flashAttention: true})).toBeNull();
        expect(cacheTypeProblem(qwen3, {kvType: "q8_0", flashAttention: true})).toBeNull();
        expect(cacheTypeProblem(qwen3, {kvType: "q4_0", flashAttention: false})).toMatch(/needs flash attention/);
        expect(cacheTypeProblem(narrow, {kvType: "q8_0", flashAttention: true})).toBe("This model's attention heads are 16 values wide, and a q8_0 cache stores blocks of 32: choose F16.");
        // A declared value length counts on its own.
        expect(cacheTypeProblem({...qwen3, valueLength: 80}, {kvType: "q4_0", flashAttention: true})).toMatch(/80 values wide/);
    });
});
