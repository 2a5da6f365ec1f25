// The compression policies as the app presents them: names, one-line descriptions, and each parameter with the
// papers' defaults and the bounds the backend accepts (main/services/schemas.ts). Defaults are repeated here because
// the renderer does not import main-process code; the tests pin them.

import type {CompressionSettings, PolicyId, PolicyParams} from "../../preload/contract.js";

export type PolicyInfo = {id: PolicyId, name: string, description: string};

export const policies: PolicyInfo[] = [
    {id: "full", name: "Full KV", description: "Keeps every token. The answer stops when the budget is full."},
    {id: "streamingllm", name: "StreamingLLM", description: "Keeps the first tokens (attention sinks) and a sliding window of the newest."},
    {id: "h2o", name: "H2O", description: "Keeps the heavy hitters, tokens that drew the most attention, plus a recent window."},
    {id: "lethe", name: "Lethe", description: "Each layer keeps its salient tokens by decayed attention up to a sparsity breakpoint."},
    {id: "refreekv", name: "ReFreeKV", description: "Each layer keeps the shortest prefix of ranked tokens that loses under 1% of attention."}
];

export type ParamSpec = {
    key: string,
    label: string,
    hint: string,
    min: number,
    max: number,
    /** `min` itself is refused (`> min`). */
    minExclusive?: boolean,
    /** `max` itself is refused (`< max`). */
    maxExclusive?: boolean,
    integer?: boolean,
    step: number
};

type Tunable = Exclude<PolicyId, "full">;

/** Each policy's parameters, in the order the controller shows them. */
export const paramSpecs: {[P in Tunable]: (ParamSpec & {key: keyof PolicyParams[P] & string})[]} = {
    streamingllm: [
        {key: "sinks", label: "Sink tokens", hint: "First tokens always kept (attention sinks).", min: 0, max: 256, integer: true, step: 1}
    ],
    h2o: [
        {key: "heavyRatio", label: "Heavy-hitter share", hint: "Share of the budget for heavy hitters; the rest is the recent window.",
            min: 0.05, max: 0.95, step: 0.05}
    ],
    lethe: [
        {key: "sparseRatio", label: "Sparsity ratio τ", hint: "A segment is salient while top score / its score ≤ τ.",
            min: 1, minExclusive: true, max: 1e9, step: 10},
        {key: "recentRatio", label: "Recent share", hint: "Share of the cache always kept as the newest tokens.", min: 0, max: 0.9, step: 0.05},
        {key: "segments", label: "Segments D", hint: "Cut points tested per layer in the sorted scores.", min: 2, max: 256, integer: true, step: 1},
        {key: "sinks", label: "Sink tokens", hint: "First tokens always kept.", min: 0, max: 256, integer: true, step: 1},
        {key: "gamma", label: "Decay γ", hint: "Decay of accumulated attention (RASR, Eq. 5).", min: 0, minExclusive: true, max: 1, step: 0.01},
        {key: "initialEvictRatio", label: "First prune at", hint: "Share of the budget filled before a layer first prunes.",
            min: 0.05, max: 1, step: 0.05},
        {key: "keepInput", label: "Keep the question up to", hint: "Keeps the question and earlier turns whole while they take at most this share of the budget (0: never).",
            min: 0, max: 1, step: 0.05}
    ],
    refreekv: [
        {key: "threshold", label: "Loss threshold T", hint: "Largest relative loss of attention norm a layer may drop.",
            min: 0, minExclusive: true, max: 1, maxExclusive: true, step: 0.005},
        {key: "firstM", label: "First tokens m", hint: "Leading tokens ranked ahead of all others.", min: 0, max: 256, integer: true, step: 1},
        {key: "wholeLayers", label: "Whole layers", hint: "First layers that keep every token.", min: 0, max: 16, integer: true, step: 1}
    ]
};

/** The papers' defaults (Lethe §5, ReFreeKV §2.2, StreamingLLM, H2O). */
export const policyDefaults: PolicyParams = {
    streamingllm: {sinks: 4},
    h2o: {heavyRatio: 0.5},
    lethe: {sparseRatio: 400, recentRatio: 0.3, segments: 8, sinks: 4, gamma: 0.95, initialEvictRatio: 0.5, keepInput: 0.5},
    refreekv: {threshold: 0.01, firstM: 4, wholeLayers: 2, mode: "once"}
};

/** Bounds of the settings beside the policy parameters. */
export const budgetLimits = {minCells: 64, maxCells: 1_048_576, maxMib: 1_048_576, minPruneEvery: 1, maxPruneEvery: 4096} as const;

export const kvTypes: {id: CompressionSettings["kvType"], label: string}[] = [
    {id: "f16", label: "F16 (exact)"},
    {id: "q8_0", label: "Q8_0 (about half)"},
    {id: "q4_0", label: "Q4_0 (about a quarter)"}
];

export function policyName(id: PolicyId): string {
    return policies.find((policy) => policy.id === id)?.name ?? id;
}

export function isTunable(id: PolicyId): id is Tunable {
    return id !== "full";
}

/** App defaults of the settings shared by every policy (main/services/schemas.ts). */
export const sharedDefaults: Pick<CompressionSettings, "combine" | "pruneEvery"> = {combine: "aggregate", pruneEvery: 16};

/** The ways per-layer selections become one set of cells (main/engine/policies/types.ts), as the controller offers them. */
export const combineModes: {id: CompressionSettings["combine"], label: string, hint: string}[] = [
    {id: "aggregate", label: "Aggregate", hint: "One selection on scores normalised and summed over layers and heads."},
    {id: "quota", label: "Layer quotas", hint: "Each layer keeps its own top tokens up to its quota; quotas shrink together to fit the budget."},
    {id: "union", label: "Union", hint: "A token is freed only when no layer keeps it; over budget, the lowest-scored go first."}
];

/** ReFreeKV's modes: the paper's single pruning after the prompt, or the 1% test at every round. */
export const refreeKvModes: {id: PolicyParams["refreekv"]["mode"], label: string}[] = [
    {id: "once", label: "Once after the prompt (paper)"},
    {id: "rounds", label: "Every prune round (extension)"}
];
