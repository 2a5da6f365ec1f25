import type {CompressionSettings, KvBudget} from "../../preload/contract/compression.js";
import type {ErrorInfo} from "../../preload/contract/errors.js";
import {kvBounds} from "../../preload/kvBounds.js";
import {cellsInMib, mibOfBytes} from "../../preload/kvUnits.js";
import {AppError} from "../AppError.js";
import type {ModelInspection} from "../engine/EngineApi.js";
import {describeKvTypes, kvBytesPerCell, kvTypesOf, type KvShape} from "./kvMemory.js";

// What a KV budget may be on a model, in one place: the estimate, the services that store or take a budget (IPC,
// settings, the API server) and the engine before it allocates all ask here.

/** Smallest KV budget accepted: sinks, a recent window and room for a prompt. */
export const minBudgetCells = kvBounds.minCells;
/** Most cells a budget may hold on a model whose GGUF declares no context length. */
export const maxBudgetCells = kvBounds.maxCells;
/** Cells Full KV keeps free after the prompt for the answer's first tokens: a longer conversation is refused up front. */
export const fullKvAnswerRoom = kvBounds.fullKvAnswerRoom;

export type CapModel = KvShape & Pick<ModelInspection, "name" | "contextLength">;

const count = (value: number) => value.toLocaleString("en-US");

/**
 * The most cells a KV budget may hold on `model`: its trained context (`context_length`), the most tokens it was
 * trained to attend to at once. Past it, Full KV would place tokens at positions the model never saw and a pruning
 * policy would keep more live tokens than the model reads at once: memory for little or nothing (a budget of
 * 1,048,576 cells on a 4,096-token model allocated 2 GiB). A model that declares no context gets `maxBudgetCells`.
 */
export function budgetCap(model: Pick<ModelInspection, "contextLength">): number {
    const context = model.contextLength;
    return context != null && context > 0 ? Math.min(context, maxBudgetCells) : maxBudgetCells;
}

/** The cells a budget in cells or MiB stands for (MiB over the cache type's bytes per cell); `null` for auto or an unknown shape. */
export function cellsOfBudget(budget: KvBudget, bytesPerCell: number | null): number | null {
    if (budget.kind === "cells") return budget.cells;
    if (budget.kind === "mib" && bytesPerCell != null && bytesPerCell > 0) return cellsInMib(budget.mib, bytesPerCell);
    return null;
}

/** What a budget check reads of the compression settings: the budget and the cache types that turn MiB into cells. */
export type BudgetSettings = Pick<CompressionSettings, "budget" | "kvType" | "kvTypeV">;

/**
 * Why `budget` asks for more cells than `model` can use, with the cap in words (code `BUDGET_ABOVE_CONTEXT`), or
 * `null`. A MiB budget is turned into cells of its K and V types first; auto never asks for more (it is the context at
 * most).
 */
export function budgetAboveCap(model: CapModel, compression: BudgetSettings): ErrorInfo | null {
    const bytesPerCell = kvBytesPerCell(model, kvTypesOf(compression));
    const cells = cellsOfBudget(compression.budget, bytesPerCell);
    const cap = budgetCap(model);
    if (cells == null || cells <= cap) return null;
    const reason = model.contextLength != null && cap === model.contextLength ? "the model's context" : "the most Ponder allocates";
    const asked =
        compression.budget.kind === "mib"
            ? `${count(compression.budget.mib)} MiB is ${count(cells)} cells of ${describeKvTypes(compression)}, which is`
            : `${count(cells)} cells is`;
    const most =
        compression.budget.kind === "mib" && bytesPerCell != null
            ? `${count(mibOfBytes(cap * bytesPerCell, "floor"))} MiB (${count(cap)} cells)`
            : `${count(cap)} cells`;
    return {code: "BUDGET_ABOVE_CONTEXT", message: `A KV budget of ${asked} more than ${model.name} can use: at most ${most}, ${reason}.`};
}

/** Throws `budgetAboveCap`'s refusal, if any; without a model there is nothing to check against. */
export function assertBudgetWithinCap(model: CapModel | null, compression: BudgetSettings): void {
    const problem = model != null ? budgetAboveCap(model, compression) : null;
    if (problem != null) throw new AppError(problem.code, problem.message);
}

/**
 * Whether an update sets another budget (or cache type, which changes what MiB mean): only then is it checked, so a
 * budget stored for another model does not block a change of anything else.
 */
export function budgetChanged(before: BudgetSettings, after: BudgetSettings): boolean {
    return (
        JSON.stringify(before.budget) !== JSON.stringify(after.budget) || before.kvType !== after.kvType || before.kvTypeV !== after.kvTypeV
    );
}

/** `budget`, or the cap in cells where it asks for more: a budget stored for another model, used on this one. */
export function capBudget(model: CapModel, compression: BudgetSettings): KvBudget {
    return budgetAboveCap(model, compression) == null ? compression.budget : {kind: "cells", cells: budgetCap(model)};
}

/**
 * Full KV's refusal of a conversation of `tokens` tokens (its rendered prompt, the answer's opening included) that
 * leaves less than `fullKvAnswerRoom` cells of a budget of `cells` for the answer (code `KV_BUDGET_EXCEEDED`).
 */
export function kvBudgetExceeded(tokens: number, cells: number): AppError {
    const needed = count(tokens + fullKvAnswerRoom);
    return new AppError(
        "KV_BUDGET_EXCEEDED",
        `This conversation is ${count(tokens)} tokens long: with Full KV it needs ${needed} cells ` +
            `(${fullKvAnswerRoom} of them for the answer's first tokens), more than the KV budget of ${count(cells)} cells. Raise the budget ` +
            `above ${needed} cells or choose a compression policy.`
    );
}
