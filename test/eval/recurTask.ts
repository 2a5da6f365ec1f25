// The recurrence task of the bench's model test/eval/models/ponder-recur.gguf (not shipped with the app): a TypeScript port of
// test/eval/train/recurTask.py (same format, same mulberry32 stream: the same seed gives the same problem in both).
//
// A problem gives the first two values of a sequence and asks for a later one; line n is the last digit of the
// previous value plus the value at half its index. The thought writes one line per value (its name, the previous
// line's name and value, the half's name and value, the two-digit sum, and after "/" a countdown of names from the
// asked name on the first line to AC on the asked line, the last), and the answer is the asked line's value:
//
//   user:      AA=4,AB=7                 thinking:  AC=AB:7+AB:7=14/AF     answer:  9
//              f(n)=f(n-1)+f(n/2)                   AD=AC:4+AB:7=11/AE
//              AF?                                  AE=AD:1+AC:4=05/AD
//                                                   AF=AE:5+AC:4=09/AC
//
// The question is two values and a name, 2 to 4% of a held-out conversation: nearly everything the model reads is its
// own thought, and a value written on line k is read again up to k lines later.
// Training uses seeds below 2^31; held-out problems use seeds from EVAL_SEED_BASE (2^31) up.

import {EVAL_SEED_BASE, type TaskProblem} from "./demoTask.js";
import {mulberry32} from "../../main/shared/mulberry32.js";

export const DEFAULT_MIN_LINES = 60;
export const DEFAULT_MAX_LINES = 120;
const MAX_LINES_LIMIT = 26 * 26;
const ASKED = "?"; // after the asked name in the question
const COUNT = "/"; // before a countdown of names: the asked name on the first line, one name less a line, "AC" on the asked line
const UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";

export type RecurTaskOptions = {minLines?: number; maxLines?: number};

/** A recurrence problem: its answer is one digit; `lines` is the number of thought lines. */
export type RecurProblem = TaskProblem & {lines: number};

function lineName(index: number) {
    return UPPER[Math.floor(index / 26)]! + UPPER[index % 26]!;
}

export function generateRecurProblem(seed: number, options: RecurTaskOptions = {}): RecurProblem {
    const minLines = options.minLines ?? DEFAULT_MIN_LINES;
    const maxLines = options.maxLines ?? DEFAULT_MAX_LINES;
    if (!(minLines >= 1 && minLines <= maxLines && maxLines <= MAX_LINES_LIMIT - 2))
        throw new RangeError("need 1 <= minLines <= maxLines <= 674");
    const rng = mulberry32(seed);
    const n = minLines + rng.int(maxLines - minLines + 1);
    const values = [rng.int(10), rng.int(10)];
    const last = n + 1;
    const lines: string[] = [];
    for (let i = 2; i <= last; i++) {
        const a = values[i - 1]!;
        const b = values[Math.floor(i / 2)]!;
        values.push((a + b) % 10);
        const sum = String(a + b).padStart(2, "0");
        lines.push(`${lineName(i)}=${lineName(i - 1)}:${a}+${lineName(Math.floor(i / 2))}:${b}=${sum}${COUNT}${lineName(last + 2 - i)}`);
    }
    const question = `${lineName(0)}=${values[0]},${lineName(1)}=${values[1]}\nf(n)=f(n-1)+f(n/2)\n${lineName(last)}${ASKED}`;
    return {seed, question, thinking: lines.join("\n"), answer: String(values[last]), lines: n};
}

/** `count` held-out problems: seeds EVAL_SEED_BASE + offset + i. */
export function heldOutRecurProblems(count: number, options: RecurTaskOptions = {}, offset = 0): RecurProblem[] {
    return Array.from({length: count}, (_, i) => generateRecurProblem((EVAL_SEED_BASE + offset + i) >>> 0, options));
}
