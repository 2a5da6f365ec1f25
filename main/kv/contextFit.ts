import type {KvCacheType} from "../../preload/contract/compression.js";
import type {GpuLayers} from "../../preload/contract/models.js";
import type {ModelInspection} from "../engine/EngineApi.js";
import {computeBufferBytes} from "./computeBufferBytes.js";
import {gpuOffload, type OffloadFit} from "./gpuOffload.js";
import {kvBytesPerCell, kvTypesOf} from "./kvMemory.js";

/** llama.cpp rounds a context's KV cells up to a multiple of this. */
export const kvCellPadding = 256;

/** The context llama.cpp is asked for. */
export type ContextShape = {
    /** Cells the budget holds (llama.cpp pads them to `kvCellPadding`). */
    cells: number;
    /** Type of the K cache. */
    kvType: KvCacheType;
    /** Type of the V cache. */
    kvTypeV: KvCacheType;
    flashAttention: boolean;
    /** Query rows a scoring policy scores per ubatch (`scoring()`): its scores beside the cache and its graph branch. Defaults to `0`. */
    scoreRows?: number;
    /**
     * With TRIM-KV's retention gates on: the bytes of their weights (`RetentionInfo.weightBytes`); their log beta per cell,
     * layer and KV head is counted beside. Defaults to `null` (gates off).
     */
    retentionWeightBytes?: number | null;
    /** Whether LAVa's value norms are kept: one f32 per layer, KV head and cell. Defaults to `false`. */
    valueNorms?: boolean;
};

export type FitOptions = {
    /** The model is loaded: its weights take no more memory. Defaults to `true`. */
    modelLoaded?: boolean;
    /** On a GPU build: the model's GPU layers setting and the free RAM (`freeMemoryBytes` is then the free VRAM). */
    gpu?: {gpuLayers: GpuLayers; freeRamBytes: number};
};

export type ContextFit = {
    allocatedCells: number;
    bytesPerCell: number;
    /** Bytes of the KV cache: allocatedCells x bytesPerCell. */
    bytes: number;
    /** Bytes of the scores a scoring policy keeps beside the cache. */
    scoresBytes: number;
    /** Bytes of the retention gates (weights and 4 bytes per cell, layer and KV head); 0 with the gates off. */
    retentionBytes: number;
    /** Bytes of the value norms (4 per cell, layer and KV head); 0 when they are off. */
    valueNormBytes: number;
    /** Bytes of llama.cpp's compute buffer; `null` when the metadata is incomplete. */
    computeBytes: number | null;
    /** The weights (unless loaded), the cache, the scores and the compute buffer. */
    neededBytes: number;
    offload: OffloadFit | null;
    fits: boolean;
};

/**
 * Pure: what a context of `shape` costs on `model` and whether it fits in `freeMemoryBytes` (on a GPU build, each part
 * in the VRAM or RAM its GPU layers put it in): the fit estimate the budget controller shows and the engine checks
 * before it asks llama.cpp for a context. Returns `null` when the metadata lacks the layer or head counts.
 */
export function contextFit(
    model: ModelInspection,
    shape: ContextShape,
    freeMemoryBytes: number,
    {modelLoaded = true, gpu}: FitOptions = {}
): ContextFit | null {
    const kvTypes = kvTypesOf(shape);
    const bytesPerCell = kvBytesPerCell(model, kvTypes);
    if (bytesPerCell == null) return null;
    const allocatedCells = Math.ceil(shape.cells / kvCellPadding) * kvCellPadding;
    const bytes = allocatedCells * bytesPerCell;
    const scoreRows = shape.scoreRows ?? 0;
    const computeBytes = computeBufferBytes(model, {cells: allocatedCells, flashAttention: shape.flashAttention, scoreRows, kvTypes});
    // A scoring policy's accumulated and last scores beside K and V: two f32 per layer, query head and cell.
    const scoresBytes = scoreRows > 0 ? 2 * 4 * (model.layers ?? 0) * (model.headCount ?? 0) * allocatedCells : 0;
    // TRIM-KV's gates: their weights, and one f32 log beta per layer, KV head and cell.
    const retentionBytes =
        shape.retentionWeightBytes != null
            ? shape.retentionWeightBytes + 4 * (model.layers ?? 0) * (model.headCountKv ?? 0) * allocatedCells
            : 0;
    // LAVa's value norms: one f32 per layer, KV head and cell.
    const valueNormBytes = shape.valueNorms === true ? 4 * (model.layers ?? 0) * (model.headCountKv ?? 0) * allocatedCells : 0;
    const sideBytes = scoresBytes + retentionBytes + valueNormBytes;
    const neededBytes = (modelLoaded ? 0 : (model.weightsBytes ?? model.sizeBytes)) + bytes + sideBytes + (computeBytes ?? 0);
    const offload =
        gpu == null
            ? null
            : gpuOffload(model, {
                  gpuLayers: gpu.gpuLayers,
                  kvBytes: bytes + sideBytes,
                  computeBytes: computeBytes ?? 0,
                  modelLoaded,
                  freeVramBytes: freeMemoryBytes,
                  freeRamBytes: gpu.freeRamBytes
              });
    const fits =
        offload == null
            ? neededBytes <= freeMemoryBytes
            : offload.vramBytes <= offload.freeVramBytes && offload.ramBytes <= offload.freeRamBytes;
    return {allocatedCells, bytesPerCell, bytes, scoresBytes, retentionBytes, valueNormBytes, computeBytes, neededBytes, offload, fits};
}
