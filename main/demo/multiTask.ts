// The many-task reasoner's problems: a TypeScript port of test/eval/train/multiTask.py (same formats, same mulberry32
// stream: the same seed and options give the same problem in both). Six families of synthetic reasoning, each asked
// in several phrasings drawn per problem; every family thinks one fixed-width line per step and then answers:
//
// - program: the demo task (demoTask.ts), a straight-line program of additions mod 10.
// - merge: two sorted lists merged (mergeTask.ts), the k-th number asked.
// - sum: distinct two-digit numbers added one by one, the last two digits of the total asked.
// - chase: arrows between two-digit numbers, in shuffled order, followed from a start until a number points to itself.
// - reverse: distinct two-digit numbers written backwards, then copied into the answer.
// - tally: numbered votes for named candidates, one candidate's total asked: the asked name on the thought's first
//   line, then the asked candidate's running count on every line.
//
// The problem of seed 39 with {minScale: 0, maxScale: 0, families: ["sum"]} (the total carried mod 100 line to line):
//
//   user:      Add up these numbers: 54, 04, 85, 61. What are the last two digits of the total?
//   thinking:  01:54+00=054
//              02:04+54=058
//              03:85+58=143
//              04:61+43=104
//   answer:    04
//
// The program and merge families draw a seed (below 2^31) and generate the inner problem from it with the sibling
// ports. Training uses seeds below 2^31; held-out sets use seeds from EVAL_SEED_BASE (2^31) up with heldOutOptions():
// sizes in the upper half of each family's range and, for merge, a position in the second half.

import {EVAL_SEED_BASE, generateDemoProblem, type TaskProblem} from "./demoTask.js";
import {generateMergeProblem} from "./mergeTask.js";
import {mulberry32} from "../shared/mulberry32.js";

/** The task families, in the order the generator draws them from. */
export const MULTI_FAMILIES = ["program", "merge", "sum", "chase", "reverse", "tally"] as const;

export type MultiFamily = (typeof MULTI_FAMILIES)[number];

/**
 * Each family's size range at full scale: program steps, merged numbers, numbers added, arrows, numbers reversed, votes.
 * A problem's size is drawn from [lo + (hi - lo) * minScale / 100, lo + (hi - lo) * maxScale / 100] (each end floored).
 */
export const MULTI_SIZES: Readonly<Record<MultiFamily, readonly [number, number]>> = {
    program: [6, 50],
    merge: [8, 50],
    sum: [4, 44],
    chase: [4, 48],
    reverse: [4, 36],
    tally: [6, 48]
};

const PROGRAM_VARS = [3, 10] as const;
const TALLY_NAMES = ["AL", "BO", "CY", "DI", "ED", "FI", "GU", "HO", "IV", "JO", "KI", "LU"];
const TALLY_CANDIDATES = [2, 5] as const;
const LIST_SEPARATORS = [", ", ",", " "];
const SEED_LIMIT = 0x80000000; // the inner generators' seeds are drawn below 2^31

export type MultiTaskOptions = {
    /** Smallest size, in percent of each family's size range (an integer). Defaults to `0`. */
    minScale?: number;
    /** Largest size, in percent of each family's size range (an integer, at most 100). Defaults to `100`. */
    maxScale?: number;
    /** The families drawn from, uniformly (a family listed twice is drawn twice as often). Defaults to all six. */
    families?: readonly MultiFamily[];
    /** Merge only: ask a position past this share of the merge. Defaults to `0` (any). */
    minKShare?: number;
};

export type MultiProblem = TaskProblem & {
    family: MultiFamily;
    /** Program steps, merged numbers, numbers added, arrows on the path, numbers reversed or votes. */
    size: number;
};

type Rng = ReturnType<typeof mulberry32>;
type Drawn = [question: string, thinking: string, answer: string, size: number];
type Resolved = Required<MultiTaskOptions>;

/** The held-out sets of the app, the bench and the tests: the upper half of each family's sizes, merge's k late. */
export function heldOutOptions(families: readonly MultiFamily[] = MULTI_FAMILIES): Required<MultiTaskOptions> {
    return {minScale: 50, maxScale: 100, families: families.length > 0 ? [...families] : [...MULTI_FAMILIES], minKShare: 0.5};
}

const twoDigits = (value: number) => String(value).padStart(2, "0");
const joinNumbers = (values: number[], separator: string) => values.map(twoDigits).join(separator);
const pick = <T>(rng: Rng, items: readonly T[]): T => items[rng.int(items.length)]!;

function familySize(family: MultiFamily, rng: Rng, options: Resolved): number {
    const [lo, hi] = MULTI_SIZES[family];
    const a = lo + Math.floor(((hi - lo) * options.minScale) / 100);
    const b = lo + Math.floor(((hi - lo) * options.maxScale) / 100);
    return a + rng.int(b - a + 1);
}

/** n distinct numbers of 00..99 in random order (a partial Fisher-Yates shuffle). */
function distinctNumbers(rng: Rng, n: number): number[] {
    const pool = Array.from({length: 100}, (_, i) => i);
    for (let i = 0; i < n; i++) {
        const j = i + rng.int(100 - i);
        [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    return pool.slice(0, n);
}

function programProblem(rng: Rng, options: Resolved): Drawn {
    const steps = familySize("program", rng, options);
    const vars = PROGRAM_VARS[0] + rng.int(PROGRAM_VARS[1] - PROGRAM_VARS[0] + 1);
    const inner = generateDemoProblem(rng.int(SEED_LIMIT), {minSteps: steps, maxSteps: steps, minVars: vars, maxVars: vars});
    const [variables, ...rest] = inner.question.split("\n");
    const program = rest.slice(0, -1).join("\n");
    const template = rng.int(5);
    const question = [
        inner.question,
        `Evaluate this program. Each step adds two values mod 10.\n${variables}\n${program}\nWhat is ZZ?`,
        `Variables: ${variables}\nSteps:\n${program}\nTell me the value of ZZ.`,
        `What does ZZ come to? Additions are mod 10.\n${variables}\n${program}`,
        `${program}\nwith ${variables}\nWhat is ZZ?`
    ][template]!;
    return [question, inner.thinking, inner.answer, steps];
}

function mergeProblem(rng: Rng, options: Resolved): Drawn {
    const items = familySize("merge", rng, options);
    const inner = generateMergeProblem(rng.int(SEED_LIMIT), {minItems: items, maxItems: items, minKShare: options.minKShare});
    const [a, b, k] = inner.question.split("\n");
    const template = rng.int(4);
    const question = [
        inner.question,
        `Merge these two sorted lists and give me the number at position k.\n${a}\n${b}\n${k}`,
        `${a}\n${b}\nIf you merge a and b in order, which number is at ${k}`,
        `Which number is at ${k} Merge the sorted lists\n${a}\nand\n${b}`
    ][template]!;
    return [question, inner.thinking, inner.answer, items];
}

function sumProblem(rng: Rng, options: Resolved): Drawn {
    const n = familySize("sum", rng, options);
    const values = distinctNumbers(rng, n);
    const lines: string[] = [];
    let total = 0;
    values.forEach((v, i) => {
        lines.push(`${twoDigits(i + 1)}:${twoDigits(v)}+${twoDigits(total)}=${String(total + v).padStart(3, "0")}`);
        total = (total + v) % 100;
    });
    const template = rng.int(4);
    const separator = pick(rng, LIST_SEPARATORS);
    const question = [
        `Add up these numbers: ${joinNumbers(values, separator)}. What are the last two digits of the total?`,
        `What is ${joinNumbers(values, " + ")} mod 100?`,
        `Numbers: ${joinNumbers(values, separator)}\nGive me the last two digits of their sum.`,
        `Sum the following list and tell me the total mod 100.\n${joinNumbers(values, separator)}`
    ][template]!;
    return [question, lines.join("\n"), twoDigits(total), n];
}

function chaseProblem(rng: Rng, options: Resolved): Drawn {
    const m = familySize("chase", rng, options);
    const nodes = distinctNumbers(rng, m);
    const half = Math.floor(m / 2);
    const pathLength = Math.max(2, half + rng.int(m - half + 1)); // nodes on the path from the start, its end included
    const path = nodes.slice(0, pathLength);
    const target = new Map<number, number>();
    for (let i = 0; i < pathLength - 1; i++) target.set(path[i]!, path[i + 1]!);
    target.set(path[pathLength - 1]!, path[pathLength - 1]!); // the path ends where a number points to itself
    for (const v of nodes.slice(pathLength)) {
        // The other numbers point anywhere but themselves: dead ends lie off the path.
        const w = nodes[rng.int(m)]!;
        target.set(v, w !== v ? w : path[0]!);
    }
    const order = [...nodes];
    for (let i = m - 1; i > 0; i--) {
        const j = rng.int(i + 1);
        [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const separator = pick(rng, [", ", "\n", "; "]);
    const pairs = order.map((v) => `${twoDigits(v)}>${twoDigits(target.get(v)!)}`).join(separator);
    const lines = path.map((v, i) => `${twoDigits(i + 1)}:${twoDigits(v)}>${twoDigits(target.get(v)!)}`);
    const start = twoDigits(path[0]!);
    const template = rng.int(3);
    const question = [
        `Start at ${start} and follow the arrows until a number points to itself. Where do you stop?\n${pairs}`,
        `${pairs}\nFrom ${start}, follow the arrows. Which number points to itself at the end?`,
        `Arrows: ${pairs}\nBegin at ${start}. Where does the path end?`
    ][template]!;
    return [question, lines.join("\n"), twoDigits(path[pathLength - 1]!), pathLength];
}

function reverseProblem(rng: Rng, options: Resolved): Drawn {
    const n = familySize("reverse", rng, options);
    const values = distinctNumbers(rng, n);
    const backwards = [...values].reverse();
    const lines = backwards.map((v, i) => `${twoDigits(i + 1)}:${twoDigits(v)}`);
    const separator = pick(rng, LIST_SEPARATORS);
    const listed = joinNumbers(values, separator);
    const template = rng.int(4);
    const question = [
        `Reverse this list: ${listed}`,
        `Write these numbers in reverse order: ${listed}`,
        `${listed}\nWhat is this list backwards?`,
        `Please reverse the order of the following numbers.\n${listed}`
    ][template]!;
    return [question, lines.join("\n"), joinNumbers(backwards, ","), n];
}

function tallyProblem(rng: Rng, options: Resolved): Drawn {
    const n = familySize("tally", rng, options);
    const c = TALLY_CANDIDATES[0] + rng.int(TALLY_CANDIDATES[1] - TALLY_CANDIDATES[0] + 1);
    const names = [...TALLY_NAMES];
    for (let i = 0; i < c; i++) {
        const j = i + rng.int(names.length - i);
        [names[i], names[j]] = [names[j]!, names[i]!];
    }
    const candidates = names.slice(0, c);
    const votes = Array.from({length: n}, () => candidates[rng.int(c)]!);
    const asked = votes[rng.int(n)]!; // a candidate with at least one vote
    // line 00 names the asked candidate; then each line: the vote, the asked name again (carried from the line above,
    // so the two sit side by side), "+" when they are the same and "." when not, and the asked candidate's count
    let count = 0;
    const lines = [`00:${asked}`];
    votes.forEach((name, i) => {
        if (name === asked) count++;
        lines.push(`${twoDigits(i + 1)}:${name}/${asked}${name === asked ? "+" : "."}${twoDigits(count)}`);
    });
    const separator = pick(rng, [", ", "\n"]);
    const listed = votes.map((name, i) => `${twoDigits(i + 1)} ${name}`).join(separator);
    const template = rng.int(3);
    const question = [
        `Votes in order: ${listed}\nHow many votes did ${asked} get?`,
        `Count the votes for ${asked}.\n${listed}`,
        `${listed}\nHow many times was ${asked} chosen?`
    ][template]!;
    return [question, lines.join("\n"), twoDigits(count), n];
}

const GENERATORS: Record<MultiFamily, (rng: Rng, options: Resolved) => Drawn> = {
    program: programProblem,
    merge: mergeProblem,
    sum: sumProblem,
    chase: chaseProblem,
    reverse: reverseProblem,
    tally: tallyProblem
};

/** The problem of a seed: the family drawn from `options.families`, then its size, data and phrasing. */
export function generateMultiProblem(seed: number, options: MultiTaskOptions = {}): MultiProblem {
    const resolved: Resolved = {
        minScale: options.minScale ?? 0,
        maxScale: options.maxScale ?? 100,
        families: options.families ?? MULTI_FAMILIES,
        minKShare: options.minKShare ?? 0
    };
    const {minScale, maxScale, families} = resolved;
    if (!(Number.isInteger(minScale) && Number.isInteger(maxScale) && minScale >= 0 && minScale <= maxScale && maxScale <= 100))
        throw new RangeError("need integers 0 <= minScale <= maxScale <= 100");
    if (families.length === 0 || families.some((family) => !Object.hasOwn(GENERATORS, family)))
        throw new RangeError(`families must be a non-empty subset of ${MULTI_FAMILIES.join(",")}`);
    const rng = mulberry32(seed);
    const family = families[rng.int(families.length)]!;
    const [question, thinking, answer, size] = GENERATORS[family](rng, resolved);
    return {seed, family, question, thinking, answer, size};
}

/**
 * `count` held-out problems of the families named (every family by default): seeds EVAL_SEED_BASE + offset + i with
 * heldOutOptions(), so no problem is one training drew.
 */
export function heldOutMultiProblems(count: number, families: readonly MultiFamily[] = MULTI_FAMILIES, offset = 0): MultiProblem[] {
    const options = heldOutOptions(families);
    return Array.from({length: count}, (_, i) => generateMultiProblem((EVAL_SEED_BASE + offset + i) >>> 0, options));
}
