// The sample problems of the models Ponder ships in resources/models: each is trained on its task (the many-task model
// on six families asked in words), and a held-out problem of that task (seeds from 2^31, never trained on) is the kind
// of question it can answer. The many-task model is the one a fresh install loads.

import path from "node:path";
import type {DemoSample} from "../../preload/contract.js";
import {heldOutDemoProblems, type DemoTaskOptions} from "./demoTask.js";
import {heldOutMergeProblems} from "./mergeTask.js";
import {generateMultiProblem, MULTI_FAMILIES, type MultiFamily, type MultiProblem} from "./multiTask.js";

/** The model a fresh install loads, in resources/models: the many-task model, asked in words. */
export const FIRST_MODEL_FILE = "ponder-multi.gguf";

/**
 * The share of each family's size range (percent, as `MultiTaskOptions`' scales) the many-task model's samples are
 * drawn from: sized so that every sample is a conversation of about twice `multiFirstBudgetCells`, answered in
 * seconds (counted with the training tool's tokenizer over 200 held-out seeds a family: 404 to 633 tokens, 90% of them
 * 440 to 560; chase varies most, by its path's length).
 */
export const MULTI_SAMPLE_SCALES: Readonly<Record<MultiFamily, readonly [number, number]>> = {
    program: [40, 45],
    merge: [45, 50],
    sum: [52, 60],
    chase: [62, 72],
    reverse: [90, 100],
    tally: [50, 58]
};

/** The many-task model's sample of `family` with this seed (the app's, the tests'). */
export function multiSampleProblem(seed: number, family: MultiFamily): MultiProblem {
    const [minScale, maxScale] = MULTI_SAMPLE_SCALES[family];
    return generateMultiProblem(seed, {families: [family], minScale, maxScale, minKShare: 0.5});
}

/** A question asked in words: two words of letters in a row, which the program and merge tasks' bare formats lack. */
export const isAskedInWords = (question: string) => /[a-z]{3,} [a-z]{2,}/i.test(question);

/** Draws `wordedSample` makes before it gives up: each is bare one time in 5 at most, so 64 in a row are a bug. */
const WORDED_DRAWS = 64;

/**
 * The many-task model's sample of `family` at the first seed from `seed` up, in steps of the number of families, whose
 * question is asked in words: the program and merge families also take their task's bare format (one question in 5
 * and in 4), which is no first question for a person. Its `seed` is the one drawn. Throws when `WORDED_DRAWS` draws in
 * a row are bare (the generator no longer words the family).
 */
export function wordedSample(seed: number, family: MultiFamily): {seed: number; problem: MultiProblem} {
    for (let draw = 0; draw < WORDED_DRAWS; draw++) {
        const drawn = (seed + draw * MULTI_FAMILIES.length) >>> 0;
        const problem = multiSampleProblem(drawn, family);
        if (isAskedInWords(problem.question)) return {seed: drawn, problem};
    }
    throw new Error(`no ${family} question asked in words in ${WORDED_DRAWS} draws from seed ${seed}`);
}

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
    // A family by the offset, a seed from 2^31 up (held out), sized by MULTI_SAMPLE_SCALES, asked in words.
    "ponder-multi.gguf": (offset) => {
        const family = MULTI_FAMILIES[offset % MULTI_FAMILIES.length]!;
        const {seed, problem} = wordedSample((0x80000000 + offset) >>> 0, family);
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
 * The file name of a model Ponder ships when `modelPath` is one (a file of resources/models beside `bundledModelPath`,
 * the model a fresh install loads); `null` for any other model, a copy elsewhere included.
 */
export function shippedModelFile(modelPath: string, bundledModelPath: string): string | null {
    if (path.dirname(path.resolve(modelPath)) !== path.dirname(path.resolve(bundledModelPath))) return null;
    const file = path.basename(modelPath);
    return Object.hasOwn(SAMPLES, file) ? file : null;
}

/**
 * A sample problem when `modelPath` is one of the models Ponder ships (`shippedModelFile`); `null` for any other model.
 * The demo model's samples have `demoSteps` steps.
 */
export function shippedModelSample(
    modelPath: string,
    bundledModelPath: string,
    offset: number,
    demoSteps: DemoTaskOptions
): DemoSample | null {
    const file = shippedModelFile(modelPath, bundledModelPath);
    return file != null ? SAMPLES[file]!(offset, demoSteps) : null;
}
