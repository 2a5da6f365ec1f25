import {describe, expect, it} from "vitest";
import {MULTI_FAMILIES} from "../../../main/demo/multiTask.js";
import {
    FIRST_MODEL_FILE,
    isAskedInWords,
    multiSampleProblem,
    shippedModelFile,
    shippedModelSample
} from "../../../main/demo/shippedModelSample.js";

const bundled = "/app/resources/models/ponder-demo.gguf";
const beside = (name: string) => `/app/resources/models/${name}`;

describe("the shipped models' samples", () => {
    it("offers each shipped model a held-out problem of its own task, and nothing to a model elsewhere or unknown", () => {
        expect(shippedModelSample(bundled, bundled, 3, {minSteps: 10, maxSteps: 20})).toMatchObject({task: "demo"});
        expect(shippedModelSample(beside("ponder-merge.gguf"), bundled, 3, {})).toMatchObject({task: "merge"});
        expect(shippedModelSample(beside("ponder-multi.gguf"), bundled, 3, {})).toMatchObject({task: "multi"});
        expect(shippedModelSample("/elsewhere/ponder-multi.gguf", bundled, 3, {})).toBeNull();
        expect(shippedModelSample(beside("qwen.gguf"), bundled, 3, {})).toBeNull();
        expect(shippedModelFile(beside(FIRST_MODEL_FILE), bundled)).toBe("ponder-multi.gguf");
        expect(shippedModelFile(beside("qwen.gguf"), bundled)).toBeNull();
        expect(shippedModelFile(beside("toString"), bundled)).toBeNull();
    });

    it("gives the many-task model a sample of every family in turn, asked in words, with the generator's answer", () => {
        const samples = MULTI_FAMILIES.map((_, offset) => shippedModelSample(beside("ponder-multi.gguf"), bundled, 1000 + offset, {})!);
        for (const [index, sample] of samples.entries()) {
            const family = MULTI_FAMILIES[(1000 + index) % MULTI_FAMILIES.length]!;
            const problem = multiSampleProblem(sample.seed, family);
            expect(problem.family).toBe(family);
            expect(sample.seed).toBeGreaterThanOrEqual(2 ** 31);
            expect(sample.question).toBe(problem.question);
            expect(sample.answer).toBe(problem.answer);
            expect(isAskedInWords(sample.question), sample.question).toBe(true);
            expect(sample.size).toMatch(/^\d+ (steps|numbers|arrows|votes)$/);
            expect(sample.answerMeaning.length).toBeGreaterThan(8);
        }
        expect(new Set(samples.map((sample) => sample.answerMeaning)).size).toBe(6);
    });

    it("never offers the bare formats the program and merge tasks also take, at any offset", () => {
        // The generator draws them (one program question in 5, one merge question in 4): the samples step past them.
        const bare = (family: "program" | "merge") =>
            Array.from({length: 60}, (_, i) => multiSampleProblem(0x80000000 + i, family)).filter((p) => !isAskedInWords(p.question));
        expect(bare("program").length).toBeGreaterThan(3);
        expect(bare("merge").length).toBeGreaterThan(3);
        expect(bare("program")[0]!.question).toMatch(/^[a-z]=\d,/);
        for (let offset = 0; offset < 600; offset++) {
            const sample = shippedModelSample(beside("ponder-multi.gguf"), bundled, offset, {})!;
            expect(isAskedInWords(sample.question), `offset ${offset}: ${sample.question}`).toBe(true);
            // The seed shown is the one drawn: the generator makes the same question from it.
            expect(multiSampleProblem(sample.seed, MULTI_FAMILIES[offset % MULTI_FAMILIES.length]!).question).toBe(sample.question);
        }
    });
});
