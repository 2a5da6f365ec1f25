// What the "What the model still remembers" strip says of a token, and of the whole: pure, for the strip's hover and
// keyboard readout.

import {maxTokenScores, policyEntry, tokenScoreAt} from "../../preload/contract.js";
import type {RememberedView} from "../state/memory.svelte.js";
import {count} from "./formatMemory.js";

/** Whether `position` is in `ranges` (`toRanges`' form). */
export function inRanges(ranges: readonly number[], position: number): boolean {
    for (let i = 0; i + 1 < ranges.length; i += 2) {
        if (position < ranges[i]!) return false;
        if (position < ranges[i + 1]!) return true;
    }
    return false;
}

/** `"Token 120 of 640, in the answer · 520 tokens old · forgotten (evicted from memory)"`. */
export function describeRememberedToken(view: RememberedView, position: number): string {
    const where = position >= view.answerStart ? "in the answer" : "in the prompt";
    const age = view.tokensSeen - 1 - position;
    const state = inRanges(view.evicted, position) ? "forgotten (evicted from memory)" : "still in memory";
    return `Token ${count(position + 1)} of ${count(view.tokensSeen)}, ${where} · ${count(age)} token${age === 1 ? "" : "s"} old · ${state}`;
}

/** `"Remembers 320 of 640 tokens: 120 of the prompt's 140, 200 of the answer's 500."`. */
export function describeRemembered(view: RememberedView): string {
    let promptForgotten = 0;
    let answerForgotten = 0;
    for (let i = 0; i + 1 < view.evicted.length; i += 2) {
        const start = Math.max(0, view.evicted[i]!);
        const end = Math.min(view.tokensSeen, view.evicted[i + 1]!);
        promptForgotten += Math.max(0, Math.min(end, view.answerStart) - start);
        answerForgotten += Math.max(0, end - Math.max(start, view.answerStart));
    }
    const promptTokens = view.answerStart;
    const answerTokens = view.tokensSeen - view.answerStart;
    const kept = view.tokensSeen - promptForgotten - answerForgotten;
    return (
        `Remembers ${count(kept)} of ${count(view.tokensSeen)} tokens: ${count(promptTokens - promptForgotten)} of the prompt's ${count(promptTokens)}, ` +
        `${count(answerTokens - answerForgotten)} of the answer's ${count(answerTokens)}.`
    );
}

/** Layers as a person reads them: `"0-3, 5"` (runs of three or more as a range). */
export function describeLayers(layers: readonly number[]): string {
    const parts: string[] = [];
    for (let i = 0; i < layers.length;) {
        let end = i;
        while (end + 1 < layers.length && layers[end + 1] === layers[end]! + 1) end++;
        if (end - i >= 2) parts.push(`${layers[i]}–${layers[end]}`);
        else parts.push(...layers.slice(i, end + 1).map(String));
        i = end + 1;
    }
    return parts.join(", ");
}

/** A score in 3 significant digits, without an exponent down to 0.0001. */
function formatScore(score: number): string {
    return score !== 0 && Math.abs(score) < 1e-4 ? score.toExponential(1) : String(Number(score.toPrecision(3)));
}

/**
 * What the answer's prune rounds knew of the token at `position`: its score under the policy at the last round that saw it
 * (TRIM-KV's retention, the others' attention received) and the layers whose own ranking kept it; or why nothing is known.
 * `"TRIM-KV retention 0.82 at round 12 of 15 · layers whose own ranking would keep it: 0–3, 5 (5 of 6)"`.
 */
export function describeTokenScore(view: RememberedView, position: number): string {
    if (view.policy != null && policyEntry(view.policy).keepsEveryToken) return "Full KV keeps every token: no prune round scores them.";
    const record = tokenScoreAt(view.scores ?? undefined, position);
    if (record == null || view.scores == null) {
        if (view.scores == null)
            return view.live
                ? "No prune round has run yet in this answer."
                : "This answer recorded no token scores (no prune round ran, or it was made before they were recorded).";
        if (view.scores.positions.length > 0 && position < view.scores.positions[0]! && view.scores.positions.length >= maxTokenScores)
            return `No score kept: an answer keeps the scores of its newest ${count(maxTokenScores)} tokens.`;
        if (view.scores.positions.length > 0 && position > view.scores.positions.at(-1)!)
            return "Not scored yet: written after the last prune round.";
        return "No prune round of this answer saw it (an earlier answer had already evicted it).";
    }
    const rounds = view.rounds.at(-1)?.last;
    const at = `at round ${count(record.round)}${rounds != null ? ` of ${count(rounds)}` : ""}`;
    const name = view.policy != null ? policyEntry(view.policy).name : null;
    const score =
        record.score == null
            ? null
            : view.scores.kind === "retention"
              ? `${name ?? "TRIM-KV"} retention ${formatScore(record.score)} ${at}`
              : view.scores.kind === "heads"
                ? `Held by ${Math.round(record.score * 100)}% of the layers' KV heads ${at} (per-head cells)`
                : `${name != null ? `${name}'s score` : "Score"} (attention received) ${formatScore(record.score)} ${at}`;
    const first = score ?? `${name ?? "The policy"} keeps by position, not by a score (last seen ${at})`;
    const layers = view.scores.layers;
    const keeping = `${view.scores.kind === "heads" ? "layers where a head holds it" : "layers whose own ranking would keep it"}: ${
        record.keptBy.length === 0
            ? "none"
            : record.keptBy.length === layers
              ? `all ${count(layers)}`
              : `${describeLayers(record.keptBy)} (${count(record.keptBy.length)} of ${count(layers)})`
    }`;
    return `${first} · ${keeping}`;
}
