import {describe, expect, it} from "vitest";
import {benchModels} from "../../bench/benchModels.js";
import {problemSets} from "../../bench/quality.js";
import {heldOutDemoProblems} from "../../eval/demoTask.js";
import {heldOutMergeProblems} from "../../eval/mergeTask.js";

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
});
