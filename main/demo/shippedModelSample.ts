// The sample problems of the models Ponder ships in resources/models: each is trained on its task (the many-task model
// on six families asked in words), and a held-out problem of that task (seeds from 2^31, never trained on) is the kind
// of question it can answer.

import path from "node:path";
import type {DemoSample} from "../../preload/contract.js";
import {heldOutDemoProblems, type DemoTaskOptions} from "./demoTask.js";
import {heldOutMergeProblems} from "./mergeTask.js";
import {generateMultiProblem, MULTI_FAMILIES, type MultiFamily} from "./multiTask.js";

const ordinal = (n: number) => {
    const suffix = n % 100 >= 11 && n % 100 <= 13 ? "th" : (["th", "st", "nd", "rd"][n % 10] ?? "th");
    return `${n}${suffix}`;
};

/** What the many-task model's answer is, by family. */
const FAMILY_ANSWERS: Record<MultiFamily, {meaning: string; unit: string}> = {
    program: {meaning: "the value of the variable asked for", unit: "steps"},
    merge: {meaning: "the number at the position asked for in the merged list", unit: "numbers"},
    sum: {meaning: "the last two digits of the total", unit: "numbers"},
    chase: {meaning: "the number where the arrows stop", unit: "arrows"},
    reverse: {meaning: "the numbers in reverse order", unit: "numbers"},
    tally: {meaning: "the votes of the candidate asked for", unit: "votes"}
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
    },
    // A family by the offset, a seed from 2^31 up (held out), a fifth to a half of the family's largest size: it answers in seconds.
    "ponder-multi.gguf": (offset) => {
        const family = MULTI_FAMILIES[offset % MULTI_FAMILIES.length]!;
        const seed = (0x80000000 + offset) >>> 0;
        const problem = generateMultiProblem(seed, {families: [family], minScale: 20, maxScale: 50, minKShare: 0.5});
        return {
            task: "multi",
            question: problem.question,
            answer: problem.answer,
            answerMeaning: FAMILY_ANSWERS[family].meaning,
            size: `${problem.size} ${FAMILY_ANSWERS[family].unit}`,
            seed,
            about: "A small model trained here on six kinds of step-by-step problems asked in words: running a short program, merging sorted lists, adding numbers, following arrows, reversing a list and counting votes. It knows nothing else."
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
