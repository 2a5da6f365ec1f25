// A finished thought cut into the spans the cache still holds and the spans it evicted ("Show what was forgotten"):
// pure, from the thought's chunks (MessageStats.thoughtChunks) and the answer's evicted positions.

import {maskOfRanges} from "../../preload/contract.js";

export type ThoughtSpan = {text: string; forgotten: boolean};

/**
 * `thinking` as spans, forgotten where every position of a chunk was evicted: the thought's token `k` sits at position
 * `answerStart + k` (the answer's first generated token is the thought's first). Characters past the recorded chunks
 * stay as kept.
 */
export function thoughtSpans(thinking: string, chunks: readonly number[], answerStart: number, evicted: readonly number[]): ThoughtSpan[] {
    const last = chunks.length >= 2 ? chunks[chunks.length - 2]! : 0;
    const mask = maskOfRanges(evicted, answerStart + last);
    const spans: ThoughtSpan[] = [];
    const add = (text: string, forgotten: boolean) => {
        if (text === "") return;
        const previous = spans.at(-1);
        if (previous != null && previous.forgotten === forgotten) previous.text += text;
        else spans.push({text, forgotten});
    };
    let tokens = 0;
    let chars = 0;
    for (let i = 0; i + 1 < chunks.length; i += 2) {
        const tokensAfter = chunks[i]!;
        const charsAfter = chunks[i + 1]!;
        let forgotten = tokensAfter > tokens;
        for (let position = answerStart + tokens; position < answerStart + tokensAfter; position++) forgotten &&= mask[position] === 1;
        add(thinking.slice(chars, charsAfter), forgotten);
        tokens = tokensAfter;
        chars = charsAfter;
    }
    add(thinking.slice(chars), false);
    return spans;
}
