import type {BudgetEstimate, CompressionSettings} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {compressionSupport} from "../engine/compressionSupport.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {computeBufferBytes} from "../engine/computeBufferBytes.js";
import {kvBytesPerCell} from "../engine/kvMemory.js";
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
        return estimateBudget(model, compression, await this._engine.freeMemory(), {modelLoaded});
    }
}

/**
 * Pure: the budget's cells and bytes for this model, and whether the weights (unless `modelLoaded`), the KV cache and
 * the compute buffer fit in `freeMemoryBytes`.
 */
export function estimateBudget(model: ModelInspection, compression: CompressionSettings, freeMemoryBytes: number,
    {modelLoaded = true}: {modelLoaded?: boolean} = {}): BudgetEstimate {
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
    const computeBytes = computeBufferBytes(model, {cells: allocatedCells, flashAttention: compression.flashAttention});
    const neededBytes = (modelLoaded ? 0 : weightsBytes ?? model.sizeBytes) + bytes + (computeBytes ?? 0);
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
        modelLoaded,
        neededBytes,
        fits: neededBytes <= freeMemoryBytes && cells >= 64,
        compressionSupported: support.supported,
        notes
    };
}

function formatMib(bytes: number): string {
    return `${(bytes / mib).toFixed(1)} MiB`;
}
