import {describe, expect, it} from "vitest";
import {
    calibrationPrompts,
    demoTrainingSeedBase,
    demoValidationSeedBase,
    multiTaskPrompts
} from "../../../../main/engine/calibration/prompts.js";
import {EVAL_SEED_BASE, generateDemoProblem} from "../../../../main/demo/demoTask.js";
import {generateMergeProblem} from "../../../../main/demo/mergeTask.js";
import {generateMultiProblem, MULTI_FAMILIES} from "../../../../main/demo/multiTask.js";

describe("calibrationPrompts", () => {
    it("is a pure function of the seed, varied across the templates", () => {
        const a = calibrationPrompts("english", 60, 3);
        expect(calibrationPrompts("english", 60, 3)).toEqual(a);
        expect(calibrationPrompts("english", 60, 4).map((p) => p.user)).not.toEqual(a.map((p) => p.user));
        expect(new Set(a.map((p) => p.kind)).size).toBeGreaterThanOrEqual(8);
        expect(new Set(a.map((p) => p.user)).size).toBe(60);
    });

    it("holds validation prompts out of training", () => {
        const train = new Set(calibrationPrompts("english", 200, 0).map((p) => p.user));
        for (const p of calibrationPrompts("english", 50, 0, true)) expect(train.has(p.user)).toBe(false);
    });

    it("gives the demo model its task's training problems, never the held-out ones the bench grades", () => {
        const train = calibrationPrompts("demo", 40, 0);
        const validation = calibrationPrompts("demo", 16, 0, true);
        expect(train[0]!.seed).toBe(demoTrainingSeedBase);
        expect(train[0]!.user).toBe(generateDemoProblem(demoTrainingSeedBase).question);
        expect(validation[0]!.seed).toBe(demoValidationSeedBase);
        for (const p of [...train, ...validation, ...calibrationPrompts("demo", 1000, 49, true)])
            expect(p.seed).toBeLessThan(EVAL_SEED_BASE / 2);
        expect(() => calibrationPrompts("demo", 1001, 0)).toThrow(RangeError);
    });

    it("gives the merge model its task's training problems, never the held-out ones the bench grades", () => {
        const train = calibrationPrompts("merge", 40, 0);
        const validation = calibrationPrompts("merge", 16, 0, true);
        expect(train[0]).toEqual({kind: "merge", user: generateMergeProblem(demoTrainingSeedBase).question, seed: demoTrainingSeedBase});
        expect(validation[0]!.user).toBe(generateMergeProblem(demoValidationSeedBase).question);
        expect(new Set([...train, ...validation].map((p) => p.user)).size).toBe(56);
        for (const p of [...train, ...validation, ...calibrationPrompts("merge", 1000, 49, true)])
            expect(p.seed).toBeLessThan(EVAL_SEED_BASE / 2);
        expect(() => calibrationPrompts("merge", 1001, 0)).toThrow(RangeError);
    });

    it("gives the many-task model its families' training problems, and a calibration on some families only those", () => {
        const train = calibrationPrompts("multi", 60, 0);
        const validation = calibrationPrompts("multi", 16, 0, true);
        expect(train[0]).toEqual({
            kind: generateMultiProblem(demoTrainingSeedBase).family,
            user: generateMultiProblem(demoTrainingSeedBase).question,
            seed: demoTrainingSeedBase
        });
        expect(new Set(train.map((p) => p.kind))).toEqual(new Set(MULTI_FAMILIES));
        expect(new Set([...train, ...validation].map((p) => p.user)).size).toBe(76);
        for (const p of [...train, ...validation]) expect(p.seed).toBeLessThan(EVAL_SEED_BASE / 2);
        const some = multiTaskPrompts(40, 0, false, ["sum", "chase"]);
        expect(new Set(some.map((p) => p.kind))).toEqual(new Set(["sum", "chase"]));
        expect(some.map((p) => p.user)).toEqual(some.map((p) => generateMultiProblem(p.seed, {families: ["sum", "chase"]}).question));
        expect(() => multiTaskPrompts(1001, 0)).toThrow(RangeError);
    });
});
