// The compression policies as data, written once: each one's id, name, plain description, paper, what it reads at a
// prune round, how the engine and the app treat it (whether it prunes at all, when, how its layers combine, the cache
// types it pairs with), and its parameters (policyParams.ts: their bounds and defaults). The IPC and OpenAI schemas,
// the stored records, the renderer's lists and forms and the engine's registry are derived from it
// (main/services/schemas.ts, renderer/lib/policies.ts, main/engine/policies/index.ts). Pure data: main, preload and
// renderer import it.
//
// Adding a policy: an entry here and its module in main/engine/policies (registered in its index.ts, which the compiler
// holds to this list). Code elsewhere reads these properties and never compares a policy id (a test holds it to that):
// behaviour that varies by policy is a property here (docs/CONTRIBUTING.md).

import type {KvCacheType} from "./contract/compression.js";
import {
    h2oParams,
    lavaParams,
    leanKvParams,
    letheParams,
    refreeKvParams,
    streamingLlmParams,
    type NumberParam,
    type PolicyParam
} from "./policyParams.js";

export type {ChoiceParam, NumberParam, PolicyParam} from "./policyParams.js";

/** A paper behind a policy, one click away from its description. */
export type PolicyPaper = {title: string; authors: string; url: string};

/** What a policy reads at a prune round besides the cells' positions. */
export type PolicyReads = {
    /** Attention scores (scoring is off for the policies that read none). */
    scores: boolean;
    /** The learned retention gates' log beta (a gate file beside the model). */
    gates: boolean;
    /** The cells' value L1 norms. */
    valueNorms: boolean;
};

/** The K and V cache types a policy's paper runs it with, and what the controller says under them while it is chosen. */
export type CachePair = {kvType: KvCacheType; kvTypeV: KvCacheType; note: string};

export type PolicyEntry = {
    id: string;
    /** The name the app shows. */
    name: string;
    /** What it keeps, in plain words. */
    keeps: string;
    /** When to choose it. */
    when: string;
    paper: PolicyPaper | null;
    reads: PolicyReads;
    /**
     * Never frees a cell: it reads nothing and needs neither the patched build nor an architecture compression supports;
     * it stops at its budget (and refuses a prompt that leaves the answer too little room); its cache is the whole
     * sequence (a prefix the next turn reuses, a state kept on disk); Compare with Full KV checks the others against it.
     */
    keepsEveryToken: boolean;
    /** A prune round runs as soon as the answer's input is read, before the cadence's first (ReFreeKV's once-per-prompt test). */
    prunesAfterPrompt: boolean;
    /**
     * What the combine setting `auto` means for it: `aggregate`; `heads`, per-head cells (where the bench measured them
     * ahead of shared cells); or `gates`: the mode its retention gates were trained under, read from the gate file
     * (main/engine/policies/decide.ts `resolveCombine`).
     */
    ownCombine: "aggregate" | "heads" | "gates";
    /**
     * Whether it can keep each (layer, KV head)'s own tokens (the combine mode `heads`, per-head cells): its paper ranks
     * per head by scores that differ between heads (TRIM-KV's gates, H2O's attention) or per layer (Lethe, at equal counts:
     * every head of a layer keeps the layer's tokens), and the engine moves heads between cells for it. ReFreeKV ranks by
     * position, the same in every head: its heads would keep the same cells.
     */
    headCells: boolean;
    /** The cache types its paper runs it with (LeanKV's K8V4); `null`: none in particular. */
    pairsWith: CachePair | null;
    /**
     * Its own per-layer budgets in a line, where it has them: they act only under the `quota` combine mode, and the
     * controller says so under any other. `null`: none.
     */
    layerBudgets: string | null;
    /** Its parameters in the order the controller shows them (numbers, then choices); none for a policy with nothing to tune. */
    params: readonly PolicyParam[];
};

const nothing = {scores: false, gates: false, valueNorms: false} as const satisfies PolicyReads;
const scores = {scores: true, gates: false, valueNorms: false} as const satisfies PolicyReads;

/** Every policy, in the order the app lists them; their parameters, with the papers' defaults, are in policyParams.ts. */
export const policyCatalogue = [
    {
        id: "full",
        name: "Full KV",
        keeps: "Keeps every token: the answer is the model's own, unchanged.",
        when:
            "Use it while the conversation fits in memory, and to check an answer made under another policy. " +
            "The answer stops when the budget is full.",
        paper: null,
        reads: nothing,
        keepsEveryToken: true,
        prunesAfterPrompt: false,
        ownCombine: "aggregate",
        headCells: false,
        pairsWith: null,
        layerBudgets: null,
        params: []
    },
    {
        id: "streamingllm",
        name: "StreamingLLM",
        keeps: "Keeps the first few tokens and the newest ones; everything in between is forgotten.",
        when: "Fast and steady for long chats about the last few turns; in long reasoning it loses the question.",
        paper: {
            title: "Efficient Streaming Language Models with Attention Sinks",
            authors: "Xiao et al., ICLR 2024",
            url: "https://arxiv.org/abs/2309.17453"
        },
        reads: nothing,
        keepsEveryToken: false,
        prunesAfterPrompt: false,
        ownCombine: "aggregate",
        headCells: false,
        pairsWith: null,
        layerBudgets: null,
        params: streamingLlmParams
    },
    {
        id: "h2o",
        name: "H2O",
        keeps: "Keeps the tokens that have drawn the most attention so far, plus the newest.",
        when: "For long prompts read once; in long reasoning it tends to keep the question and lose the steps already worked out.",
        paper: {
            title: "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language Models",
            authors: "Zhang et al., NeurIPS 2023",
            url: "https://arxiv.org/abs/2306.14048"
        },
        reads: scores,
        keepsEveryToken: false,
        prunesAfterPrompt: false,
        ownCombine: "heads",
        headCells: true,
        pairsWith: null,
        layerBudgets: null,
        params: h2oParams
    },
    {
        id: "lethe",
        name: "Lethe",
        keeps:
            "Each layer keeps the tokens it still pays attention to (recent attention counts more) and the newest; " +
            "the question stays whole while it fits in half the budget.",
        when:
            "Made for long chains of thought in a tight budget, and the best of these on the demo task. " +
            "Check answers that matter against Full KV.",
        paper: {
            title: "Lethe: Layer- and Time-Adaptive KV Cache Pruning for Reasoning-Intensive LLM Serving",
            authors: "Zeng et al., AAAI 2026",
            url: "https://arxiv.org/abs/2511.06029"
        },
        reads: scores,
        keepsEveryToken: false,
        prunesAfterPrompt: false,
        ownCombine: "aggregate",
        headCells: true,
        pairsWith: null,
        layerBudgets: null,
        params: letheParams
    },
    {
        id: "refreekv",
        name: "ReFreeKV",
        keeps:
            "Once the prompt is read, drops the tokens that carry almost none of its attention (under 1% in all); " +
            "after that only the budget removes tokens.",
        when: "A cautious trim when the budget is large: it frees little, and on the demo task it dropped parts of the question.",
        paper: {
            title: "Towards Threshold-Free KV Cache Pruning (ReFreeKV)",
            authors: "Ni et al., 2025",
            url: "https://arxiv.org/abs/2502.16886"
        },
        reads: scores,
        keepsEveryToken: false,
        prunesAfterPrompt: true,
        ownCombine: "aggregate",
        headCells: false,
        pairsWith: null,
        layerBudgets: null,
        params: refreeKvParams
    },
    {
        id: "leankv",
        name: "LeanKV",
        keeps:
            "Drops the tokens that later tokens hardly read (mean attention below α times the average); the newest 64 always stay. " +
            "No budget of its own: memory follows the attention.",
        when:
            "Pair it with K8V4 (Q8_0 keys, Q4_0 values), as its paper does. " +
            "Its middle tier (less important tokens at a lower precision) needs a cache llama.cpp does not have.",
        paper: {
            title: "Unifying KV Cache Compression for Large Language Models with LeanKV",
            authors: "Zhang et al., 2024",
            url: "https://arxiv.org/abs/2412.03131"
        },
        reads: scores,
        keepsEveryToken: false,
        prunesAfterPrompt: false,
        ownCombine: "aggregate",
        headCells: false,
        pairsWith: {
            kvType: "q8_0",
            kvTypeV: "q4_0",
            note:
                "Its middle tier, less important tokens at a lower precision, needs more than one precision per layer, which " +
                "llama.cpp's cache does not have: every kept token stays at this pair."
        },
        layerBudgets: null,
        params: leanKvParams
    },
    {
        id: "trimkv",
        name: "TRIM-KV",
        keeps:
            "Keeps what a small learned gate, read from the model's own hidden state when each token is written, " +
            "predicts the thought will need; a token's hold fades with age at the rate its gate gave it, and the faintest go first.",
        when: "Needs a gate file trained for the model (beside it, named <model>.retention.gguf); without one it is unavailable.",
        paper: {
            title: "Cache What Lasts: Token Retention for Memory-Bounded KV Cache in LLMs (TRIM-KV)",
            authors: "Bui et al., ICLR 2026",
            url: "https://arxiv.org/abs/2512.03324"
        },
        reads: {scores: false, gates: true, valueNorms: false},
        keepsEveryToken: false,
        prunesAfterPrompt: false,
        ownCombine: "gates",
        headCells: true,
        pairsWith: null,
        layerBudgets: null,
        // Its gates are learned: nothing to tune.
        params: []
    },
    {
        id: "lava",
        name: "LAVa",
        keeps:
            "Keeps the cells the latest queries attend to, weighted by how large the head's values are, " +
            "with more cells for the layers whose attention is most spread; the newest 32 always stay.",
        when: 'Its layer budgets act under "Layer quotas"; the other modes keep its scores but not its budgets.',
        paper: {
            title: "LAVa: Layer-wise KV Cache Eviction with Dynamic Budget Allocation",
            authors: "Shen et al., 2025",
            url: "https://arxiv.org/abs/2509.09754"
        },
        reads: {scores: true, gates: false, valueNorms: true},
        keepsEveryToken: false,
        prunesAfterPrompt: false,
        ownCombine: "aggregate",
        headCells: false,
        pairsWith: null,
        layerBudgets: "LAVa's layer budgets (more cells for the layers whose attention is most spread) act under Layer quotas.",
        params: lavaParams
    }
] as const satisfies readonly PolicyEntry[];

type Entry = (typeof policyCatalogue)[number];

export type PolicyId = Entry["id"];

type EntryOf<Id extends PolicyId> = Extract<Entry, {id: Id}>;

/**
 * The entries whose properties contradict each other: none, or this file does not compile. A policy that keeps every
 * token reads nothing, has nothing to tune and never prunes; one whose `auto` combine follows its gates reads them.
 */
type Contradictory = {
    [Id in PolicyId]: EntryOf<Id> extends {keepsEveryToken: true}
        ? EntryOf<Id> extends {reads: typeof nothing; params: readonly []; prunesAfterPrompt: false; layerBudgets: null}
            ? never
            : Id
        : EntryOf<Id> extends {ownCombine: "gates"}
          ? EntryOf<Id>["reads"]["gates"] extends true
              ? never
              : Id
          : EntryOf<Id> extends {ownCombine: "heads"}
            ? EntryOf<Id> extends {headCells: true}
                ? never
                : Id
            : never;
}[PolicyId];
const consistent: [Contradictory] extends [never] ? true : Contradictory = true;
void consistent;

/** The policies with parameters to tune (all but Full KV and TRIM-KV). */
export type TunablePolicyId = {[Id in PolicyId]: EntryOf<Id>["params"] extends readonly [] ? never : Id}[PolicyId];

type ValueOf<P> = P extends {options: readonly {id: infer Option}[]} ? Option : number;

/** Each tunable policy's parameters: a number each, or one of a choice's options. */
export type PolicyParams = {[Id in TunablePolicyId]: {-readonly [P in EntryOf<Id>["params"][number] as P["key"]]: ValueOf<P>}};

/** Every policy id, in the catalogue's order. */
export const policyIds = policyCatalogue.map((entry) => entry.id) as readonly PolicyId[] as readonly [PolicyId, ...PolicyId[]];

export function policyEntry(id: PolicyId): PolicyEntry {
    const entry = policyCatalogue.find((candidate) => candidate.id === id);
    if (entry == null) throw new Error(`No policy ${JSON.stringify(id)} in the catalogue`);
    return entry;
}

export function policyName(id: PolicyId): string {
    return policyEntry(id).name;
}

export function isTunable(id: PolicyId): id is TunablePolicyId {
    return policyEntry(id).params.length > 0;
}

/** The tunable policies, in the catalogue's order. */
export const tunablePolicyIds = policyIds.filter(isTunable);

export function isNumberParam(param: PolicyParam): param is NumberParam {
    return !("options" in param);
}

/** A fresh copy of a tunable policy's defaults. */
export function defaultParams<Id extends TunablePolicyId>(id: Id): PolicyParams[Id] {
    return Object.fromEntries(policyEntry(id).params.map((param) => [param.key, param.default])) as PolicyParams[Id];
}

/** A fresh copy of every tunable policy's defaults. */
export function defaultPolicyParams(): PolicyParams {
    return Object.fromEntries(tunablePolicyIds.map((id) => [id, defaultParams(id)])) as PolicyParams;
}
