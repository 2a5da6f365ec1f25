// What the "What the model still remembers" strip says of a token, and of the whole: pure, for the strip's hover and
// keyboard readout.

import type {RememberedView} from "../state/memory.svelte.js";
import {count} from "./formatMemory.js";

/** Whether `position` is in `ranges` (`toRanges`' form). */
export function inRanges(ranges: readonly number[], position: number): boolean {
    for (let i = 0; i + 1 < ranges.length; i += 2) {
        if (position < ranges[i]!)
            return false;
        if (position < ranges[i + 1]!)
            return true;
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
    return `Remembers ${count(kept)} of ${count(view.tokensSeen)} tokens: ${count(promptTokens - promptForgotten)} of the prompt's ${count(promptTokens)}, ` +
        `${count(answerTokens - answerForgotten)} of the answer's ${count(answerTokens)}.`;
}
