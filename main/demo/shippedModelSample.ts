// The sample problems of the models Ponder ships in resources/models: each is trained on one task, and a held-out
// problem of that task (seeds from 2^31, never trained on) is the one kind of question it can answer.

import path from "node:path";
import type {DemoSample} from "../../preload/contract.js";
import {heldOutDemoProblems, type DemoTaskOptions} from "./demoTask.js";
import {heldOutMergeProblems} from "./mergeTask.js";

const ordinal = (n: number) => {
    const suffix = n % 100 >= 11 && n % 100 <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
    return `${n}${suffix}`;
};

/** Each shipped model's file name and a sample of its task at held-out offset `offset`. */
const SAMPLES: Record<string, (offset: number, demoSteps: DemoTaskOptions) => DemoSample> = {
    "ponder-demo.gguf": (offset, demoSteps) => {
        const problem = heldOutDemoProblems(1, demoSteps, offset)[0]!;
        return {
            task: "demo",
            question: problem.question,
            answer: problem.answer,
            answerMeaning: "the value of ZZ",
            size: `${problem.steps} steps`,
            seed: problem.seed,
            about: "A tiny model trained here on one task: a program of additions modulo 10 over one-digit variables, thought through step by step. It cannot chat."
        };
    },
    // 16-36 numbers, so it answers in seconds.
    "ponder-merge.gguf": (offset) => {
        const problem = heldOutMergeProblems(1, {minItems: 16, maxItems: 36}, offset)[0]!;
        return {
            task: "merge",
            question: problem.question,
            answer: problem.answer,
            answerMeaning: `the ${ordinal(problem.k)} number of the merge`,
            size: `${problem.items} numbers`,
            seed: problem.seed,
            about: "A tiny model trained here on one task: merging two sorted lists of two-digit numbers step by step and naming the k-th number of the merge. It cannot chat."
        };
    }
};

/**
 * A sample problem when `modelPath` is one of the models shipped beside `bundledModelPath` (the demo model), by its
 * file name; `null` for any other model. The demo model's samples have `demoSteps` steps.
 */
export function shippedModelSample(
    modelPath: string,
    bundledModelPath: string,
    offset: number,
    demoSteps: DemoTaskOptions
): DemoSample | null {
    if (path.dirname(path.resolve(modelPath)) !== path.dirname(path.resolve(bundledModelPath))) return null;
    return SAMPLES[path.basename(modelPath)]?.(offset, demoSteps) ?? null;
}
