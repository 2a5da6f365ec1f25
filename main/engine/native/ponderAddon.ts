// The one place that reaches into node-llama-cpp's internals for Ponder's native API: the addon bindings of a Llama
// (`llama._bindings`), the AddonContext of a LlamaContext (`context._ctx`) and the context size node-llama-cpp counts
// positions against (`context._contextSize`). All are internal to node-llama-cpp 3.22.1 (pinned); native/patches/0003
// adds the `ponder*` members.
import type {Llama, LlamaContext} from "node-llama-cpp";

/** Native API version this code needs; matches PONDER_PATCH_VERSION in native/patches (addon/PonderKv.h). */
export const PONDER_PATCH_VERSION = 3;

export type PonderBindings = {
    ponderPatchVersion?: number,
    ponderSeriesHash?: string
};

export type PonderAddonKvStats = {
    cellsAllocated: number,
    cellsUsed: number,
    bytesPerCell: number,
    layers: number,
    tokensEvicted: number,
    pruneCalls: number,
    scoring: boolean
};

export type PonderAddonScores = {
    /** Position of each live cell of the sequence, in cell order (`n` cells). */
    positions: Int32Array,
    /** Heads of the scores (the query heads; the most of any layer). */
    heads: number,
    /** Per layer, `heads * n` floats, head-major: `[h * n + j]` is head h's score of cell j. */
    accumulated: Float32Array[],
    /** Same layout as `accumulated`: the scores of the last decode. */
    last: Float32Array[]
};

export type PonderAddonContext = {
    ponderEvict(sequenceId: number, positions: Int32Array): number,
    ponderGetKvStats(): PonderAddonKvStats,
    ponderSetAttnScore(enabled: boolean, rows: number, squared: boolean, gamma: number): void,
    ponderGetAttnScores(sequenceId: number): PonderAddonScores
};

type WithBindings = {_bindings?: PonderBindings};
type WithAddonContext = {_ctx?: Partial<PonderAddonContext>};

export function ponderBindingsOf(llama: Llama): PonderBindings {
    return (llama as unknown as WithBindings)._bindings ?? {};
}

/** The AddonContext of `context` with Ponder's methods, or `null` when the loaded binary does not have them. */
export function ponderContextOf(context: LlamaContext): PonderAddonContext | null {
    const addonContext = (context as unknown as WithAddonContext)._ctx;
    if (addonContext == null)
        return null;

    const methods = ["ponderEvict", "ponderGetKvStats", "ponderSetAttnScore", "ponderGetAttnScores"] as const;
    if (!methods.every((method) => typeof addonContext[method] === "function"))
        return null;

    return addonContext as PonderAddonContext;
}

type WithContextSize = {_contextSize: number};

/** Sets the size node-llama-cpp checks positions against (`context.contextSize`), not the KV cache's size. */
export function setLogicalContextSize(context: LlamaContext, size: number): void {
    const internal = context as unknown as WithContextSize;
    if (typeof internal._contextSize !== "number")
        throw new Error("node-llama-cpp's LlamaContext has no _contextSize: main/engine/native needs updating for this version");
    internal._contextSize = size;
}
