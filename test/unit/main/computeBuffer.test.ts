// The compute-buffer estimate: ggml's allocator replayed by hand-checked steps, and the graph's terms in the estimate.
import {describe, expect, it} from "vitest";
import {computeBufferBytes} from "../../../main/kv/computeBufferBytes.js";
import {GraphAllocator} from "../../../main/kv/GraphAllocator.js";

const mib = 1024 * 1024;

describe("GraphAllocator (ggml-alloc.c replayed)", () => {
    it("aligns to 32 bytes, frees a tensor after its last consumer and puts the next one in the best fitting hole", () => {
        const graph = new GraphAllocator();
        const a = graph.input(100, 1); // [0, 128)
        const b = graph.run([a], {size: 64, uses: 1})!; // [128, 192); a freed: hole [0, 128)
        expect(graph.peak).toBe(192);
        graph.run([b], {size: 96, uses: 1}); // fits the hole: [0, 96); b freed, merged with the tail
        expect(graph.peak).toBe(192);
    });

    it("grows the buffer when no hole fits, and merges neighbouring holes", () => {
        const graph = new GraphAllocator();
        const a = graph.input(64, 1); // [0, 64)
        const b = graph.input(64, 1); // [64, 128)
        const keep = graph.input(64, 2); // [128, 192)
        graph.run([a, keep], {size: 128, uses: Infinity}); // no hole yet: [192, 320); a freed: hole [0, 64)
        expect(graph.peak).toBe(320);
        graph.run([b, keep], {size: 128, uses: Infinity}); // hole [0, 64) too small: [320, 448); b and keep freed, [0, 192) merged
        expect(graph.peak).toBe(448);
        graph.run([], {size: 192, uses: 1}); // the merged hole: no growth
        expect(graph.peak).toBe(448);
    });

    it("runs an in-place node in its source's memory only when it is the source's last consumer", () => {
        const graph = new GraphAllocator();
        const shared = graph.input(64, 2);
        const copy = graph.run([shared], {size: 64, uses: 1, inPlace: true})!; // shared is read again later: new memory
        expect(graph.peak).toBe(128);
        graph.run([copy], {size: 64, uses: 1, inPlace: true}); // copy's last consumer: same memory
        graph.run([shared], {size: 64, uses: 1, inPlace: true});
        expect(graph.peak).toBe(128);
    });

    it("runs an in-place node in a later source's memory when the first is still read, and compares aligned sizes", () => {
        const graph = new GraphAllocator();
        const kept = graph.input(100, 2); // [0, 128): read again later
        const last = graph.input(100, 1); // [128, 256)
        const sum = graph.run([kept, last], {size: 100, uses: 1, inPlace: true})!; // in last's memory
        expect(graph.peak).toBe(256);
        graph.run([kept, sum], {size: 100, uses: 1, inPlace: true}); // kept's last read: its memory
        expect(graph.peak).toBe(256);
    });
});

describe("computeBufferBytes", () => {
    // DeepSeek-R1-Distill-Qwen-1.5B's layers and heads at the bench model's width (test/fixtures: bench-1.5b-shape).
    const bench = {
        layers: 28,
        headCount: 12,
        headCountKv: 2,
        embeddingLength: 384,
        keyLength: 32,
        valueLength: 32,
        feedForwardLength: 1024,
        vocabularySize: 581
    };

    it("with flash attention, grows by the f16 mask only: 2 bytes per cell and ubatch token", () => {
        const at4k = computeBufferBytes(bench, {cells: 4096, flashAttention: true})!;
        const at8k = computeBufferBytes(bench, {cells: 8192, flashAttention: true})!;
        expect(at8k - at4k).toBe(4096 * 512 * 2);
    });

    it("without flash attention, grows by the scores of every query head and the f32 mask", () => {
        const at4k = computeBufferBytes(bench, {cells: 4096, flashAttention: false})!;
        const at8k = computeBufferBytes(bench, {cells: 8192, flashAttention: false})!;
        expect(at8k - at4k).toBe(4096 * 512 * (12 + 1) * 4);
    });

    it("with flash attention, holds the feed-forward's gate, up and SwiGLU beside the residual, not one layer's activations", () => {
        // At the SwiGLU: the inputs (tokens, vector input, positions, mask, indices, output ids), the residual, and the
        // gate, up and SwiGLU (1,024 wide) above two residual-sized holes too small for them.
        const estimate = computeBufferBytes(bench, {cells: 4096, flashAttention: true})!;
        const row = (width: number) => width * 512 * 4;
        const inputs = 2048 + row(384) + 2048 + 4096 * 512 * 2 + 4096 + 4096 + 2048;
        expect(estimate).toBe(inputs + row(384) + 2 * row(384) + 3 * row(1024));
        expect(estimate / mib).toBeCloseTo(13.01, 2); // llama.cpp: "CPU compute buffer size = 13.01 MiB"
    });

    it("counts the logits: f32 per vocabulary entry and output token, which a real vocabulary makes the largest part", () => {
        // Qwen3-0.6B's shape: 151,936 tokens.
        const qwen3 = {
            layers: 28,
            headCount: 16,
            headCountKv: 8,
            embeddingLength: 1024,
            keyLength: 128,
            valueLength: 128,
            feedForwardLength: 3072
        };
        const withoutVocabulary = computeBufferBytes({...qwen3, vocabularySize: 0}, {cells: 4096, flashAttention: true})!;
        const estimate = computeBufferBytes({...qwen3, vocabularySize: 151_936}, {cells: 4096, flashAttention: true})!;
        expect(estimate).toBeGreaterThanOrEqual(151_936 * 512 * 4);
        expect(estimate - withoutVocabulary).toBeGreaterThan(0.9 * 151_936 * 512 * 4);
    });

    it("with scoring of every ubatch row and no flash attention, holds the scored rows transposed beside the softmax", () => {
        const plain = computeBufferBytes(bench, {cells: 4096, flashAttention: false})!;
        const scored = computeBufferBytes(bench, {cells: 4096, flashAttention: false, scoreRows: 512})!;
        // [512 rows, 4,096 cells, 12 heads] f32 (llama.cpp: 204.03 MiB against 108.01).
        expect(scored - plain).toBeGreaterThanOrEqual(512 * 4096 * 12 * 4);
        expect(scored - plain).toBeLessThan(512 * 4096 * 12 * 4 + mib);
        // The last row alone is read in place: only the decay input is added.
        expect(computeBufferBytes(bench, {cells: 4096, flashAttention: false, scoreRows: 1})! - plain).toBeLessThan(mib / 8);
    });

    // tiny-qwen3 (test/fixtures): 64-wide heads over a 160-wide embedding, GQA 4/2.
    const tinyQwen3 = {
        layers: 4,
        headCount: 4,
        headCountKv: 2,
        embeddingLength: 160,
        keyLength: 64,
        valueLength: 64,
        feedForwardLength: 128,
        vocabularySize: 581
    };

    it("copies Q and K once out of their projections: RoPE or a q/k norm reads them reshaped, and no op runs in place on a view", () => {
        // Without flash attention the peak is at a layer's scores, above the inputs, the residual and that copy of Q.
        const estimate = computeBufferBytes(tinyQwen3, {cells: 4096, flashAttention: false})!;
        expect(estimate / mib).toBeCloseTo(42.76, 2); // llama.cpp: "CPU compute buffer size = 42.76 MiB" (42.26 without the copies)
    });

    it("with a quantized cache, adds llama.cpp's Hadamard rotations of Q, K, V and the attention output where 64 divides the head", () => {
        const rotated = (length: number) => {
            const shape = {...tinyQwen3, keyLength: length, valueLength: length};
            const quantized = computeBufferBytes(shape, {cells: 4096, flashAttention: true, kvTypes: {k: "q8_0", v: "q8_0"}})!;
            return quantized - computeBufferBytes(shape, {cells: 4096, flashAttention: true})!;
        };
        // The rotation matrices (f32): K's side the largest power of two from 64 that divides the head, V's 64; the
        // rotated copies fit in holes at these sizes.
        expect(rotated(64)).toBe(2 * 64 * 64 * 4); // llama.cpp: 6.23 MiB against 6.20
        expect(rotated(128)).toBe((128 * 128 + 64 * 64) * 4);
        expect(rotated(192)).toBe(2 * 64 * 64 * 4);
        expect(rotated(96)).toBe(0);
    });

    it("with flash attention, puts a scored row's weights after the attention in a whole output-sized slab", () => {
        const plain = computeBufferBytes(tinyQwen3, {cells: 4096, flashAttention: true})!;
        const scored = computeBufferBytes(tinyQwen3, {cells: 4096, flashAttention: true, scoreRows: 1})!;
        // One row of 4,096 cells x 4 heads (64 KiB) takes a [64, 4 heads, 512 tokens] f32 slab (512 KiB).
        expect(scored - plain).toBeGreaterThanOrEqual(64 * 4 * 512 * 4);
        expect(scored / mib).toBeCloseTo(7.28, 2); // llama.cpp: 7.28 MiB
    });

    it("is null without the head counts", () => {
        expect(computeBufferBytes({...bench, headCount: null}, {cells: 4096, flashAttention: true})).toBeNull();
    });
});
