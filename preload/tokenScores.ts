// What prune rounds record of the tokens they see, and the rounds themselves, in bounded lists: pure, read by the engine
// (which writes them), the chat service (which stores them with an answer) and the renderer (which shows them).

import type {PruneRound, TokenScores} from "./contract/compression.js";
import {mergeRanges} from "./positionRanges.js";

/** Most tokens whose scores an answer keeps: the newest positions. */
export const maxTokenScores = 4096;
/** Most prune rounds an answer keeps before neighbours merge. */
export const maxPruneRounds = 128;

/** What one token's record says: its score, the round that recorded it, and the layers whose own ranking kept it. */
export type TokenScore = {score: number | null; round: number; keptBy: number[]};

/**
 * The union of two records, `newer`'s entry winning where both hold a position, keeping the newest `cap` positions.
 * `older` may be absent (nothing recorded yet).
 */
export function mergeTokenScores(older: TokenScores | undefined, newer: TokenScores, cap = maxTokenScores): TokenScores {
    const out: TokenScores = {kind: newer.kind, layers: newer.layers, positions: [], scores: [], rounds: [], keptBy: []};
    const push = (from: TokenScores, i: number) => {
        out.positions.push(from.positions[i]!);
        out.scores.push(from.scores[i] ?? null);
        out.rounds.push(from.rounds[i]!);
        out.keptBy.push(from.keptBy[i]!);
    };
    const a = older == null || older.kind !== newer.kind || older.layers !== newer.layers ? null : older;
    let i = 0;
    let j = 0;
    while ((a != null && i < a.positions.length) || j < newer.positions.length) {
        const left = a != null && i < a.positions.length ? a.positions[i]! : Infinity;
        const right = j < newer.positions.length ? newer.positions[j]! : Infinity;
        if (left < right) push(a!, i++);
        else {
            push(newer, j++);
            if (left === right) i++;
        }
    }
    const drop = Math.max(0, out.positions.length - Math.max(0, cap));
    if (drop > 0) for (const list of [out.positions, out.scores, out.rounds, out.keptBy]) list.splice(0, drop);
    return out;
}

/** The layers a `keptBy` entry names, ascending (its first hex digit covers layers 0-3, layer 0 the lowest bit). */
export function layersOfHex(hex: string, layers: number): number[] {
    const out: number[] = [];
    for (let digit = 0; digit < hex.length; digit++) {
        const bits = Number.parseInt(hex[digit]!, 16);
        for (let bit = 0; bit < 4; bit++) if (((bits >> bit) & 1) === 1 && digit * 4 + bit < layers) out.push(digit * 4 + bit);
    }
    return out;
}

/** `keptBy`'s form of one cell's row of a per-layer keep mask (`mask[l * stride + j]`, 1 kept). */
export function hexOfLayers(mask: Uint8Array, layers: number, stride: number, j: number): string {
    let hex = "";
    for (let l = 0; l < layers; l += 4) {
        let bits = 0;
        for (let bit = 0; bit < 4 && l + bit < layers; bit++) bits |= (mask[(l + bit) * stride + j]! & 1) << bit;
        hex += bits.toString(16);
    }
    return hex;
}

/** What the record says of `position`, or `null` when no round recorded it (or the cap dropped it). */
export function tokenScoreAt(scores: TokenScores | undefined, position: number): TokenScore | null {
    if (scores == null) return null;
    let low = 0;
    let high = scores.positions.length - 1;
    while (low <= high) {
        const middle = (low + high) >> 1;
        const at = scores.positions[middle]!;
        if (at === position)
            return {
                score: scores.scores[middle] ?? null,
                round: scores.rounds[middle]!,
                keptBy: layersOfHex(scores.keptBy[middle]!, scores.layers)
            };
        if (at < position) low = middle + 1;
        else high = middle - 1;
    }
    return null;
}

/** Appends a round; past `cap`, neighbours merge pairwise (the later one's step and tokens, both evictions), oldest first. */
export function pushRound(rounds: PruneRound[], round: PruneRound, cap = maxPruneRounds): void {
    rounds.push(round);
    if (rounds.length <= Math.max(2, cap)) return;
    const merged: PruneRound[] = [];
    for (let i = 0; i < rounds.length; i += 2) {
        const a = rounds[i]!;
        const b = rounds[i + 1];
        merged.push(
            b == null
                ? a
                : {first: a.first, last: b.last, step: b.step, tokensSeen: b.tokensSeen, evicted: mergeRanges(a.evicted, b.evicted)}
        );
    }
    rounds.splice(0, rounds.length, ...merged);
}

/** What the answer had evicted once `rounds[index]` had run: the union of its evictions up to it (`toRanges`' form). */
export function evictedThrough(rounds: readonly PruneRound[], index: number): number[] {
    let evicted: number[] = [];
    for (let i = 0; i <= Math.min(index, rounds.length - 1); i++) evicted = mergeRanges(evicted, rounds[i]!.evicted);
    return evicted;
}
