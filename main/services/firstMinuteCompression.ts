import type {CompressionSettings} from "../../preload/contract.js";
import {policyEntry, policyIds} from "../../preload/policyCatalogue.js";
import {minBudgetCells} from "../kv/budgetCap.js";
import type {RetentionAvailability} from "../engine/retention/types.js";

// What new conversations start under when nobody saved a default: a model with retention gates shows its compression
// from the first answer, under TRIM-KV with a budget that prunes.

/** The policy a model's retention gates are for: the one that reads them (TRIM-KV). */
const gatesPolicy = policyIds.find((id) => policyEntry(id).reads.gates);

/**
 * The demo model's first budget: half of a long sample's tokens. A 30-step sample is about 640 tokens (prompt, thought
 * and answer; 617 to 657 over 40 held-out problems, counted with test/eval/train/task.py's tokenizer), so the samples
 * (24 to 30 steps, `demoSampleSteps`) run at about half the memory of a full cache.
 */
export const demoFirstBudgetCells = 320;

/** The steps of the demo model's sample problems: long enough that `demoFirstBudgetCells` prunes each of them. */
export const demoSampleSteps = {minSteps: 24, maxSteps: 30} as const;

/**
 * The many-task model's first budget: about half of each of its samples, which are sized to about 400-630 tokens
 * (`MULTI_SAMPLE_SCALES`).
 */
export const multiFirstBudgetCells = 256;

/** The first budget of each shipped model with gates, by file name (`shippedModelFile`). */
export const shippedFirstBudgetCells: Readonly<Record<string, number>> = {
    "ponder-demo.gguf": demoFirstBudgetCells,
    "ponder-multi.gguf": multiFirstBudgetCells
};

/**
 * Pure: `defaults` under TRIM-KV when the model has retention gates, with `shippedBudget` for a model Ponder ships
 * (`shippedFirstBudgetCells`) and the budget the gates were trained at for another; `null` (the defaults stay) without
 * gates, or with gates whose trained budget is unknown.
 */
export function firstMinuteCompression(
    defaults: CompressionSettings,
    retention: RetentionAvailability,
    shippedBudget: number | null
): CompressionSettings | null {
    if (!retention.available || gatesPolicy == null) return null;
    const cells = shippedBudget ?? retention.info.budget;
    if (cells == null) return null;
    return {...defaults, policy: gatesPolicy, budget: {kind: "cells", cells: Math.max(minBudgetCells, cells)}};
}
