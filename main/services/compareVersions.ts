import type {VersionParting} from "../../preload/contract.js";

// Where an answer made under a pruning policy and its Full KV version part (Compare with Full KV): pure, on the texts.

type Version = {thinking: string; text: string};

const beforeChars = 120;
const restChars = 160;

/**
 * Whether `pruned` and `full` think and answer the same and, when not, where they first part: the thought first (the
 * answer follows from it), at the start of the word in which they first differ, so both sides highlight a whole word.
 */
export function compareVersions(
    pruned: Version,
    full: Version
): {sameThought: boolean; sameAnswer: boolean; parting: VersionParting | null} {
    const sameThought = pruned.thinking === full.thinking;
    const sameAnswer = pruned.text === full.text;
    const segment = !sameThought ? "thought" : !sameAnswer ? "answer" : null;
    if (segment == null) return {sameThought, sameAnswer, parting: null};
    const [a, b] = segment === "thought" ? [pruned.thinking, full.thinking] : [pruned.text, full.text];
    let common = 0;
    while (common < a.length && common < b.length && a[common] === b[common]) common++;
    // Back to the start of the word both are in.
    let at = common;
    while (at > 0 && !/\s/.test(a[at - 1]!)) at--;
    return {
        sameThought,
        sameAnswer,
        parting: {segment, at, before: a.slice(Math.max(0, at - beforeChars), at), pruned: wordAt(a, at), full: wordAt(b, at)}
    };
}

function wordAt(text: string, at: number): {word: string; rest: string} {
    let end = at;
    while (end < text.length && /\s/.test(text[end]!)) end++;
    while (end < text.length && !/\s/.test(text[end]!)) end++;
    return {word: text.slice(at, end), rest: text.slice(end, end + restChars)};
}
