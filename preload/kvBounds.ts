// The bounds of a KV budget and of the prune cadence, written once: the IPC and OpenAI schemas, the budget cap
// (main/kv/budgetCap.ts), the estimate and the renderer's forms read them here. Pure data: main, preload and
// renderer import it.

/** What a KV budget and the prune cadence may be. */
export const kvBounds = {
    /** Smallest KV budget in cells: sinks, a recent window and room for a prompt. */
    minCells: 64,
    /** Most cells a budget may hold (and the cap on a model whose GGUF declares no context length). */
    maxCells: 1_048_576,
    /** Largest KV budget in MiB (1 TiB). */
    maxMib: 1_048_576,
    /** Fewest generated tokens between prune rounds. */
    minPruneEvery: 1,
    /** Most generated tokens between prune rounds. */
    maxPruneEvery: 4096,
    /** Cells Full KV keeps free after the prompt for the answer's first tokens: a longer conversation is refused up front. */
    fullKvAnswerRoom: 16
} as const;
