import {describe, expect, it} from "vitest";
import {benchModels} from "../../bench/benchModels.js";
import {problemSets} from "../../bench/quality.js";
import {heldOutDemoProblems} from "../../eval/demoTask.js";
import {heldOutMergeProblems} from "../../eval/mergeTask.js";
import {generateMultiProblem, MULTI_FAMILIES, type MultiProblem} from "../../../main/demo/multiTask.js";

describe("the bench's --models and --sets", () => {
    it("runs the demo model's sets and the random-weights fidelity table without either flag, as before", () => {
        expect(benchModels({})).toEqual({models: null, sets: ["demo", "local"]});
    });

    it("runs every set of the models named, each model on its own task's set", () => {
        expect(benchModels({models: "merge"})).toEqual({models: [{name: "merge", set: "merge"}], sets: ["merge", "merge-any"]});
        expect(benchModels({models: "demo"})).toEqual({models: [{name: "demo", set: "demo"}], sets: ["demo", "local"]});
        expect(benchModels({models: "merge,demo"})).toEqual({
            models: [
                {name: "merge", set: "merge"},
                {name: "demo", set: "demo"}
            ],
            sets: ["demo", "local", "merge", "merge-any"]
        });
    });

    it("keeps --sets as it was, and checks it against --models when both are named", () => {
        expect(benchModels({sets: "merge"})).toEqual({models: null, sets: ["merge"]});
        expect(benchModels({sets: "local,merge"})).toEqual({models: null, sets: ["local", "merge"]});
        expect(benchModels({models: "demo", sets: "local"})).toEqual({models: [{name: "demo", set: "demo"}], sets: ["local"]});
        expect(() => benchModels({models: "demo", sets: "merge"})).toThrow(/merge model/);
    });

    it("refuses unknown, repeated and empty names", () => {
        expect(() => benchModels({models: "qwen"})).toThrow(/Unknown model qwen/);
        expect(() => benchModels({sets: "sums"})).toThrow(/Unknown problem set sums/);
        expect(() => benchModels({models: "merge,merge"})).toThrow(/twice/);
        expect(() => benchModels({models: ","})).toThrow(/names nothing/);
    });

    it("gives each model the held-out problems of its own task", () => {
        for (const {name, set} of benchModels({models: "demo,merge"}).models!) {
            const problems = problemSets[set]!.problems(3);
            const own = name === "merge" ? heldOutMergeProblems(3) : heldOutDemoProblems(3);
            expect(problemSets[set]!.model).toBe(name);
            expect(problems.map((problem) => [problem.question, problem.answer])).toEqual(
                own.map((problem) => [problem.question, problem.answer])
            );
        }
        expect(heldOutMergeProblems(1)[0]!.question).not.toBe(heldOutDemoProblems(1)[0]!.question);
    });

    it("asks the merge set's problems a position in the second half, the merge-any set's any position of the same lists", () => {
        const late = problemSets.merge!.problems(40);
        const any = problemSets["merge-any"]!.problems(40);
        const k = (question: string) => Number(/k=(\d+)\?/.exec(question)![1]);
        const items = (question: string) => question.split("\n").slice(0, 2).join(",").split(",").length;
        expect(late.every((problem) => k(problem.question) > items(problem.question) / 2)).toBe(true);
        expect(any.some((problem) => k(problem.question) <= items(problem.question) / 2)).toBe(true);
        expect(any.map((problem) => problem.question.split("\n")[0])).toEqual(late.map((problem) => problem.question.split("\n")[0]));
    });

    it("runs the many-task model on a set per family, the mixed set by name only", () => {
        const families = MULTI_FAMILIES.map((family) => `multi-${family}`);
        expect(benchModels({models: "multi"})).toEqual({models: [{name: "multi", set: "multi"}], sets: families});
        expect(benchModels({models: "multi", sets: "multi,multi-sum"}).sets).toEqual(["multi", "multi-sum"]);
        expect(() => benchModels({models: "demo", sets: "multi-sum"})).toThrow(/multi model/);
    });

    it("asks each family set only its family, at held-out sizes on seeds training never draws, and apart from the other sets", () => {
        const seen = new Set<string>();
        for (const family of MULTI_FAMILIES) {
            // The multi sets' problems are the generator's, seed and family included.
            const problems = problemSets[`multi-${family}`]!.problems(12) as MultiProblem[];
            for (const problem of problems) {
                const seed = problem.seed;
                expect(seed).toBeGreaterThanOrEqual(2 ** 31);
                expect(generateMultiProblem(seed, {families: [family], minScale: 50, maxScale: 100, minKShare: 0.5})).toEqual(problem);
                expect(seen.has(problem.question)).toBe(false);
                seen.add(problem.question);
            }
            expect(new Set(problems.map((problem) => problem.family))).toEqual(new Set([family]));
        }
        const mixed = problemSets.multi!.problems(60) as MultiProblem[];
        expect(new Set(mixed.map((problem) => problem.family)).size).toBe(MULTI_FAMILIES.length);
    });
});
