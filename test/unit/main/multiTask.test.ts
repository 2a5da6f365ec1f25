import fs from "node:fs";
import {describe, expect, test} from "vitest";
import {EVAL_SEED_BASE} from "../../../main/demo/demoTask.js";
import {
    generateMultiProblem,
    heldOutOptions,
    MULTI_FAMILIES,
    MULTI_SIZES,
    type MultiFamily,
    type MultiProblem
} from "../../../main/demo/multiTask.js";

// Problems printed by test/eval/train/multiTask.py, one seed at a time (cd test/eval/train):
//   training: python3 multiTask.py --seed S --count 1
//             for S in 0 3 6 44 47 51 52 66 77 120 128 166 172
//   heldOut:  python3 multiTask.py --seed S --count 1 --held-out
//             for S in 2147483652 2147483669 2147483683 2147483702 2147483732 2147483734 2147483743 2147483763
//                      2147483771 2147483825 2147483826 2147483829
// Together they hold every family at least twice in each set and every phrasing of every family.
const fixtures = JSON.parse(fs.readFileSync(new URL("multiTask.fixtures.json", import.meta.url), "utf8")) as {
    training: MultiProblem[];
    heldOut: MultiProblem[];
};

const FIELDS = ["seed", "family", "question", "thinking", "answer", "size"] as const;
const PHRASINGS: Record<MultiFamily, RegExp[]> = {
    program: [/^[a-z]=\d/, /^Evaluate this program/, /^Variables: /, /^What does ZZ come to\?/, /\nwith [a-z]=\d/],
    merge: [/^a=[\d,]+\nb=[\d,]+\nk=\d\d\?$/, /^Merge these two sorted lists/, /If you merge a and b in order/, /^Which number is at k=/],
    sum: [/^Add up these numbers: /, /^What is \d\d \+ /, /^Numbers: /, /^Sum the following list/],
    chase: [/^Start at \d\d and follow/, /\nFrom \d\d, follow the arrows/, /^Arrows: /],
    reverse: [/^Reverse this list: /, /^Write these numbers in reverse order: /, /\nWhat is this list backwards\?$/, /^Please reverse/],
    tally: [/^Votes in order: /, /^Count the votes for /, /\nHow many times was [A-Z]{2} chosen\?$/]
};

/** The index of the phrasing a problem's question is written in. */
function phrasing(problem: MultiProblem): number {
    const found = PHRASINGS[problem.family].flatMap((pattern, i) => (pattern.test(problem.question) ? [i] : []));
    expect(found, problem.question).toHaveLength(1);
    return found[0]!;
}

const twoDigitNumbers = (text: string) => (text.match(/\b\d\d\b/g) ?? []).map(Number);

/** The held-out problems of one family: seeds from EVAL_SEED_BASE. */
const heldOut = (family: MultiFamily, count = 150) =>
    Array.from({length: count}, (_, i) => generateMultiProblem(EVAL_SEED_BASE + i, heldOutOptions([family])));

/** The smallest and largest size a family's held-out problems can have. */
function heldOutSizes(family: MultiFamily): [number, number] {
    const [lo, hi] = MULTI_SIZES[family];
    return [lo + Math.floor((hi - lo) / 2), hi];
}

describe("the many-task problems", () => {
    test("give the problems test/eval/train/multiTask.py gives for the same seeds, at training and held-out options", () => {
        const sets: [MultiProblem[], Parameters<typeof generateMultiProblem>[1]][] = [
            [fixtures.training, {}],
            [fixtures.heldOut, heldOutOptions()]
        ];
        for (const [expected, options] of sets) {
            for (const problem of expected) {
                const got = generateMultiProblem(problem.seed, options);
                for (const field of FIELDS) expect(got[field], `seed ${problem.seed}, ${field}`).toEqual(problem[field]);
            }
            for (const family of MULTI_FAMILIES)
                expect(expected.filter((problem) => problem.family === family).length).toBeGreaterThanOrEqual(2);
        }
        const all = [...fixtures.training, ...fixtures.heldOut];
        for (const family of MULTI_FAMILIES) {
            const seen = new Set(all.filter((problem) => problem.family === family).map(phrasing));
            expect(seen.size, family).toBe(PHRASINGS[family].length);
        }
    });

    test("draw every family and every phrasing, and sizes across each family's range", () => {
        const training = Array.from({length: 600}, (_, seed) => generateMultiProblem(seed));
        for (const family of MULTI_FAMILIES) {
            const ofFamily = training.filter((problem) => problem.family === family);
            expect(ofFamily.length, family).toBeGreaterThan(60);
            expect(new Set(ofFamily.map(phrasing)).size, family).toBe(PHRASINGS[family].length);
            const [lo, hi] = MULTI_SIZES[family];
            if (family !== "chase") {
                expect(Math.min(...ofFamily.map((problem) => problem.size)), family).toBeLessThan(lo + (hi - lo) / 4);
                expect(Math.max(...ofFamily.map((problem) => problem.size)), family).toBeGreaterThan(hi - (hi - lo) / 4);
            }
        }
        for (const family of MULTI_FAMILIES) {
            const [lo, hi] = heldOutSizes(family);
            for (const problem of heldOut(family, 60)) {
                expect(problem.family).toBe(family);
                expect(problem.size).toBeLessThanOrEqual(hi);
                // A chase's size is its path: at least half its arrows.
                expect(problem.size).toBeGreaterThanOrEqual(family === "chase" ? Math.floor(lo / 2) : lo);
            }
        }
        const smallest = Array.from({length: 60}, (_, seed) => generateMultiProblem(seed, {minScale: 0, maxScale: 0}));
        for (const problem of smallest.filter((p) => p.family !== "chase")) expect(problem.size).toBe(MULTI_SIZES[problem.family][0]);
    });

    test("held-out options: the upper half of the sizes, merge's k past the middle, the families asked for", () => {
        expect(heldOutOptions()).toEqual({minScale: 50, maxScale: 100, families: [...MULTI_FAMILIES], minKShare: 0.5});
        expect(heldOutOptions(["sum", "tally"]).families).toEqual(["sum", "tally"]);
        expect(heldOutOptions([]).families).toEqual([...MULTI_FAMILIES]);
        const mixed = Array.from({length: 300}, (_, i) => generateMultiProblem(EVAL_SEED_BASE + i, heldOutOptions(["sum", "tally"])));
        expect(new Set(mixed.map((problem) => problem.family))).toEqual(new Set(["sum", "tally"]));
        for (const problem of heldOut("merge")) {
            const k = Number(/k=(\d\d)\?/.exec(problem.question)![1]);
            expect(k).toBeGreaterThan(Math.floor(problem.size / 2));
            expect(k).toBeLessThanOrEqual(problem.size);
        }
    });

    test("program: the thought evaluates the question's program line by line and the answer is ZZ's value", () => {
        for (const problem of heldOut("program")) {
            const lines = problem.question.split("\n");
            const variables = lines.map((line) => /^(?:Variables: |with )?([a-z]=\d(?:,[a-z]=\d)*)$/.exec(line)).find((m) => m != null)!;
            const values = new Map(variables[1]!.split(",").map((pair) => [pair[0]!, Number(pair[2])] as const));
            const steps = lines.filter((line) => /^[A-Z]{2}=\w+\+\w+$/.test(line));
            const thought = problem.thinking.split("\n");
            expect(thought).toHaveLength(problem.size);
            expect(steps).toHaveLength(problem.size);
            for (const [i, line] of steps.entries()) {
                const [name, op1, op2] = line.split(/[=+]/) as [string, string, string];
                const v1 = values.get(op1)!;
                const v2 = values.get(op2)!;
                expect(thought[i]).toBe(`${name}=${op1}:${v1}+${op2}:${v2}=${String(v1 + v2).padStart(2, "0")}`);
                values.set(name, (v1 + v2) % 10);
            }
            expect(thought.at(-1)!.startsWith("ZZ=")).toBe(true);
            expect(problem.answer).toBe(String(values.get("ZZ")));
            expect(problem.answer).toBe(thought.at(-1)!.at(-1));
        }
    });

    test("merge: the thought walks the merge of the question's lists and the answer is the marked number at k", () => {
        for (const problem of heldOut("merge")) {
            const listA = /^a=([\d,]+)$/m.exec(problem.question)![1]!.split(",").map(Number);
            const listB = /^b=([\d,]+)$/m.exec(problem.question)![1]!.split(",").map(Number);
            const k = Number(/k=(\d\d)\?/.exec(problem.question)![1]);
            const merged = [...listA, ...listB].sort((x, y) => x - y);
            const thought = problem.thinking.split("\n");
            expect(merged).toHaveLength(problem.size);
            expect(thought.map((line) => Number(line.slice(10, 12)))).toEqual(merged);
            expect(thought[k - 1]!.endsWith("*")).toBe(true);
            expect(problem.answer).toBe(thought[k - 1]!.slice(10, 12));
            expect(Number(problem.answer)).toBe(merged[k - 1]);
        }
    });

    test("sum: a running total per number of the question, the answer the last line's total mod 100", () => {
        for (const problem of heldOut("sum")) {
            const numbers = twoDigitNumbers(problem.question);
            expect(numbers).toHaveLength(problem.size);
            expect(new Set(numbers).size).toBe(problem.size);
            const thought = problem.thinking.split("\n");
            expect(thought).toHaveLength(problem.size);
            let total = 0;
            thought.forEach((line, i) => {
                const [, index, value, before, after] = /^(\d\d):(\d\d)\+(\d\d)=(\d{3})$/.exec(line)!.map(Number) as number[];
                expect([index, value, before]).toEqual([i + 1, numbers[i], total]);
                expect(after).toBe(before! + value!);
                total = after! % 100;
            });
            expect(problem.answer).toBe(String(Number(thought.at(-1)!.slice(-3)) % 100).padStart(2, "0"));
            expect(Number(problem.answer)).toBe(numbers.reduce((sum, value) => sum + value, 0) % 100);
        }
    });

    test("chase: the thought follows the question's arrows from the start to the number that points to itself", () => {
        for (const problem of heldOut("chase")) {
            const arrows = new Map([...problem.question.matchAll(/(\d\d)>(\d\d)/g)].map((m) => [m[1]!, m[2]!] as const));
            expect(arrows.size).toBe(problem.question.match(/\d\d>\d\d/g)!.length);
            const start = /(?:Start at|From|Begin at) (\d\d)/.exec(problem.question)![1];
            const thought = problem.thinking.split("\n");
            expect(thought).toHaveLength(problem.size);
            expect(problem.size).toBeGreaterThanOrEqual(Math.floor(arrows.size / 2));
            let at = start!;
            thought.forEach((line, i) => {
                expect(line).toBe(`${String(i + 1).padStart(2, "0")}:${at}>${arrows.get(at)}`);
                if (i < thought.length - 1) expect(arrows.get(at)).not.toBe(at);
                at = arrows.get(at)!;
            });
            expect(arrows.get(at)).toBe(at);
            expect(problem.answer).toBe(at);
            expect(problem.answer).toBe(thought.at(-1)!.slice(-2));
            // Only the path's end points to itself.
            expect([...arrows].filter(([from, to]) => from === to)).toEqual([[at, at]]);
        }
    });

    test("reverse: the thought is the question's numbers backwards, the answer the thought's numbers joined by commas", () => {
        for (const problem of heldOut("reverse")) {
            const numbers = twoDigitNumbers(problem.question);
            expect(numbers).toHaveLength(problem.size);
            expect(new Set(numbers).size).toBe(problem.size);
            const thought = problem.thinking.split("\n");
            expect(thought.map((line) => Number(line.slice(0, 2)))).toEqual(numbers.map((_, i) => i + 1));
            const backwards = thought.map((line) => line.slice(3));
            expect(backwards.map(Number)).toEqual([...numbers].reverse());
            expect(problem.answer).toBe(backwards.join(","));
        }
    });

    test("tally: the asked candidate named first, then its running count on every line, the answer its total", () => {
        for (const problem of heldOut("tally")) {
            const votes = [...problem.question.matchAll(/(\d\d) ([A-Z]{2})\b/g)].map((m) => m[2]!);
            const asked = /(?:did|for|was) ([A-Z]{2})\b/.exec(problem.question)![1]!;
            expect(votes).toHaveLength(problem.size);
            expect(votes).toContain(asked);
            expect(new Set(votes).size).toBeLessThanOrEqual(5);
            let count = 0;
            const [header, ...thought] = problem.thinking.split("\n");
            expect(header).toBe(`00:${asked}`);
            expect(thought).toHaveLength(votes.length);
            thought.forEach((line, i) => {
                if (votes[i] === asked) count++;
                const mark = votes[i] === asked ? "+" : ".";
                expect(line).toBe(`${String(i + 1).padStart(2, "0")}:${votes[i]}/${asked}${mark}${String(count).padStart(2, "0")}`);
            });
            expect(Number(problem.answer)).toBe(votes.filter((vote) => vote === asked).length);
            expect(problem.answer).toBe(thought.at(-1)!.slice(-2));
        }
    });

    test("is a pure function of the seed and options, and refuses options it cannot draw from", () => {
        expect(generateMultiProblem(12345)).toEqual(generateMultiProblem(12345));
        expect(generateMultiProblem(12345)).not.toEqual(generateMultiProblem(12346));
        expect(generateMultiProblem(2 ** 32 - 1, heldOutOptions()).seed).toBe(2 ** 32 - 1);
        expect(() => generateMultiProblem(1, {minScale: 60, maxScale: 50})).toThrow(RangeError);
        expect(() => generateMultiProblem(1, {minScale: -1})).toThrow(RangeError);
        expect(() => generateMultiProblem(1, {maxScale: 101})).toThrow(RangeError);
        expect(() => generateMultiProblem(1, {minScale: 10.5})).toThrow(RangeError);
        expect(() => generateMultiProblem(1, {families: []})).toThrow(RangeError);
        expect(() => generateMultiProblem(1, {families: ["sort" as MultiFamily]})).toThrow(RangeError);
        expect(() => generateMultiProblem(1, {families: ["merge"], minKShare: 1})).toThrow(RangeError);
    });
});
