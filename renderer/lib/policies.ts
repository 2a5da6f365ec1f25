// The compression policies as the app presents them: names, one-line descriptions, and each parameter with the
// papers' defaults and the bounds the backend accepts, all from the catalogue (preload/policyCatalogue.ts).

import {
    defaultPolicyParams,
    isNumberParam,
    isTunable,
    kvBounds,
    policyCatalogue,
    policyEntry,
    policyName,
    tunablePolicyIds,
    type ChoiceParam,
    type CompressionSettings,
    type KvCacheType,
    type NumberParam,
    type PolicyId,
    type PolicyPaper,
    type PolicyParams,
    type TunablePolicyId
} from "../../preload/contract.js";

export {isTunable, policyEntry, policyName};
export type {PolicyPaper};

export type PolicyInfo = {
    id: PolicyId;
    name: string;
    /** What it keeps, in plain words. */
    keeps: string;
    /** When to choose it. */
    when: string;
    /** `keeps` and `when` in one text (tooltips). */
    description: string;
    paper: PolicyPaper | null;
};

export const policies: PolicyInfo[] = policyCatalogue.map(({id, name, keeps, when, paper}) => ({
    id,
    name,
    keeps,
    when,
    description: `${keeps} ${when}`,
    paper
}));

/** A number parameter as the form shows and checks it. */
export type ParamSpec = NumberParam;

/** Each policy's number parameters, in the order the controller shows them (its choices: `paramChoices`). */
export const paramSpecs = Object.fromEntries(tunablePolicyIds.map((id) => [id, policyEntry(id).params.filter(isNumberParam)])) as {
    [P in TunablePolicyId]: (ParamSpec & {key: keyof PolicyParams[P] & string})[];
};

/** Each policy's choices (ReFreeKV's mode), shown after its numbers. */
export const paramChoices = Object.fromEntries(
    tunablePolicyIds.map((id) => [id, policyEntry(id).params.filter((param) => !isNumberParam(param))])
) as {[P in TunablePolicyId]: (ChoiceParam & {key: keyof PolicyParams[P] & string})[]};

/** The papers' defaults, as the catalogue gives them. */
export const policyDefaults: PolicyParams = defaultPolicyParams();

/** Bounds of the settings beside the policy parameters (preload/kvBounds.ts). */
export const budgetLimits = kvBounds;

/** Cells Full KV keeps free after the prompt for the answer's first tokens (main/kv/budgetCap.ts, `fullKvAnswerRoom`). */
export const fullKvAnswerRoom = kvBounds.fullKvAnswerRoom;

/** The cache types, offered for the keys and for the values each. */
export const kvTypes: {id: KvCacheType; label: string}[] = [
    {id: "f16", label: "F16 (exact)"},
    {id: "q8_0", label: "Q8_0 (about half)"},
    {id: "q4_0", label: "Q4_0 (about a quarter)"}
];

/** The cache types a policy's paper runs it with (the catalogue's `pairsWith`); an error for a policy that names none. */
function cachePairOf(id: PolicyId): Pick<CompressionSettings, "kvType" | "kvTypeV"> {
    const pair = policyEntry(id).pairsWith;
    if (pair == null) throw new Error(`${policyName(id)} pairs with no cache types`);
    return {kvType: pair.kvType, kvTypeV: pair.kvTypeV};
}

/**
 * LeanKV's recommended pair, K8V4 (§3.1, Fig. 7): keys at 8 bits, values at 4, since keys weigh on every attention weight.
 * Offered under every policy.
 */
export const leanKvPair = cachePairOf("leankv");

/** App defaults of the settings shared by every policy (main/services/schemas.ts). */
export const sharedDefaults: Pick<CompressionSettings, "combine" | "pruneEvery"> = {combine: "auto", pruneEvery: 16};

/** The ways per-layer selections become one set of cells (main/engine/policies/types.ts), as the controller offers them. */
export const combineModes: {id: CompressionSettings["combine"]; label: string; hint: string}[] = [
    {
        id: "auto",
        label: "Policy's own",
        hint: "Aggregate; per-head cells for H2O, and for TRIM-KV gates trained per layer and head (as its paper trains them)."
    },
    {id: "aggregate", label: "Aggregate", hint: "One selection on scores normalised and summed over layers and heads."},
    {
        id: "quota",
        label: "Layer quotas",
        hint: "Each layer keeps its own top tokens up to its quota; quotas shrink together to fit the budget."
    },
    {id: "union", label: "Union", hint: "A token is freed only when no layer keeps it; over budget, the lowest-scored go first."},
    {
        id: "heads",
        label: "Per-head cells",
        hint: "Each layer's KV heads keep their own tokens, every head the same number of cells (TRIM-KV's and H2O's per-head memory)."
    }
];
