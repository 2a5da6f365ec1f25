// The budget controller's form: compression settings as the user edits them, where a number may be missing while it
// is typed, and the checks that catch obvious mistakes before the backend sees them.

import {
    cellsInMib,
    describeKvTypes,
    isNumberParam,
    mibOfBytes,
    policyEntry,
    tunablePolicyIds,
    type BudgetEstimate,
    type CompressionSettings,
    type KvBudget,
    type KvCacheTypes,
    type MessageDto,
    type PolicyId,
    type PolicyParams
} from "../../preload/contract.js";
import {budgetLimits, fullKvAnswerRoom, isTunable, paramSpecs, type ParamSpec} from "./policies.js";

type Editable<T> = {[K in keyof T]: T[K] extends number ? number | null : T[K]};

export type BudgetForm = Omit<CompressionSettings, "budget" | "pruneEvery" | "params"> & {
    budgetKind: KvBudget["kind"];
    /** Kept apart so switching the kind back and forth does not lose a typed value. */
    cells: number | null;
    mib: number | null;
    pruneEvery: number | null;
    params: {[P in keyof PolicyParams]: Editable<PolicyParams[P]>};
};

/** Field -> message, in the order the fields are shown; keys: `budget`, `pruneEvery`, `flashAttention`, `params.<policy>.<key>`. */
export type FormErrors = Record<string, string>;

export function toForm(compression: CompressionSettings): BudgetForm {
    const {budget, params, ...rest} = compression;
    return {
        ...rest,
        budgetKind: budget.kind,
        cells: budget.kind === "cells" ? budget.cells : null,
        mib: budget.kind === "mib" ? budget.mib : null,
        params: Object.fromEntries(tunablePolicyIds.map((id) => [id, {...params[id]}])) as BudgetForm["params"]
    };
}

function budgetOf(form: BudgetForm): KvBudget {
    if (form.budgetKind === "cells") return {kind: "cells", cells: form.cells ?? Number.NaN};
    if (form.budgetKind === "mib") return {kind: "mib", mib: form.mib ?? Number.NaN};
    return {kind: "auto"};
}

/** The settings the form stands for; meaningful once `validateBudgetForm` finds nothing. */
export function toCompression(form: BudgetForm): CompressionSettings {
    const number = (value: number | null) => value ?? Number.NaN;
    // Every parameter the catalogue declares: a number missing while it is typed is NaN, which the checks refuse.
    const params = Object.fromEntries(
        tunablePolicyIds.map((id) => {
            const values = form.params[id] as Record<string, number | string | null>;
            return [
                id,
                Object.fromEntries(
                    policyEntry(id).params.map((param) => [
                        param.key,
                        isNumberParam(param) ? number(values[param.key] as number | null) : values[param.key]
                    ])
                )
            ];
        })
    ) as PolicyParams;
    return {
        policy: form.policy,
        budget: budgetOf(form),
        kvType: form.kvType,
        kvTypeV: form.kvTypeV,
        flashAttention: form.flashAttention,
        combine: form.combine,
        pruneEvery: number(form.pruneEvery),
        params
    };
}

const count = (value: number) => value.toLocaleString("en-US");

function checkBudget(form: BudgetForm): string | null {
    if (form.budgetKind === "cells") {
        const cells = form.cells;
        if (cells == null || !Number.isFinite(cells)) return "Enter the budget as a number of cells (tokens), for example 4096.";
        if (!Number.isInteger(cells)) return "Cells are whole tokens: enter a whole number.";
        if (cells < budgetLimits.minCells)
            return `A budget needs at least ${budgetLimits.minCells} cells to hold the sinks, a recent window and the prompt.`;
        if (cells > budgetLimits.maxCells) return `At most ${count(budgetLimits.maxCells)} cells.`;
    } else if (form.budgetKind === "mib") {
        const mib = form.mib;
        if (mib == null || !Number.isFinite(mib)) return "Enter the budget in MiB, for example 512.";
        if (mib <= 0) return "A budget must be more than 0 MiB.";
        if (mib > budgetLimits.maxMib) return "A budget above 1 TiB is not a budget.";
    }
    return null;
}

/**
 * What the loaded model allows a budget, as its last estimate said: the most cells (`BudgetEstimate.maxCells`, the rule
 * is the backend's) and the bytes per cell of the cache types that estimate was for, to turn MiB into cells.
 */
export type BudgetCap = Pick<BudgetEstimate, "maxCells" | "modelContextLength" | "bytesPerCell"> & KvCacheTypes;

/** The cap in words for this kind of budget ("At most 4,096 cells: the model's context."); `null` for auto or no cap known. */
export function describeCap(kind: KvBudget["kind"], cap: BudgetCap | null, types: KvCacheTypes): string | null {
    if (cap == null || kind === "auto" || (kind === "mib" && (types.kvType !== cap.kvType || types.kvTypeV !== cap.kvTypeV))) return null;
    const reason = cap.modelContextLength === cap.maxCells ? "the model's context" : "the most Ponder allocates";
    if (kind === "cells") return `At most ${count(cap.maxCells)} cells: ${reason}.`;
    const most = mibOfBytes(cap.maxCells * cap.bytesPerCell, "floor");
    return `At most ${count(most)} MiB of ${describeKvTypes(types)} (${count(cap.maxCells)} cells): ${reason}.`;
}

/**
 * Why the budget asks for more than the model can use, in words, or `null`: cells above the cap, or MiB that make more
 * cells of the form's cache type (known once an estimate for that type came back). The backend refuses the same.
 */
export function checkBudgetCap(form: BudgetForm, cap: BudgetCap | null): string | null {
    const limit = describeCap(form.budgetKind, cap, form);
    if (cap == null || limit == null) return null;
    if (form.budgetKind === "cells" && form.cells != null && form.cells > cap.maxCells)
        return `${count(form.cells)} cells is more than this model can use. ${limit}`;
    if (form.budgetKind === "mib" && form.mib != null && cellsInMib(form.mib, cap.bytesPerCell) > cap.maxCells)
        return `${count(form.mib)} MiB is more than this model can use. ${limit}`;
    return null;
}

/** Tokens the conversation holds: its latest answer's last memory reading (prompt and answer); `null` when none was taken. */
export function conversationTokens(messages: MessageDto[]): number | null {
    const answer = messages.findLast((message) => message.role === "assistant" && (message.stats?.samples.length ?? 0) > 0);
    return answer?.stats?.samples.at(-1)?.tokensSeen ?? null;
}

/**
 * What a conversation of `tokens` tokens means for a budget of `cells` under `policy`, when it does not fit: Full KV
 * refuses the next message (and a continuation), a pruning policy prunes it as it is read. `null` when it fits.
 */
export function historyNote(tokens: number | null, cells: number | null, policy: PolicyId): string | null {
    if (tokens == null || cells == null) return null;
    if (policyEntry(policy).keepsEveryToken)
        return tokens + fullKvAnswerRoom > cells
            ? `This conversation is already about ${count(tokens)} tokens: with Full KV ${count(cells)} cells cannot hold it ` +
                  "and an answer, so the next message (or a continuation) is refused. Raise the budget or choose a compression policy."
            : null;
    return tokens > cells
        ? `This conversation is already about ${count(tokens)} tokens, more than ${count(cells)} cells: it is pruned as it is read, ` +
              "so parts of it can be lost."
        : null;
}

/** What is wrong with a parameter's value, in words, or `null`. */
function checkParam(spec: ParamSpec, value: number | null): string | null {
    if (value == null || !Number.isFinite(value)) return `Enter a value for ${spec.label}.`;
    if (spec.integer && !Number.isInteger(value)) return `${spec.label} must be a whole number.`;
    const low = spec.minExclusive ? value <= spec.min : value < spec.min;
    const high = spec.maxExclusive ? value >= spec.max : value > spec.max;
    if (low || high) {
        const lower = spec.minExclusive ? `above ${spec.min}` : `at least ${spec.min}`;
        const upper = spec.maxExclusive ? `below ${spec.max}` : `at most ${count(spec.max)}`;
        return `${spec.label} must be ${lower} and ${upper}.`;
    }
    return null;
}

/** Obvious mistakes only (the backend checks everything again); only the chosen policy's parameters are checked. */
export function validateBudgetForm(form: BudgetForm): FormErrors {
    const errors: FormErrors = {};
    const budget = checkBudget(form);
    if (budget) errors.budget = budget;
    const every = form.pruneEvery;
    if (every == null || !Number.isInteger(every) || every < budgetLimits.minPruneEvery || every > budgetLimits.maxPruneEvery)
        errors.pruneEvery = `Prune every ${budgetLimits.minPruneEvery} to ${budgetLimits.maxPruneEvery} generated tokens (a whole number).`;
    if (form.kvTypeV !== "f16" && !form.flashAttention)
        errors.flashAttention = "A quantized V cache (q8_0 or q4_0 values) needs flash attention: turn it on, or store the values as F16.";
    if (isTunable(form.policy)) {
        const values = form.params[form.policy] as Record<string, number | null>;
        for (const spec of paramSpecs[form.policy]) {
            const problem = checkParam(spec, values[spec.key] ?? null);
            if (problem) errors[`params.${form.policy}.${spec.key}`] = problem;
        }
    }
    return errors;
}
