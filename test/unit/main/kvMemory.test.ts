import {describe, expect, it} from "vitest";
import {kvBytesPerCell, rowBytes} from "../../../main/engine/kvMemory.js";

describe("KV bytes per cell", () => {
    it("matches a hand count for DeepSeek-R1-Distill-Qwen-1.5B's shape", () => {
        // 28 layers, 12 query heads, 2 KV heads, width 1536 -> head_dim 128; f16 K and V: 28 * 2 * (2 * 128 * 2) = 28 672 bytes.
        const shape = {layers: 28, headCount: 12, headCountKv: 2, embeddingLength: 1536};
        expect(kvBytesPerCell(shape)).toBe(28 * 2 * 2 * 128 * 2);
        // q8_0: 256 elements = 8 blocks of 34 bytes per row.
        expect(kvBytesPerCell(shape, {k: "q8_0", v: "q8_0"})).toBe(28 * 2 * 8 * 34);
        expect(kvBytesPerCell(shape, {k: "q4_0", v: "q4_0"})).toBe(28 * 2 * 8 * 18);
    });

    it("rounds partial blocks up and refuses incomplete metadata", () => {
        expect(rowBytes("q8_0", 33)).toBe(68);
        expect(kvBytesPerCell({layers: null, headCount: 2, headCountKv: 1, embeddingLength: 8})).toBeNull();
    });
});
