// The compression policies as the app presents them: names, one-line descriptions, and each parameter with the
// papers' defaults and the bounds the backend accepts (main/services/schemas.ts). Defaults are repeated here because
// the renderer does not import main-process code; the tests pin them.

import type {CompressionSettings, KvCacheType, PolicyId, PolicyParams} from "../../preload/contract.js";

/** A paper behind a policy, one click away from its description. */
export type PolicyPaper = {title: string, authors: string, url: string};

export type PolicyInfo = {
    id: PolicyId,
    name: string,
    /** What it keeps, in plain words. */
    keeps: string,
    /** When to choose it. */
    when: string,
    /** `keeps` and `when` in one text (tooltips). */
    description: string,
    paper: PolicyPaper | null
};

function policy(id: PolicyId, name: string, keeps: string, when: string, paper: PolicyPaper | null = null): PolicyInfo {
    return {id, name, keeps, when, description: `${keeps} ${when}`, paper};
}

export const policies: PolicyInfo[] = [
    policy("full", "Full KV", "Keeps every token: the answer is the model's own, unchanged.",
        "Use it while the conversation fits in memory, and to check an answer made under another policy. " +
            "The answer stops when the budget is full."),
    policy("streamingllm", "StreamingLLM", "Keeps the first few tokens and the newest ones; everything in between is forgotten.",
        "Fast and steady for long chats about the last few turns; in long reasoning it loses the question.",
        {title: "Efficient Streaming Language Models with Attention Sinks", authors: "Xiao et al., ICLR 2024",
            url: "https://arxiv.org/abs/2309.17453"}),
    policy("h2o", "H2O", "Keeps the tokens that have drawn the most attention so far, plus the newest.",
        "For long prompts read once; in long reasoning it tends to keep the question and lose the steps already worked out.",
        {title: "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language Models", authors: "Zhang et al., NeurIPS 2023",
            url: "https://arxiv.org/abs/2306.14048"}),
    policy("lethe", "Lethe",
        "Each layer keeps the tokens it still pays attention to (recent attention counts more) and the newest; " +
            "the question stays whole while it fits in half the budget.",
        "Made for long chains of thought in a tight budget, and the best of these on the demo task. " +
            "Check answers that matter against Full KV.",
        {title: "Lethe: Layer- and Time-Adaptive KV Cache Pruning for Reasoning-Intensive LLM Serving", authors: "Zeng et al., AAAI 2026",
            url: "https://arxiv.org/abs/2511.06029"}),
    policy("refreekv", "ReFreeKV",
        "Once the prompt is read, drops the tokens that carry almost none of its attention (under 1% in all); " +
            "after that only the budget removes tokens.",
        "A cautious trim when the budget is large: it frees little, and on the demo task it dropped parts of the question.",
        {title: "Towards Threshold-Free KV Cache Pruning (ReFreeKV)", authors: "Ni et al., 2025", url: "https://arxiv.org/abs/2502.16886"}),
    policy("leankv", "LeanKV", "Drops the tokens that later tokens hardly read (mean attention below α times the average); the newest 64 always stay. No budget of its own: memory follows the attention.",
        "Pair it with K8V4 (Q8_0 keys, Q4_0 values), as its paper does. Its middle tier (less important tokens at a lower precision) needs a cache llama.cpp does not have.",
        {title: "Unifying KV Cache Compression for Large Language Models with LeanKV", authors: "Zhang et al., 2024", url: "https://arxiv.org/abs/2412.03131"}),
    policy("trimkv", "TRIM-KV",
        "Keeps what a small learned gate, read from the model's own hidden state when each token is written, predicts the thought will need; " +
            "a token's hold fades with age at the rate its gate gave it, and the faintest go first.",
        "Needs a gate file trained for the model (beside it, named <model>.retention.gguf); without one it is unavailable.",
        {title: "Cache What Lasts: Token Retention for Memory-Bounded KV Cache in LLMs (TRIM-KV)", authors: "Bui et al., ICLR 2026",
            url: "https://arxiv.org/abs/2512.03324"}),
    policy("lava", "LAVa",
        "Keeps the cells the latest queries attend to, weighted by how large the head's values are, with more cells for the layers whose " +
            "attention is most spread; the newest 32 always stay.",
        "Its layer budgets act under \"Layer quotas\"; the other modes keep its scores but not its budgets.",
        {title: "LAVa: Layer-wise KV Cache Eviction with Dynamic Budget Allocation", authors: "Shen et al., 2025",
            url: "https://arxiv.org/abs/2509.09754"})
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

/** The policies with parameters to tune: Full KV and TRIM-KV have none (TRIM-KV's gates are learned). */
type Tunable = Exclude<PolicyId, "full" | "trimkv">;

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
    ],
    leankv: [
        {key: "alpha", label: "Threshold α", hint: "A token goes when its mean attention is below α times the average (0 keeps all).",
            min: 0, max: 1000, step: 0.05},
        {key: "window", label: "Recent window W", hint: "Newest tokens always kept.", min: 0, max: 65_536, integer: true, step: 1}
    ],
    lava: [
        {key: "window", label: "Window w", hint: "Newest tokens always kept, and the latest queries whose attention counts (Eq. 5).",
            min: 1, max: 65_536, integer: true, step: 1},
        {key: "kernel", label: "Pooling kernel", hint: "Each token's score is the largest of its neighbours' within this width (odd; 1: none).",
            min: 1, max: 63, integer: true, step: 2}
    ]
};

/** The papers' defaults (Lethe §5, ReFreeKV §2.2, StreamingLLM, H2O; LeanKV's W from §4, its α calibrated as its §7.2 does; LAVa §5.1). */
export const policyDefaults: PolicyParams = {
    streamingllm: {sinks: 4},
    h2o: {heavyRatio: 0.5},
    lethe: {sparseRatio: 400, recentRatio: 0.3, segments: 8, sinks: 4, gamma: 0.95, initialEvictRatio: 0.5, keepInput: 0.5},
    refreekv: {threshold: 0.01, firstM: 4, wholeLayers: 2, mode: "once"},
    leankv: {alpha: 1.2, window: 64},
    lava: {window: 32, kernel: 7}
};

/** Bounds of the settings beside the policy parameters. */
export const budgetLimits = {minCells: 64, maxCells: 1_048_576, maxMib: 1_048_576, minPruneEvery: 1, maxPruneEvery: 4096} as const;

/** Cells Full KV keeps free after the prompt for the answer's first tokens (main/engine/budgetCap.ts, `fullKvAnswerRoom`). */
export const fullKvAnswerRoom = 16;

/** The cache types, offered for the keys and for the values each. */
export const kvTypes: {id: KvCacheType, label: string}[] = [
    {id: "f16", label: "F16 (exact)"},
    {id: "q8_0", label: "Q8_0 (about half)"},
    {id: "q4_0", label: "Q4_0 (about a quarter)"}
];

/** LeanKV's recommended pair, K8V4 (§3.1, Fig. 7): keys at 8 bits, values at 4, since keys weigh on every attention weight. */
export const leanKvPair = {kvType: "q8_0", kvTypeV: "q4_0"} as const satisfies Pick<CompressionSettings, "kvType" | "kvTypeV">;

export function policyName(id: PolicyId): string {
    return policies.find((policy) => policy.id === id)?.name ?? id;
}

export function isTunable(id: PolicyId): id is Tunable {
    return id !== "full" && id !== "trimkv";
}

/** App defaults of the settings shared by every policy (main/services/schemas.ts). */
export const sharedDefaults: Pick<CompressionSettings, "combine" | "pruneEvery"> = {combine: "auto", pruneEvery: 16};

/** The ways per-layer selections become one set of cells (main/engine/policies/types.ts), as the controller offers them. */
export const combineModes: {id: CompressionSettings["combine"], label: string, hint: string}[] = [
    {id: "auto", label: "Policy's own", hint: "Aggregate; for TRIM-KV gates trained per layer and head (as its paper trains them), Union over each layer's and head's ranking."},
    {id: "aggregate", label: "Aggregate", hint: "One selection on scores normalised and summed over layers and heads."},
    {id: "quota", label: "Layer quotas", hint: "Each layer keeps its own top tokens up to its quota; quotas shrink together to fit the budget."},
    {id: "union", label: "Union", hint: "A token is freed only when no layer keeps it; over budget, the lowest-scored go first."}
];

/** ReFreeKV's modes: the paper's single pruning after the prompt, or the 1% test at every round. */
export const refreeKvModes: {id: PolicyParams["refreekv"]["mode"], label: string}[] = [
    {id: "once", label: "Once after the prompt (paper)"},
    {id: "rounds", label: "Every prune round (extension)"}
];
