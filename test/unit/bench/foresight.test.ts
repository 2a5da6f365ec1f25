import {describe, expect, it} from "vitest";
import {collect, pairwiseAuc} from "../../bench/foresight.js";

describe("the foresight read-out", () => {
    it("computes the pairwise AUC, ties counting half", () => {
        expect(pairwiseAuc([3, 4], [1, 2])).toBe(1);
        expect(pairwiseAuc([1, 2], [3, 4])).toBe(0);
        expect(pairwiseAuc([1, 1], [1, 1])).toBe(0.5);
        expect(pairwiseAuc([2], [1, 2, 3])).toBe(0.5);
        expect(pairwiseAuc([], [1])).toBeNaN();
    });

    it("splits question and generated cells by whether they are read later, with what they received before", () => {
        const promptLength = 4;
        const steps = 200;
        // Row r: the query at position promptLength + r, over positions 0..promptLength + r.
        const sharpest = Array.from({length: steps}, (_, r) => new Float32Array(promptLength + r + 1).fill(0.01));
        // Question cell 2 is first read at row 100 (later), cell 3 at row 10 (soon: left out), cell 1 never.
        sharpest[100]![2] = 0.9;
        sharpest[10]![3] = 0.9;
        sharpest[5]![1] = 0.3;
        // Generated cell 0 (position 4) is read again at row 90, 90 tokens after being written; it got little at first.
        sharpest[90]![4] = 0.8;
        // Generated cell 1 (position 5) is read right after being written, then never again.
        sharpest[2]![5] = 0.7;
        const into = {
            question: {needed: [] as number[], notNeeded: [] as number[]},
            generated: {needed: [] as number[], notNeeded: [] as number[]}
        };
        collect(sharpest, promptLength, into);
        expect(into.question.needed).toEqual([expect.closeTo(0.01, 6)]);
        expect(into.question.notNeeded).toEqual([expect.closeTo(0.3, 6)]);
        // Generated cells written at rows 0..135 have a later to tell; only the first is read later.
        expect(into.generated.needed).toHaveLength(1);
        expect(into.generated.needed[0]).toBeCloseTo(16 * 0.01, 5);
        expect(into.generated.notNeeded).toHaveLength(steps - 64 - 1);
        expect(into.generated.notNeeded[0]).toBeCloseTo(0.7 + 15 * 0.01, 5);
        expect(pairwiseAuc(into.generated.needed, into.generated.notNeeded)).toBeLessThan(0.5);
    });
});
