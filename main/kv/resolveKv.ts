import type {CompressionSettings} from "../../preload/contract/compression.js";
import type {ErrorInfo} from "../../preload/contract/errors.js";
import {mibOfBytes} from "../../preload/kvUnits.js";
import {AppError} from "../AppError.js";
import type {ModelInspection} from "../engine/EngineApi.js";
import {budgetAboveCap, budgetCap, cellsOfBudget, minBudgetCells} from "./budgetCap.js";
import {contextFit, kvCellPadding, type ContextFit, type ContextShape, type FitOptions} from "./contextFit.js";
import {describeKvTypes, kvBytesPerCell, kvTypesOf} from "./kvMemory.js";

/**
 * A generation's KV settings resolved once, before it runs: the compression as set, the live cells its budget allows on
 * this model with this much free memory, and whether their context fits there. The estimate (CompressionService) is a
 * view of it; chat and completions pass it to the engine as it is. Frozen.
 */
export type ResolvedKv = Readonly<{
    compression: CompressionSettings;
    /** Live cells the budget allows: its cells, its MiB in cells of its cache types, or auto; capped at `maxCells`. */
    cells: number;
    /** Bytes one cell costs in the compression's K and V types. */
    bytesPerCell: number;
    /** The most cells a budget may hold on the model (`budgetCap`). */
    maxCells: number;
    /** Why the budget as set asks for more than `maxCells` (it is capped to it); `null` when it does not. */
    aboveCap: ErrorInfo | null;
    /** Auto only: the model's context did not fit in half the free memory, so the cells are fewer. */
    cappedByMemory: boolean;
    /** What the context of `cells` costs and where it goes (`contextFit`). */
    fit: ContextFit;
    /** Whether that context fits in the free memory and holds at least `minBudgetCells`. */
    fits: boolean;
}>;

export type ResolveOptions = FitOptions & {
    /**
     * What the policy keeps beside the cache, as `contextFit` counts it: its scored rows, TRIM-KV's gate weights, LAVa's
     * value norms. Defaults to none.
     */
    sideState?: Pick<ContextShape, "scoreRows" | "retentionWeightBytes" | "valueNorms">;
};

/**
 * Pure: the cells `compression`'s budget stands for on `model`. Auto is the model's context (8,192 cells when it declares
 * none), capped at half of `freeMemoryBytes` and rounded down to 1,024 cells so that free memory moving a little does not
 * rebuild the context each message; a budget above the model's cap is capped to it. The fit reads `options` (the model
 * loaded, the GPU layers, the policy's side state). Throws `MODEL_INVALID` when the model's metadata lacks what a cell's
 * bytes need.
 */
export function resolveKv(
    model: ModelInspection,
    compression: CompressionSettings,
    freeMemoryBytes: number,
    options: ResolveOptions = {}
): ResolvedKv {
    const bytesPerCell = kvBytesPerCell(model, kvTypesOf(compression));
    if (bytesPerCell == null)
        throw new AppError("MODEL_INVALID", "The model's metadata lacks its layer or head counts: its KV cost cannot be estimated");
    const contextLength = model.contextLength;
    const maxCells = budgetCap(model);
    const aboveCap = budgetAboveCap(model, compression);
    let cells = cellsOfBudget(compression.budget, bytesPerCell);
    let cappedByMemory = false;
    if (cells == null) {
        const byMemory = Math.max(kvCellPadding, Math.floor(freeMemoryBytes / 2 / bytesPerCell / 1024) * 1024);
        cells = Math.min(contextLength ?? 8192, byMemory);
        cappedByMemory = contextLength != null && byMemory < contextLength;
    }
    if (aboveCap != null) cells = maxCells;
    const {kvType, kvTypeV, flashAttention} = compression;
    const fit = contextFit(model, {cells, kvType, kvTypeV, flashAttention, ...options.sideState}, freeMemoryBytes, options)!;
    const fits = fit.fits && cells >= minBudgetCells;
    return Object.freeze({compression, cells, bytesPerCell, maxCells, aboveCap, cappedByMemory, fit, fits});
}

/**
 * Throws when `kv`'s budget stands for fewer cells than the smallest budget (code `BUDGET_DOES_NOT_FIT`): a budget in MiB
 * that rounds below it is too small, and the refusal names the smallest budget in the budget's own unit.
 */
export function assertBudgetAboveMin(kv: Pick<ResolvedKv, "compression" | "cells" | "bytesPerCell">): void {
    if (kv.cells >= minBudgetCells) return;
    const budget = kv.compression.budget;
    const types = describeKvTypes(kv.compression);
    const asked = budget.kind === "mib" ? `${budget.mib} MiB holds ${kv.cells} cells of ${types}, which is` : `${kv.cells} cells is`;
    const smallest =
        budget.kind === "mib"
            ? `${mibOfBytes(minBudgetCells * kv.bytesPerCell, "ceil")} MiB (${minBudgetCells} cells)`
            : `${minBudgetCells} cells`;
    throw new AppError(
        "BUDGET_DOES_NOT_FIT",
        `A KV budget of ${asked} below the smallest budget of ${smallest}: ask for at least that much`
    );
}
