import type {NativeKv} from "../native/NativeKv.js";
import {protectNewest} from "../policies/decide.js";
import {logSigmoid} from "../policies/scoreMath.js";
import {trimKvHeadKeep} from "../policies/trimkv.js";

export type HeadRoundResult = {
    /** Live cells after the round. */
    live: number;
    /** Cells freed (for every head at once). */
    freed: number;
    /** Tokens no head holds any more, ascending: what the round evicted from the sequence. */
    evicted: Int32Array;
    /** Head contents moved between cells. */
    moves: number;
    /**
     * Every token the round saw (held by some head before it), ascending; per token the share of (layer, KV head) pairs
     * holding it after the round, and per layer `l * n + j` whether any head of layer l does (the memory panel's record).
     */
    seen: Int32Array;
    heldShare: Float32Array;
    heldByLayer: Uint8Array;
};

/**
 * One TRIM-KV round on per-head cells (combine mode `heads`): every (layer, KV head) keeps its own `maxKeep` tokens by its
 * gates (position 0 and the newest tokens first), the kept tokens are moved into one common set of cells (hole filling,
 * `HeadSlots.plan`), and the cells outside it are freed for all heads. The sequence's `HeadSlots` table records which
 * token each head then holds where.
 */
export async function pruneHeadCells(kv: NativeKv, sequenceId: number, maxKeep: number, tokensSeen: number): Promise<HeadRoundResult> {
    const read = await kv.retention(sequenceId);
    const slots = Int32Array.from(read.positions).sort();
    const n = slots.length;
    const layers = read.logits.length;
    const heads = read.heads;
    const table = kv.headSlots(sequenceId, layers, heads);
    if (n <= maxKeep)
        return {
            live: n,
            freed: 0,
            evicted: new Int32Array(0),
            moves: 0,
            seen: slots,
            heldShare: new Float32Array(n).fill(1),
            heldByLayer: new Uint8Array(layers * n).fill(1)
        };

    // the read's cells in slot order, and the token each head holds in each
    const index = new Map(Array.from(read.positions, (slot, k) => [slot, k]));
    const logBeta = new Float32Array(layers * heads * n);
    const tokens = new Int32Array(layers * heads * n);
    for (let l = 0; l < layers; l++)
        for (let h = 0; h < heads; h++) {
            const base = (l * heads + h) * n;
            tokens.set(table.tokensOf(slots, l, h), base);
            for (let j = 0; j < n; j++) {
                const g = read.logits[l]![h * n + index.get(slots[j]!)!];
                // a cell the gates did not see (written before them, restored from a state) is never forgotten: log beta 0
                logBeta[base + j] = g == null || Number.isNaN(g) ? 0 : logSigmoid(g);
            }
        }

    // position 0 and the newest cells stay, as on shared cells (decide); they hold their own token in every head
    const newest = Math.max(1, Math.min(protectNewest, maxKeep - 1));
    const pinnedSlots = [slots[0]!, ...slots.subarray(Math.max(1, n - newest))];
    const kept = trimKvHeadKeep(logBeta, tokens, layers, heads, maxKeep, tokensSeen, new Set(pinnedSlots));
    const plan = table.plan(slots, (l, h) => kept[l * heads + h]!, pinnedSlots);

    const seen = Int32Array.from(new Set(tokens)).sort();
    const at = new Map(Array.from(seen, (token, j) => [token, j]));
    const heldShare = new Float32Array(seen.length);
    const heldByLayer = new Uint8Array(layers * seen.length);
    kept.forEach((list, pair) => {
        const layer = Math.floor(pair / heads);
        for (const token of list) {
            const j = at.get(token)!;
            heldShare[j]! += 1 / kept.length;
            heldByLayer[layer * seen.length + j] = 1;
        }
    });
    const evicted = seen.filter((_, j) => heldShare[j] === 0);

    await kv.moveHeadCells(sequenceId, plan.moves);
    const freed = await kv.evict(sequenceId, plan.free);
    table.apply(plan);
    return {live: n - freed, freed, evicted, moves: plan.moves.length / 4, seen, heldShare, heldByLayer};
}
