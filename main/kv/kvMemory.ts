import type {KvCacheType} from "../../preload/contract/compression.js";
import {bytesPerMib, type KvCacheTypes} from "../../preload/kvUnits.js";
import type {ModelInspection} from "../engine/EngineApi.js";

export type {KvCacheType};

/** Bytes of one block of `blockSize` elements, per ggml type (ggml.c's type traits). */
const typeTraits: Record<KvCacheType, {blockSize: number; blockBytes: number}> = {
    f16: {blockSize: 1, blockBytes: 2},
    q8_0: {blockSize: 32, blockBytes: 34},
    q4_0: {blockSize: 32, blockBytes: 18}
};

export function rowBytes(type: KvCacheType, elements: number): number {
    const {blockSize, blockBytes} = typeTraits[type];
    return Math.ceil(elements / blockSize) * blockBytes;
}

export type KvShape = Pick<ModelInspection, "layers" | "headCount" | "headCountKv" | "embeddingLength"> &
    Partial<Pick<ModelInspection, "keyLength" | "valueLength">>;

/**
 * Bytes one KV cell costs across all layers: per layer a K row of n_head_kv x key_length elements and a V row of
 * n_head_kv x value_length, in the cache's types (`kvType` for K, `kvTypeV` for V), as llama.cpp sizes them (`n_embd_k_gqa`,
 * `n_embd_v_gqa`). A head is embedding / heads wide only when the GGUF declares no `attention.key_length` /
 * `value_length` (Qwen3 declares 128 over embeddings of 1024 to 2560 with 16 to 32 heads). Returns `null` when the
 * metadata is incomplete.
 */
export function kvBytesPerCell(model: KvShape, types: {k: KvCacheType; v: KvCacheType} = {k: "f16", v: "f16"}): number | null {
    const {layers, headCountKv} = model;
    const keyLength = headLength(model, model.keyLength);
    const valueLength = headLength(model, model.valueLength);
    if (layers == null || headCountKv == null || keyLength == null || valueLength == null) return null;
    return layers * (rowBytes(types.k, headCountKv * keyLength) + rowBytes(types.v, headCountKv * valueLength));
}

/** A head's declared length, else embedding / heads (llama.cpp's default for `n_embd_head_k` / `_v`). */
export function headLength(
    model: Pick<ModelInspection, "headCount" | "embeddingLength">,
    declared: number | null | undefined
): number | null {
    if (declared != null) return declared;
    const {headCount, embeddingLength} = model;
    if (headCount == null || embeddingLength == null || headCount === 0) return null;
    return embeddingLength / headCount;
}

/** The K and V types of a setting, as `kvBytesPerCell` and the compute buffer take them. */
export function kvTypesOf(types: KvCacheTypes): {k: KvCacheType; v: KvCacheType} {
    return {k: types.kvType, v: types.kvTypeV};
}

/** The cache types and the cache in words (preload/kvUnits.ts, shared with the renderer). */
export {describeKvTypes, type KvCacheTypes} from "../../preload/kvUnits.js";

/**
 * llama.cpp stores a quantized V cache only with flash attention (`llama_init_from_model`: "quantized V cache requires
 * flash_attn"); without it the context cannot be made. A quantized K cache works either way.
 */
export const quantizedCacheNeedsFlashAttention =
    "A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn flash attention on, or store the values as F16.";

export function quantizedWithoutFlashAttention(compression: {kvTypeV: KvCacheType; flashAttention: boolean}): boolean {
    return compression.kvTypeV !== "f16" && !compression.flashAttention;
}

/**
 * Why llama.cpp cannot make a cache of these types for this model, in words, or `null`: a quantized V cache needs flash
 * attention, and a quantized K or V cache rows of whole blocks (a head a multiple of the type's 32-value block).
 */
export function cacheTypeProblem(model: KvShape, compression: KvCacheTypes & {flashAttention: boolean}): string | null {
    if (quantizedWithoutFlashAttention(compression)) return quantizedCacheNeedsFlashAttention;
    const parts = [
        {name: "K", type: compression.kvType, width: headLength(model, model.keyLength)},
        {name: "V", type: compression.kvTypeV, width: headLength(model, model.valueLength)}
    ];
    for (const {name, type, width} of parts) {
        const {blockSize} = typeTraits[type];
        if (width != null && width % blockSize !== 0)
            return (
                `This model's attention heads are ${width} values wide, and a ${type} ${name} cache stores blocks of ${blockSize}: ` +
                `choose F16 for ${name}.`
            );
    }
    return null;
}

/** Bytes as MiB with one decimal, as the estimate's notes and the engine's refusals write them. */
export function formatMib(bytes: number): string {
    return `${(bytes / bytesPerMib).toFixed(1)} MiB`;
}
