import os from "node:os";
import type {BudgetEstimate, CompressionSettings, GpuLayers} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {compressionSupport} from "../engine/compressionSupport.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {computeBufferBytes} from "../engine/computeBufferBytes.js";
import {cacheTypeProblem, kvBytesPerCell} from "../engine/kvMemory.js";
import {scoring} from "../engine/scoring.js";
import {gpuOffload} from "./gpuOffload.js";
import type {ModelInspection} from "../engine/types.js";
import type {ModelService} from "./ModelService.js";

const mib = 1024 * 1024;
/** llama.cpp rounds a context's KV cells up to a multiple of this. */
export const kvCellPadding = 256;

/** What a compression setting means for a model: cells, bytes, whether it fits, from the GGUF's own metadata. */
export class CompressionService {
    constructor(private readonly _engine: EngineApi, private readonly _models: ModelService) {}

    async estimate(compression: CompressionSettings, modelId?: string): Promise<BudgetEstimate> {
        const model = modelId != null ? await this._models.inspection(modelId) : this._engine.inspection;
        if (model == null)
            throw new AppError("MODEL_NOT_LOADED", "Load a model (or name one) to estimate a budget");
        const modelLoaded = modelId == null || this._engine.status.model?.id === modelId;
        const build = this._engine.status.build;
        if (build == null || build.gpu === false)
            return estimateBudget(model, compression, os.freemem(), {modelLoaded});
        // A GPU build: the loaded model as it was loaded, another one with its own setting.
        const gpuLayers = modelId != null && !modelLoaded ? this._models.get(modelId).gpuLayers : this._engine.status.model?.gpuLayers;
        return estimateBudget(model, compression, await this._engine.freeMemory(), {modelLoaded, gpu: {gpuLayers: gpuLayers ?? "auto", freeRamBytes: os.freemem()}});
    }
}

export type EstimateOptions = {
    /** The model is loaded: its weights take no more memory. Defaults to `true`. */
    modelLoaded?: boolean,
    /** On a GPU build: the model's GPU layers setting and the free RAM (`freeMemoryBytes` is then the free VRAM). */
    gpu?: {gpuLayers: GpuLayers, freeRamBytes: number}
};

/**
 * Pure: the budget's cells and bytes for this model, and whether the weights (unless `modelLoaded`), the KV cache and
 * the compute buffer fit in `freeMemoryBytes`; on a GPU build, each part in the VRAM or RAM its GPU layers put it in.
 */
export function estimateBudget(model: ModelInspection, compression: CompressionSettings, freeMemoryBytes: number,
    {modelLoaded = true, gpu}: EstimateOptions = {}): BudgetEstimate {
    const bytesPerCell = kvBytesPerCell(model, {k: compression.kvType, v: compression.kvType});
    if (bytesPerCell == null)
        throw new AppError("MODEL_INVALID", "The model's metadata lacks its layer or head counts: its KV cost cannot be estimated");

    const notes: string[] = [];
    const contextLength = model.contextLength;
    let cells: number;
    if (compression.budget.kind === "cells")
        cells = compression.budget.cells;
    else if (compression.budget.kind === "mib")
        cells = Math.floor((compression.budget.mib * mib) / bytesPerCell);
    else {
        // auto: the model's context, capped at half the free memory.
        // Rounded down to 1024 cells so that free memory moving a little does not rebuild the context each message.
        const byMemory = Math.max(kvCellPadding, Math.floor(freeMemoryBytes / 2 / bytesPerCell / 1024) * 1024);
        cells = Math.min(contextLength ?? 8192, byMemory);
        if (contextLength != null && byMemory < contextLength)
            notes.push(`Capped at half the free memory: the model's ${contextLength}-token context would need ${formatMib(contextLength * bytesPerCell)}.`);
    }
    if (cells < 64)
        notes.push(`${cells} cells is below the smallest usable budget of 64 cells.`);
    if (contextLength != null && cells > contextLength && compression.policy === "full")
        notes.push(`With Full KV, tokens past the model's trained context (${contextLength}) are unlikely to help.`);

    const cacheProblem = cacheTypeProblem(model, compression);
    if (cacheProblem != null)
        notes.push(cacheProblem);

    const support = compressionSupport(model.architecture);
    if (!support.supported && compression.policy !== "full")
        notes.push(support.note!);
    if (compression.policy === "full")
        notes.push(`Full KV keeps every token: the answer stops when ${cells} cells are used.`);
    else
        notes.push(`${compression.policy} prunes while the model thinks, so a chain of thought longer than ${cells} tokens fits.`);

    const allocatedCells = Math.ceil(cells / kvCellPadding) * kvCellPadding;
    if (allocatedCells !== cells)
        notes.push(`llama.cpp reserves cells in steps of ${kvCellPadding}: ${allocatedCells} cells are allocated, ${cells} are used.`);
    const bytes = allocatedCells * bytesPerCell;
    const weightsBytes = model.weightsBytes ?? null;
    const scoreRows = scoring(compression).rows;
    const computeBytes = computeBufferBytes(model, {
        cells: allocatedCells, flashAttention: compression.flashAttention, scoreRows, kvTypes: {k: compression.kvType, v: compression.kvType}
    });
    // A scoring policy's accumulated and last scores beside K and V: two f32 per layer, query head and cell.
    const scoresBytes = scoreRows > 0 ? 2 * 4 * (model.layers ?? 0) * (model.headCount ?? 0) * allocatedCells : 0;
    const neededBytes = (modelLoaded ? 0 : weightsBytes ?? model.sizeBytes) + bytes + scoresBytes + (computeBytes ?? 0);
    const offload = gpu == null ? null : gpuOffload(model, {
        gpuLayers: gpu.gpuLayers, kvBytes: bytes + scoresBytes, computeBytes: computeBytes ?? 0, modelLoaded, freeVramBytes: freeMemoryBytes,
        freeRamBytes: gpu.freeRamBytes
    });
    if (offload != null && offload.gpuLayers < offload.totalLayers)
        notes.push(offload.gpuLayers === 0
            ? "No layer is on the GPU: the weights and the KV cache are in RAM."
            : `${offload.gpuLayers} of ${offload.totalLayers} layers are on the GPU; the others' weights and KV cache are in RAM.`);
    const fits = offload == null ? neededBytes <= freeMemoryBytes : offload.vramBytes <= offload.freeVramBytes && offload.ramBytes <= offload.freeRamBytes;
    return {
        cells,
        allocatedCells,
        bytesPerCell,
        bytes,
        fullContextBytes: contextLength != null ? contextLength * bytesPerCell : null,
        modelContextLength: contextLength,
        freeMemoryBytes,
        weightsBytes,
        computeBytes,
        scoresBytes,
        modelLoaded,
        neededBytes,
        offload,
        fits: fits && cells >= 64,
        compressionSupported: support.supported,
        notes
    };
}

function formatMib(bytes: number): string {
    return `${(bytes / mib).toFixed(1)} MiB`;
}
