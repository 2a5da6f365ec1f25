// The compression policies' parameters as data: each tunable policy's numbers with their bounds, step and default, and
// its choices with their options. The catalogue (policyCatalogue.ts) lists each under its policy; the settings and
// OpenAI schemas, the stored records and the controller's form derive from them. Defaults are the papers' (Lethe §5,
// ReFreeKV §2.2, StreamingLLM, H2O; LeanKV's W from §4, its α calibrated as its §7.2 does; LAVa §5.1); each module in
// main/engine/policies says where each comes from.

/** A number a policy takes: the bounds the backend accepts and the form checks, and the form's step. */
export type NumberParam = {
    key: string;
    label: string;
    /** What it does, in a line under the field. */
    hint: string;
    default: number;
    min: number;
    max: number;
    /** `min` itself is refused (`> min`). Defaults to `false`. */
    minExclusive?: boolean;
    /** `max` itself is refused (`< max`). Defaults to `false`. */
    maxExclusive?: boolean;
    /** Whole numbers only. Defaults to `false`. */
    integer?: boolean;
    /** Odd numbers only (a pooling kernel); the form steps by 2 and leaves this check to the backend. Defaults to `false`. */
    odd?: boolean;
    step: number;
    /** The backend's words when a check fails, where they say more than the bound; unset: zod's own. Defaults to none. */
    messages?: {min?: string; max?: string; odd?: string};
};

/** A choice among named options (ReFreeKV's mode). */
export type ChoiceParam = {
    key: string;
    label: string;
    hint: string;
    default: string;
    /** Each option: its id, its label in the form, and how an answer's settings name it in a sentence. */
    options: readonly {id: string; label: string; inWords: string}[];
};

export type PolicyParam = NumberParam | ChoiceParam;

/** StreamingLLM's: the attention sinks kept beside the recent window. */
export const streamingLlmParams = [
    {
        key: "sinks",
        label: "Sink tokens",
        hint: "First tokens always kept (attention sinks).",
        default: 4,
        min: 0,
        max: 256,
        integer: true,
        step: 1
    }
] as const satisfies readonly PolicyParam[];

/** H2O's: how the budget divides between heavy hitters and the recent window. */
export const h2oParams = [
    {
        key: "heavyRatio",
        label: "Heavy-hitter share",
        hint: "Share of the budget for heavy hitters; the rest is the recent window.",
        default: 0.5,
        min: 0.05,
        max: 0.95,
        step: 0.05
    }
] as const satisfies readonly PolicyParam[];

/** Lethe's: its sparsity test, recent share, segments, sinks, decay (RASR) and how long the question stays whole. */
export const letheParams = [
    {
        key: "sparseRatio",
        label: "Sparsity ratio τ",
        hint: "A segment is salient while top score / its score ≤ τ.",
        default: 400,
        min: 1,
        minExclusive: true,
        max: 1e9,
        step: 10,
        messages: {min: "tau (sparse_ratio) must be above 1"}
    },
    {
        key: "recentRatio",
        label: "Recent share",
        hint: "Share of the cache always kept as the newest tokens.",
        default: 0.3,
        min: 0,
        max: 0.9,
        step: 0.05
    },
    {
        key: "segments",
        label: "Segments D",
        hint: "Cut points tested per layer in the sorted scores.",
        default: 8,
        min: 2,
        max: 256,
        integer: true,
        step: 1
    },
    {key: "sinks", label: "Sink tokens", hint: "First tokens always kept.", default: 4, min: 0, max: 256, integer: true, step: 1},
    {
        key: "gamma",
        label: "Decay γ",
        hint: "Decay of accumulated attention (RASR, Eq. 5).",
        default: 0.95,
        min: 0,
        minExclusive: true,
        max: 1,
        step: 0.01
    },
    {
        key: "initialEvictRatio",
        label: "First prune at",
        hint: "Share of the budget filled before a layer first prunes.",
        default: 0.5,
        min: 0.05,
        max: 1,
        step: 0.05
    },
    {
        key: "keepInput",
        label: "Keep the question up to",
        hint: "Keeps the question and earlier turns whole while they take at most this share of the budget (0: never).",
        default: 0.5,
        min: 0,
        max: 1,
        step: 0.05
    }
] as const satisfies readonly PolicyParam[];

/** ReFreeKV's: the loss threshold, the leading tokens and layers it spares, and when it prunes. */
export const refreeKvParams = [
    {
        key: "threshold",
        label: "Loss threshold T",
        hint: "Largest relative loss of attention norm a layer may drop.",
        default: 0.01,
        min: 0,
        minExclusive: true,
        max: 1,
        maxExclusive: true,
        step: 0.005,
        messages: {min: "T must be above 0", max: "T must be below 1"}
    },
    {
        key: "firstM",
        label: "First tokens m",
        hint: "Leading tokens ranked ahead of all others.",
        default: 4,
        min: 0,
        max: 256,
        integer: true,
        step: 1
    },
    {
        key: "wholeLayers",
        label: "Whole layers",
        hint: "First layers that keep every token.",
        default: 2,
        min: 0,
        max: 16,
        integer: true,
        step: 1
    },
    {
        key: "mode",
        label: "Prune",
        hint: "The paper tests the 1% loss once per prompt; the budget evicts by the same ranking after.",
        default: "once",
        options: [
            {id: "once", label: "Once after the prompt (paper)", inWords: "once after the prompt"},
            {id: "rounds", label: "Every prune round (extension)", inWords: "every prune round"}
        ]
    }
] as const satisfies readonly PolicyParam[];

/** LeanKV's: the attention threshold α and the recent window W. */
export const leanKvParams = [
    {
        key: "alpha",
        label: "Threshold α",
        hint: "A token goes when its mean attention is below α times the average (0 keeps all).",
        default: 1.2,
        min: 0,
        max: 1000,
        step: 0.05,
        messages: {min: "alpha must be 0 (prune nothing) or more"}
    },
    {
        key: "window",
        label: "Recent window W",
        hint: "Newest tokens always kept.",
        default: 64,
        min: 0,
        max: 65_536,
        integer: true,
        step: 1
    }
] as const satisfies readonly PolicyParam[];

/** LAVa's: the window of recent queries and the pooling kernel. */
export const lavaParams = [
    {
        key: "window",
        label: "Window w",
        hint: "Newest tokens always kept, and the latest queries whose attention counts (Eq. 5).",
        default: 32,
        min: 1,
        max: 65_536,
        integer: true,
        step: 1,
        messages: {min: "the window w must be at least 1 token"}
    },
    {
        key: "kernel",
        label: "Pooling kernel",
        hint: "Each token's score is the largest of its neighbours' within this width (odd; 1: none).",
        default: 7,
        min: 1,
        max: 63,
        integer: true,
        odd: true,
        step: 2,
        messages: {odd: "the pooling kernel must be odd"}
    }
] as const satisfies readonly PolicyParam[];
