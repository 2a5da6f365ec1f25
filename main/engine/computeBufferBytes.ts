import {headLength} from "./kvMemory.js";
import type {ModelInspection} from "./types.js";

/** The most tokens llama.cpp evaluates in one ubatch (node-llama-cpp's default batch size). */
export const defaultUbatch = 512;

export type ComputeBufferOptions = {
    /** Cells the context allocates (its KV span). */
    cells: number,
    flashAttention: boolean,
    /** Tokens per ubatch. Defaults to `min(cells, 512)`. */
    ubatch?: number
};

/**
 * Approximate bytes of llama.cpp's compute buffer for a context (the graph reserved for a full ubatch attending to
 * every cell), on the device that holds the KV cache. Without flash attention the attention scores dominate it
 * and are counted exactly: per ubatch token and cell, one f32 score per query head and an f32 mask entry. With
 * flash attention only an f16 mask remains. The activations of one layer (the residual twice, Q, K, V and the
 * feed-forward width, f32) come on top. Measured against llama.cpp's own figure on generated models: within 3%
 * without flash attention at 4,096 cells; with it, where the activations dominate, it reads low (by 6 to 10% on the
 * qwen3 fixtures, by a third on a 28-layer model).
 * Returns `null` when the metadata is incomplete.
 */
export function computeBufferBytes(model: Pick<ModelInspection, "headCount" | "headCountKv" | "embeddingLength" | "keyLength" | "valueLength" | "feedForwardLength">,
    options: ComputeBufferOptions): number | null {
    const {headCount, headCountKv, embeddingLength} = model;
    const keyLength = headLength(model, model.keyLength);
    const valueLength = headLength(model, model.valueLength);
    if (headCount == null || headCountKv == null || embeddingLength == null || keyLength == null || valueLength == null)
        return null;
    const ubatch = options.ubatch ?? Math.min(options.cells, defaultUbatch);
    const f32 = 4;
    const attention = options.flashAttention
        ? ubatch * options.cells * 2
        : ubatch * options.cells * (headCount + 1) * f32;
    const activations = ubatch * f32 * (2 * embeddingLength + headCount * keyLength + headCountKv * (keyLength + valueLength) +
        (model.feedForwardLength ?? 4 * embeddingLength));
    return attention + activations;
}
