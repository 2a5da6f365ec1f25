import type {ModelInspection} from "./types.js";

export type KvCacheType = "f16" | "q8_0" | "q4_0";

/** Bytes of one block of `blockSize` elements, per ggml type (ggml.c's type traits). */
const typeTraits: Record<KvCacheType, {blockSize: number, blockBytes: number}> = {
    f16: {blockSize: 1, blockBytes: 2},
    q8_0: {blockSize: 32, blockBytes: 34},
    q4_0: {blockSize: 32, blockBytes: 18}
};

export function rowBytes(type: KvCacheType, elements: number): number {
    const {blockSize, blockBytes} = typeTraits[type];
    return Math.ceil(elements / blockSize) * blockBytes;
}

/**
 * Bytes one KV cell costs across all layers: per layer a K row of n_head_kv x head_dim elements and a
 * V row of the same size, in the cache's types (DESIGN §5). Returns `null` when the metadata is incomplete.
 */
export function kvBytesPerCell(model: Pick<ModelInspection, "layers" | "headCount" | "headCountKv" | "embeddingLength">,
    types: {k: KvCacheType, v: KvCacheType} = {k: "f16", v: "f16"}): number | null {
    const {layers, headCount, headCountKv, embeddingLength} = model;
    if (layers == null || headCount == null || headCountKv == null || embeddingLength == null || headCount === 0)
        return null;
    const headDim = embeddingLength / headCount;
    const elements = headCountKv * headDim;
    return layers * (rowBytes(types.k, elements) + rowBytes(types.v, elements));
}
