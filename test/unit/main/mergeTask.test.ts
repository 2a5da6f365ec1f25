import {describe, expect, test} from "vitest";
import {EVAL_SEED_BASE} from "../../../main/demo/demoTask.js";
import {generateMergeProblem, heldOutMergeProblems} from "../../../main/demo/mergeTask.js";

describe("the merge task", () => {
    test("gives the problem test/eval/train/mergeTask.py gives for the same seed", () => {
        // python3 test/eval/train/mergeTask.py --seed 2147483655 --count 1 --min-items 6 --max-items 6
        expect(generateMergeProblem(EVAL_SEED_BASE + 7, {minItems: 6, maxItems: 6})).toEqual({
            seed: 2147483655,
            question: "a=23,54,61\nb=56,71,82\nk=04?",
            thinking: "01:a23b56<23\n02:a54b56<54\n03:a61b56>56\n04?a61b71<61*\n05:a--b71>71\n06:a--b82>82",
            answer: "61",
            items: 6,
            k: 4
        });
        // The same seed asking a position in the second half: the same lists, k drawn from 4..6.
        // python3 test/eval/train/mergeTask.py --seed 2147483655 --count 1 --min-items 6 --max-items 6 --min-k-share 0.5
        expect(generateMergeProblem(EVAL_SEED_BASE + 7, {minItems: 6, maxItems: 6, minKShare: 0.5})).toEqual({
            seed: 2147483655,
            question: "a=23,54,61\nb=56,71,82\nk=05?",
            thinking: "01:a23b56<23\n02:a54b56<54\n03:a61b56>56\n04:a61b71<61\n05?a--b71>71*\n06:a--b82>82",
            answer: "71",
            items: 6,
            k: 5
        });
        // python3 test/eval/train/mergeTask.py --count 1 --min-k-share 0.5
        const first = heldOutMergeProblems(1)[0]!;
        expect(first.seed).toBe(2 ** 31);
        expect(first.question.split("\n")[2]).toBe("k=54?");
        expect(first.answer).toBe("77");
        expect(first.items).toBe(73);
    });

    test("asks held-out problems a position in the second half of the merge, training problems any position", () => {
        const heldOut = heldOutMergeProblems(300);
        expect(heldOut.every((problem) => problem.k > problem.items / 2 && problem.k <= problem.items)).toBe(true);
        expect(new Set(heldOut.map((problem) => problem.k - problem.items)).has(0)).toBe(true);
        const training = Array.from({length: 300}, (_, seed) => generateMergeProblem(seed));
        expect(training.some((problem) => problem.k <= problem.items / 4)).toBe(true);
        expect(training.some((problem) => problem.k === 1)).toBe(true);
        // The option changes k only: the lists are the same draw.
        const anyK = heldOutMergeProblems(20, {minKShare: 0});
        heldOutMergeProblems(20).forEach((problem, i) => {
            expect(problem.question.split("\n").slice(0, 2)).toEqual(anyK[i]!.question.split("\n").slice(0, 2));
        });
        expect(anyK.some((problem) => problem.k <= problem.items / 2)).toBe(true);
        expect(() => generateMergeProblem(1, {minKShare: 1})).toThrow(RangeError);
        expect(() => generateMergeProblem(1, {minKShare: -0.1})).toThrow(RangeError);
    });

    test("thinks the merge of the two sorted lists, one 12-character line per number, marks line k and answers it", () => {
        for (const problem of heldOutMergeProblems(200)) {
            const [a, b, k] = problem.question.split("\n");
            const listA = a!.slice(2).split(",").map(Number);
            const listB = b!.slice(2).split(",").map(Number);
            for (const list of [listA, listB]) expect(list).toEqual([...list].sort((x, y) => x - y));
            expect(new Set([...listA, ...listB]).size).toBe(problem.items);
            expect(problem.items).toBeGreaterThanOrEqual(40);
            expect(problem.items).toBeLessThanOrEqual(80);
            const lines = problem.thinking.split("\n");
            expect(lines).toHaveLength(problem.items);
            const merged = [...listA, ...listB].sort((x, y) => x - y);
            lines.forEach((line, i) => {
                expect(line).toMatch(
                    i + 1 === problem.k ? /^\d\d\?a(\d\d|--)b(\d\d|--)[<>]\d\d\*$/ : /^\d\d:a(\d\d|--)b(\d\d|--)[<>]\d\d$/
                );
                expect(Number(line.slice(0, 2))).toBe(i + 1);
                expect(Number(line.slice(10, 12))).toBe(merged[i]);
            });
            expect(k).toBe(`k=${String(problem.k).padStart(2, "0")}?`);
            expect(Number(problem.answer)).toBe(merged[problem.k - 1]);
            expect(problem.thinking.split("*")).toHaveLength(2);
            expect(problem.thinking.split("?")).toHaveLength(2);
        }
    });

    test("is a pure function of the seed, and refuses sizes it cannot write", () => {
        expect(generateMergeProblem(12345)).toEqual(generateMergeProblem(12345));
        expect(generateMergeProblem(12345)).not.toEqual(generateMergeProblem(12346));
        expect(() => generateMergeProblem(1, {minItems: 1, maxItems: 5})).toThrow(RangeError);
        expect(() => generateMergeProblem(1, {minItems: 50, maxItems: 100})).toThrow(RangeError);
    });
});
