// What an answer ran under, as its footer and the Memory chip show it (MessageCompression): the policy, its budget in
// cells and the cache type in a few words, every setting in the tooltip, so versions made under different policies
// can be told apart.

import type {CompressionSettings, KvBudget, MessageCompression} from "../../preload/contract.js";
import {count} from "./formatMemory.js";
import {combineModes, isTunable, paramChoices, paramSpecs, policyName} from "./policies.js";

export type CompressionDescription = {
    /** `"Lethe · 512 cells · F16"`. */
    label: string;
    /** Every setting in a sentence or two, for the tooltip. */
    detail: string;
};

/** An answer's compression in a few words (`label`) and in full (`detail`). */
export function describeCompression(compression: MessageCompression): CompressionDescription {
    const settings = compression.settings;
    const name = policyName(compression.policy);
    const budget =
        compression.budgetCells != null
            ? `${count(compression.budgetCells)} cells`
            : settings != null
              ? budgetLabel(settings.budget)
              : null;
    const label = [name, budget, settings != null ? cacheTypeLabel(settings) : null].filter((part) => part != null).join(" · ");
    if (settings == null)
        return {label, detail: `Ran under ${name}${budget != null ? ` with ${budget}` : ""} (its other settings were not recorded).`};

    const set = compression.budgetCells != null && settings.budget.kind !== "cells" ? ` (set as ${budgetLabel(settings.budget)})` : "";
    const parts = [`Ran under ${name} with ${budget ?? "its budget"}${set}, KV cache ${cacheTypeLabel(settings)}`];
    if (isTunable(settings.policy)) {
        const combine = combineModes.find((mode) => mode.id === settings.combine)?.label ?? settings.combine;
        parts.push(`layers combined by ${combine.toLowerCase()}, pruned every ${count(settings.pruneEvery)} tokens`);
        const params = settings.params[settings.policy] as Record<string, number | string>;
        const values = paramSpecs[settings.policy].map((spec) => `${spec.label.toLowerCase()} ${String(params[spec.key])}`);
        for (const choice of paramChoices[settings.policy]) {
            const value = String(params[choice.key]);
            values.push(choice.options.find((option) => option.id === value)?.inWords ?? value);
        }
        parts.push(`${name}: ${values.join(", ")}`);
    }
    return {label, detail: `${parts.join("; ")}.`};
}

/** `"512 cells"`, `"256 MiB"`, `"auto budget"`. */
export function budgetLabel(budget: KvBudget): string {
    return budget.kind === "cells" ? `${count(budget.cells)} cells` : budget.kind === "mib" ? `${budget.mib} MiB` : "auto budget";
}

/** `"Lethe, 512 cells"`, `"Full KV, auto budget"`. */
export function describeSetting(compression: CompressionSettings): string {
    return `${policyName(compression.policy)}, ${budgetLabel(compression.budget)}`;
}

/** The KV cache's type as llama.cpp names it: `"F16"`, `"Q8_0"`, or `"K Q8_0 / V F16"` when the keys and values differ. */
function cacheTypeLabel(settings: CompressionSettings): string {
    const k = settings.kvType.toUpperCase();
    const v = (settings.kvTypeV ?? settings.kvType).toUpperCase();
    return k === v ? k : `K ${k} / V ${v}`;
}

/** Whether the next answer would run under another policy or budget than `compression` records. */
export function compressionChanged(compression: MessageCompression, next: CompressionSettings): boolean {
    if (compression.policy !== next.policy) return true;
    return compression.settings != null && JSON.stringify(compression.settings.budget) !== JSON.stringify(next.budget);
}
