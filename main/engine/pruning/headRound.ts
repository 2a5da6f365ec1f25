import type {NativeKv} from "../native/NativeKv.js";
import {protectNewest} from "../policies/decide.js";
import {kvHeadOf} from "../policies/scoreMath.js";
import type {HeadCellsSnapshot, Policy, PruneTarget} from "../policies/types.js";
import {indexTokens} from "./HeadSlots.js";
import {columnsIn, retentionLogBeta} from "./toPolicySnapshot.js";

export type HeadRoundResult = {
    /** Live cells after the round. */
    live: number;
    /** Cells freed (for every head at once). */
    freed: number;
    /** Tokens no head holds any more, ascending: what the round evicted from the sequence. */
    evicted: Int32Array;
    /** Head contents moved between cells. */
    moves: number;
    /** Milliseconds the engine took to move them and free the cells (by `now`; 0 without it). */
    movingMs: number;
    /**
     * Every token the round saw (held by some head before it), ascending; per token the share of (layer, KV head) pairs
     * holding it after the round, and per layer `l * n + j` whether any head of layer l does (the memory panel's record).
     */
    seen: Int32Array;
    layers: number;
    heldShare: Float32Array;
    heldByLayer: Uint8Array;
};

/**
 * One round on per-head cells (combine mode `heads`): every (layer, KV head) keeps its own `maxKeep` tokens by the
 * policy's `keepPerHead` (position 0 and the newest tokens first), the kept tokens are moved into one common set of cells
 * (hole filling, `HeadSlots.plan`), and the cells outside it are freed for all heads. The sequence's `HeadSlots` table
 * records which token each head then holds where.
 */
export async function pruneHeadCells<Params>(
    kv: NativeKv,
    sequenceId: number,
    policy: Policy<Params, unknown>,
    params: Params,
    {maxKeep, tokensSeen, inputEnd, now}: Pick<PruneTarget, "maxKeep" | "inputEnd"> & {tokensSeen: number; now?: () => number}
): Promise<HeadRoundResult> {
    if (policy.keepPerHead == null) throw new Error(`per-head cells: the policy ${policy.id} keeps shared cells only`);
    const needs = policy.needs(params);
    const read = await readHeadCells(kv, sequenceId, needs.retention === true, needs.scores !== false);
    const {slots, layers, heads} = read;
    const n = slots.length;
    if (n <= maxKeep)
        return {
            live: n,
            freed: 0,
            evicted: new Int32Array(0),
            moves: 0,
            movingMs: 0,
            seen: slots,
            layers,
            heldShare: new Float32Array(n).fill(1),
            heldByLayer: new Uint8Array(layers * n).fill(1)
        };

    // the token each head holds in each cell
    const table = kv.headSlots(sequenceId, layers, heads);
    const tokens = table.tokensHeld(slots);
    const snapshot: HeadCellsSnapshot = {layers, heads, n, tokens, retention: read.retention, accumulated: read.accumulated};

    // position 0 and the newest cells stay, as on shared cells (decide); they hold their own token in every head
    const newest = Math.max(1, Math.min(protectNewest, maxKeep - 1));
    const pinnedSlots = [slots[0]!, ...slots.subarray(Math.max(1, n - newest))];
    const kept = policy.keepPerHead(snapshot, params, {count: Math.min(n, maxKeep), tokensSeen, pinned: new Set(pinnedSlots), inputEnd});
    // every token some head held, ascending, and each one's index among them
    const index = indexTokens(tokens);
    const plan = table.plan(slots, (l, h) => kept[l * heads + h]!, pinnedSlots, {tokens, index});
    const {seen, at} = index;
    const count = seen.length;
    const heldShare = new Float32Array(count);
    const heldByLayer = new Uint8Array(layers * count);
    const share = 1 / kept.length;
    for (let pair = 0; pair < kept.length; pair++) {
        const list = kept[pair]!;
        const row = Math.floor(pair / heads) * count;
        for (let i = 0; i < list.length; i++) {
            const j = at[list[i]!]!;
            heldShare[j]! += share;
            heldByLayer[row + j] = 1;
        }
    }
    const evicted = seen.filter((_, j) => heldShare[j] === 0);

    const moving = now?.() ?? 0;
    await kv.moveHeadCells(sequenceId, plan.moves);
    const freed = await kv.evict(sequenceId, plan.free);
    const movingMs = (now?.() ?? 0) - moving;
    table.apply(plan);
    return {live: n - freed, freed, evicted, moves: plan.moves.length / 4, movingMs, seen, layers, heldShare, heldByLayer};
}

type HeadCellsRead = {
    /** The live cells, ascending. */
    slots: Int32Array;
    layers: number;
    /** KV heads. */
    heads: number;
    /** Per pair and cell (in `slots`' order), the gates' log beta; 0 for a cell the gates did not see. */
    retention?: Float32Array;
    /** Per pair and cell, the attention received summed over the KV head's query heads. */
    accumulated?: Float32Array;
};

/** The per-head read-outs a round needs, laid out per (layer, KV head) pair over the live cells in slot order. */
async function readHeadCells(kv: NativeKv, sequenceId: number, retention: boolean, scores: boolean): Promise<HeadCellsRead> {
    const gates = retention ? await kv.retention(sequenceId) : null;
    const attention = scores ? await kv.scores(sequenceId) : null;
    const source = gates?.positions ?? attention?.positions;
    if (source == null) throw new Error("per-head cells: the policy reads neither gates nor scores");
    const slots = Int32Array.from(source).sort();
    const n = slots.length;
    const layers = gates?.logits.length ?? attention!.layers.length;
    const heads = gates?.heads ?? kv.kvHeads;
    const read: HeadCellsRead = {slots, layers, heads};

    // a cell the gates did not see (written before them, restored from a state) is never forgotten: log beta 0
    if (gates != null) read.retention = retentionLogBeta(gates, slots, layers);
    if (attention != null) {
        const kvHead = Array.from({length: attention.heads}, (_, q) => kvHeadOf(q, attention.heads, heads));
        const m = attention.positions.length;
        // each slot's column in the score read-out (-1: the read-out did not see it)
        const column = columnsIn(attention.positions, slots);
        const summed = new Float32Array(layers * heads * n);
        for (let l = 0; l < layers; l++) {
            const row = attention.layers[l]?.accumulated;
            if (row == null) continue;
            for (let q = 0; q < attention.heads; q++) {
                const base = (l * heads + kvHead[q]!) * n;
                for (let j = 0; j < n; j++) {
                    const k = column[j]!;
                    if (k >= 0) summed[base + j]! += row[q * m + k]!;
                }
            }
        }
        read.accumulated = summed;
    }
    return read;
}
