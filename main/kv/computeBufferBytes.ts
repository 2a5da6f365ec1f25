import type {ModelInspection} from "../engine/EngineApi.js";
import {GraphAllocator} from "./GraphAllocator.js";
import {headLength, type KvCacheType} from "./kvMemory.js";

/** The most tokens llama.cpp evaluates in one ubatch (node-llama-cpp's default batch size). */
const defaultUbatch = 512;

export type ComputeBufferOptions = {
    /** Cells the context allocates (its KV span). */
    cells: number;
    flashAttention: boolean;
    /** Tokens per ubatch. Defaults to `min(cells, 512)`. */
    ubatch?: number;
    /** Query rows whose attention the patched graph scores per ubatch (`scoring()`); 0 when scoring is off. Defaults to `0`. */
    scoreRows?: number;
    /**
     * Types of the cached K and V: a quantized one adds llama.cpp's Hadamard rotation of its heads to the graph.
     * Defaults to `{k: "f16", v: "f16"}`.
     */
    kvTypes?: {k: KvCacheType; v: KvCacheType};
};

const f32 = 4;

/**
 * The side of the Hadamard rotation llama.cpp applies to heads stored quantized (llama-kv-cache.cpp `attn_rot_k`,
 * `attn_rot_v`: a quantized type and a head length that 64 divides), or 0 for none: for K the largest power of two
 * from 64 up that divides the head length, for V always 64.
 */
function rotation(type: KvCacheType, length: number, keys: boolean): number {
    if (type === "f16" || length % 64 !== 0) return 0;
    let side = 64;
    while (keys && length % (2 * side) === 0) side *= 2;
    return side;
}

/**
 * Bytes of llama.cpp's compute buffer for a context, on the device that holds the KV cache: the graph llama.cpp
 * reserves (a full ubatch attending to every cell, every token an output) replayed through ggml's allocator
 * (`GraphAllocator`). The graph is the standard decoder layer of llama, qwen2, qwen3 and mistral
 * (llama-graph.cpp `build_attn`, `build_attn_mha`, models/qwen2.cpp): inputs (tokens, an unused input for embedding
 * vectors, positions, the KV write indices, the KQ mask, f16 with flash attention and f32 without, the output ids),
 * then per layer the norm, Q, V and K, attention, the output projection, the residual, the feed-forward's gate, up,
 * SwiGLU and down, and at the end the logits, f32 per vocabulary entry and output token. Without flash attention the
 * attention scores (f32 per query head, cell and token) dominate it; with flash attention the feed-forward and the
 * logits do. Other architectures are approximated by this graph. Returns `null` when the metadata is incomplete.
 */
export function computeBufferBytes(
    model: Pick<
        ModelInspection,
        "layers" | "headCount" | "headCountKv" | "embeddingLength" | "keyLength" | "valueLength" | "feedForwardLength" | "vocabularySize"
    >,
    options: ComputeBufferOptions
): number | null {
    const {headCount, headCountKv, embeddingLength} = model;
    const keyLength = headLength(model, model.keyLength);
    const valueLength = headLength(model, model.valueLength);
    if (headCount == null || headCountKv == null || embeddingLength == null || keyLength == null || valueLength == null) return null;
    const layers = Math.max(1, model.layers ?? 1);
    const cells = options.cells;
    const tokens = options.ubatch ?? Math.min(cells, defaultUbatch);
    const feedForward = model.feedForwardLength ?? 4 * embeddingLength;
    const kvTypes = options.kvTypes ?? {k: "f16", v: "f16"};
    const keyRotation = rotation(kvTypes.k, keyLength, true);
    const valueRotation = rotation(kvTypes.v, valueLength, false);
    const row = (width: number) => width * tokens * f32;
    const graph = new GraphAllocator();

    // Inputs, in the order the graph first reads them (llama-graph.cpp build_inp_embd, build_inp_pos,
    // build_attn_inp_kv_impl, build_inp_out_ids); without flash attention V is stored transposed and written element
    // by element. The rotations (square f32 matrices) are read by Q, K and V before they are cached, and by the
    // attention's output.
    const inputTokens = graph.input(tokens * 4, 1);
    // The input for embeddings given as vectors: allocated with the others, though a token batch does not read it.
    graph.input(row(embeddingLength), Infinity);
    const keyRotationInput = keyRotation > 0 ? graph.input(keyRotation * keyRotation * f32, 2 * layers) : -1;
    const positions = graph.input(tokens * 4, 2 * layers);
    const valueRotationInput = valueRotation > 0 ? graph.input(valueRotation * valueRotation * f32, 2 * layers) : -1;
    const keyIndices = graph.input(tokens * 8, layers);
    const valueIndices = graph.input(tokens * 8 * (options.flashAttention ? 1 : headCountKv * valueLength), layers);
    const mask = graph.input(cells * tokens * (options.flashAttention ? 2 : f32), layers);
    // Attention scoring (native/patches/0002): the decay input, and per layer a branch that reduces the scored rows'
    // attention weights (the softmax, or without flash attention a recomputed side product) to one f32 per head and
    // cell, written into the score buffers beside K and V (`last = a; acc = w * acc + a`).
    const scoreRows = Math.min(options.scoreRows ?? 0, tokens);
    const scoreDecay = scoreRows > 0 ? graph.input(cells * f32, layers) : -1;
    const outputIds = graph.input(tokens * 4, 2);
    const perHeadCell = cells * headCount * f32;
    const reduceScores = (weights: number) => {
        let score = weights;
        if (scoreRows > 1) {
            // The scored rows transposed (permute + cont), then summed per head and cell.
            const transposed = graph.run([weights], {size: scoreRows * perHeadCell, uses: 1})!;
            score = graph.run([transposed], {size: perHeadCell, uses: 2})!;
        }
        graph.run([score], null); // last = a
        graph.run([scoreDecay], null); // acc *= w
        graph.run([score], null); // acc += a
    };
    // Q, V or K: the projection (its bias added in place); for Q and K the first op that reads it reshaped into heads
    // (RoPE, or qwen3's q/k norm) writes a new tensor, since ggml's allocator never runs an op in place on a view
    // (ggml-alloc.c: a view is not the allocator's own), and the projection is freed after it. A rotation is a product
    // with the reshaped heads: one more new tensor.
    const project = (source: number, width: number, rotationInput: number, rope: boolean) => {
        let projected = graph.run([source], {size: row(width), uses: 1})!;
        if (rope) projected = graph.run([projected, positions], {size: row(width), uses: 1})!;
        if (rotationInput !== -1) projected = graph.run([projected, rotationInput], {size: row(width), uses: 1})!;
        return projected;
    };

    const embedding = row(embeddingLength);
    let residual = graph.run([inputTokens], {size: embedding, uses: 2})!;
    for (let layer = 0; layer < layers; layer++) {
        const last = layer === layers - 1;
        const norm = graph.run([residual], {size: embedding, uses: 1, inPlace: true})!;
        const attentionNorm = graph.run([norm], {size: embedding, uses: 3, inPlace: true})!;
        const query = project(attentionNorm, headCount * keyLength, keyRotationInput, true);
        const value = project(attentionNorm, headCountKv * valueLength, valueRotationInput, false);
        const key = project(attentionNorm, headCountKv * keyLength, keyRotationInput, true);
        graph.run([key, keyIndices], null);
        graph.run([value, valueIndices], null);
        // Readers of the scored weights after the attention: one row is read in place (twice), several are transposed.
        const scoreReaders = scoreRows === 0 ? 0 : scoreRows === 1 ? 2 : 1;
        let attention: number;
        if (options.flashAttention) {
            // Scored, the flash-attention op also outputs the scored rows' weights after the attention (native patch 0006,
            // ggml_flash_attn_ext_kq, on the CPU), rounded up to whole output-sized slabs ([value length, heads, tokens]
            // against [cells, rows, heads]); the score branch and the projection read views of it.
            const slab = row(headCount * valueLength);
            const slabs = 1 + Math.ceil((scoreRows * cells) / (valueLength * tokens));
            attention = graph.run([query, mask], {size: scoreRows > 0 ? slabs * slab : slab, uses: 1 + scoreReaders})!;
            if (scoreRows > 0) reduceScores(attention);
        } else {
            const scores = graph.run([query], {size: cells * tokens * headCount * f32, uses: 1})!;
            const weights = graph.run([scores, mask], {size: cells * tokens * headCount * f32, uses: 1 + scoreReaders, inPlace: true})!;
            const perHead = graph.run([weights], {size: row(headCount * valueLength), uses: 1})!;
            attention = graph.run([perHead], {size: row(headCount * valueLength), uses: 1})!;
            if (scoreRows > 0) reduceScores(weights);
        }
        // Rotated V comes out of the attention rotated: the product with the rotation, read reshaped, undoes it.
        if (valueRotationInput !== -1)
            attention = graph.run([attention, valueRotationInput], {size: row(headCount * valueLength), uses: 1})!;
        let projected = graph.run([attention], {size: embedding, uses: 1})!;
        if (last) {
            // Only the output tokens go on (all of them in the reserved graph).
            projected = graph.run([projected, outputIds], {size: embedding, uses: 1})!;
            residual = graph.run([residual, outputIds], {size: embedding, uses: 1})!;
        }
        const feedForwardInput = graph.run([projected, residual], {size: embedding, uses: 2, inPlace: true})!;
        const feedForwardNorm = graph.run([graph.run([feedForwardInput], {size: embedding, uses: 1, inPlace: true})!], {
            size: embedding,
            uses: 2,
            inPlace: true
        })!;
        const gate = graph.run([feedForwardNorm], {size: row(feedForward), uses: 1})!;
        const up = graph.run([feedForwardNorm], {size: row(feedForward), uses: 1})!;
        const swiglu = graph.run([gate, up], {size: row(feedForward), uses: 1})!;
        const down = graph.run([swiglu], {size: embedding, uses: 1})!;
        residual = graph.run([down, feedForwardInput], {size: embedding, uses: last ? 1 : 2, inPlace: true})!;
    }
    // The normed output is a graph output too (embeddings): never freed.
    const outputRms = graph.run([residual], {size: embedding, uses: 1, inPlace: true})!;
    const outputNorm = graph.run([outputRms], {size: embedding, uses: Infinity, inPlace: true})!;
    graph.run([outputNorm], {size: row(model.vocabularySize ?? 0), uses: Infinity});
    return graph.peak;
}
