import type {KvSample, MessageStats} from "../../preload/contract.js";
import {maxPruneRounds, maxTokenScores, mergeTokenScores, pushRound} from "../../preload/tokenScores.js";
import {pushSample} from "./pushSample.js";

/**
 * Stores a memory sample with an answer's statistics: the sample itself in `samples` (thinned past `maxSamples`), what
 * its rounds recorded of the tokens in `tokens` (the newest `maxTokenScores` positions) and its rounds in `rounds`
 * (merged pairwise past `maxPruneRounds`), so the stored samples stay as small as before.
 */
export function recordSample(stats: MessageStats, sample: KvSample, maxSamples: number): void {
    const {tokens, rounds, ...lean} = sample;
    if (tokens != null) stats.tokens = mergeTokenScores(stats.tokens, tokens, maxTokenScores);
    for (const round of rounds ?? []) pushRound((stats.rounds ??= []), round, maxPruneRounds);
    pushSample(stats.samples, lean, maxSamples);
}
