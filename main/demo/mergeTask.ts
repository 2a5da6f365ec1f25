// The merge task of the embedded model resources/models/ponder-merge.gguf (the app offers its held-out problems as
// samples; the tests and the bench grade with it): a TypeScript port of test/eval/train/mergeTask.py (same format,
// same mulberry32 stream: the same seed gives the same problem in both).
//
// A problem gives two sorted lists of distinct two-digit numbers and asks for the k-th number of their merge. The
// model thinks one line per merged number: the index, the head of each list ("--" once a list is used up), the
// comparison and the smaller head; line k has "?" after its index (as k has in the question) and "*" after its
// number, and the answer is the marked number:
//
//   user:      a=05,12                   thinking:  01:a05b02>02          answer:  05
//              b=02,21                              02?a05b21<05*
//              k=02?                                03:a12b21<12
//                                                   04:a--b21>21
//
// Reads follow two pointers through the question (a head is the number after the previous one in its list); the
// index is matched with the question's k as the line starts, and the answer copies the number before the "*".
// Training uses seeds below 2^31 and asks any position; held-out problems use seeds from EVAL_SEED_BASE (2^31) up and
// ask a position in the second half of the merge (HELD_OUT_MIN_K_SHARE), whose answer needs the question's lists up to
// the thought's end.

import {EVAL_SEED_BASE, type TaskProblem} from "./demoTask.js";
import {mulberry32} from "../shared/mulberry32.js";

export const DEFAULT_MIN_ITEMS = 40;
export const DEFAULT_MAX_ITEMS = 80;
const MAX_ITEMS_LIMIT = 99;
const VALUES = 100;
const K_SEPARATOR = "?"; // after line k's index, as after k in the question ("k=02?"), instead of ":"
const MARKER = "*"; // ends line k of the thought: the answer is marked where it is written

export type MergeTaskOptions = {
    /** Fewest numbers in the two lists together. Defaults to `40`. */
    minItems?: number;
    /** Most numbers in the two lists together (at most 99). Defaults to `80`. */
    maxItems?: number;
    /** The asked position k is drawn uniformly above this share of the items: k > floor(items * share). Defaults to `0` (any). */
    minKShare?: number;
};

/** Held-out problems ask a position past the middle of the merge: the answer needs the whole question read in order. */
export const HELD_OUT_MIN_K_SHARE = 0.5;

/** A merge problem: its answer is two digits. */
export type MergeProblem = TaskProblem & {
    items: number;
    /** The asked position of the merge (1-based). */
    k: number;
};

const twoDigits = (value: number) => String(value).padStart(2, "0");

export function generateMergeProblem(seed: number, options: MergeTaskOptions = {}): MergeProblem {
    const minItems = options.minItems ?? DEFAULT_MIN_ITEMS;
    const maxItems = options.maxItems ?? DEFAULT_MAX_ITEMS;
    const minKShare = options.minKShare ?? 0;
    if (!(minItems >= 2 && minItems <= maxItems && maxItems <= MAX_ITEMS_LIMIT))
        throw new RangeError("need 2 <= minItems <= maxItems <= 99");
    if (!(minKShare >= 0 && minKShare < 1)) throw new RangeError("need 0 <= minKShare < 1");
    const rng = mulberry32(seed);
    const n = minItems + rng.int(maxItems - minItems + 1);
    const nA = Math.max(1, Math.min(n - 1, Math.floor(n / 4) + rng.int(Math.floor(n / 2) + 1)));
    const pool = Array.from({length: VALUES}, (_, i) => i);
    for (let i = 0; i < n; i++) {
        const j = i + rng.int(VALUES - i);
        [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    const byValue = (x: number, y: number) => x - y;
    const a = pool.slice(0, nA).sort(byValue);
    const b = pool.slice(nA, n).sort(byValue);
    const lowestK = Math.floor(n * minKShare) + 1;
    const k = lowestK + rng.int(n - lowestK + 1);

    const lines: string[] = [];
    const merged: number[] = [];
    let i = 0;
    let j = 0;
    for (let index = 1; index <= n; index++) {
        const headA = a[i];
        const headB = b[j];
        const takeA = headB == null || (headA != null && headA < headB);
        const value = takeA ? headA! : headB!;
        const textA = headA == null ? "--" : twoDigits(headA);
        const textB = headB == null ? "--" : twoDigits(headB);
        const [separator, marker] = index === k ? [K_SEPARATOR, MARKER] : [":", ""];
        lines.push(`${twoDigits(index)}${separator}a${textA}b${textB}${takeA ? "<" : ">"}${twoDigits(value)}${marker}`);
        merged.push(value);
        if (takeA) i++;
        else j++;
    }
    const question = `a=${a.map(twoDigits).join(",")}\nb=${b.map(twoDigits).join(",")}\nk=${twoDigits(k)}?`;
    return {seed, question, thinking: lines.join("\n"), answer: twoDigits(merged[k - 1]!), items: n, k};
}

/** `count` held-out problems: seeds EVAL_SEED_BASE + offset + i, k in the second half unless `options.minKShare` says otherwise. */
export function heldOutMergeProblems(count: number, options: MergeTaskOptions = {}, offset = 0): MergeProblem[] {
    const heldOut = {minKShare: HELD_OUT_MIN_K_SHARE, ...options};
    return Array.from({length: count}, (_, i) => generateMergeProblem((EVAL_SEED_BASE + offset + i) >>> 0, heldOut));
}
