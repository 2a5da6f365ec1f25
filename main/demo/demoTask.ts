// The demo reasoning task of the embedded model resources/models/ponder-demo.gguf (the app offers its held-out
// problems as samples; the tests and the bench grade with it): a TypeScript port of
// test/eval/train/task.py (same format, same mulberry32 stream: the same seed gives the same problem in both).
//
// A problem gives variables with one-digit values and a program of additions modulo 10; every operand is a
// variable or the result of any earlier step (usually far back), and the last step, always named ZZ, reads a step
// from the first quarter. The model thinks one line per step (operands with their values, then the two-digit sum
// whose last digit is the step's value) and answers the value of ZZ:
//
//   user:      k=7,a=3,q=5               thinking:  ZX=k:7+a:3=10          answer:  3
//              ZX=k+a                               ZY=ZX:0+q:5=05
//              ZY=ZX+q                              ZZ=ZX:0+a:3=03
//              ZZ=ZX+a
//              ZZ?
//
// Training uses seeds below 2^31; held-out problems use seeds from EVAL_SEED_BASE (2^31) up.

import {mulberry32} from "../shared/mulberry32.js";

export const EVAL_SEED_BASE = 0x80000000;

export const DEFAULT_MIN_STEPS = 10;
export const DEFAULT_MAX_STEPS = 110;
export const DEFAULT_MIN_VARS = 6;
export const DEFAULT_MAX_VARS = 16;
const P_STEP_OPERAND_1 = 0.7;
const P_STEP_OPERAND_2 = 0.3;

const UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER = "abcdefghijklmnopqrstuvwxyz";
const LAST_STEP_INDEX = 26 * 26 - 1; // "ZZ"

export type DemoTaskOptions = {
    minSteps?: number;
    maxSteps?: number;
    minVars?: number;
    maxVars?: number;
    /**
     * Read mostly recent steps, as natural chains of thought do: a step operand is one of the last `recentSteps` steps,
     * except with probability `farShare` any earlier step. Unset (the training distribution): any earlier step, uniformly.
     */
    locality?: {recentSteps: number; farShare: number};
};

/** A problem of one of the synthetic reasoning tasks (the demo task and its siblings), drawn from its seed. */
export type TaskProblem = {
    seed: number;
    /** The user message. */
    question: string;
    /** The reference thinking (lines joined by "\n", no leading/trailing newline). */
    thinking: string;
    /** The expected answer. */
    answer: string;
};

/** A demo task problem: its answer is one digit. */
export type DemoProblem = TaskProblem & {steps: number; vars: number};

function stepName(index: number) {
    return UPPER[Math.floor(index / 26)]! + UPPER[index % 26]!;
}

export function generateDemoProblem(seed: number, options: DemoTaskOptions = {}): DemoProblem {
    const minSteps = options.minSteps ?? DEFAULT_MIN_STEPS;
    const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS;
    const minVars = options.minVars ?? DEFAULT_MIN_VARS;
    const maxVars = options.maxVars ?? DEFAULT_MAX_VARS;
    if (!(minSteps >= 1 && minSteps <= maxSteps && maxSteps <= 26 * 26)) throw new RangeError("need 1 <= minSteps <= maxSteps <= 676");
    if (!(minVars >= 1 && minVars <= maxVars && maxVars <= 26)) throw new RangeError("need 1 <= minVars <= maxVars <= 26");

    const rng = mulberry32(seed);
    const nSteps = minSteps + rng.int(maxSteps - minSteps + 1);
    const nVars = minVars + rng.int(maxVars - minVars + 1);

    const varNames: string[] = [];
    while (varNames.length < nVars) {
        const name = LOWER[rng.int(26)]!;
        if (!varNames.includes(name)) varNames.push(name);
    }
    const values = new Map<string, number>();
    for (const name of varNames) values.set(name, rng.int(10));

    const first = LAST_STEP_INDEX - (nSteps - 1);
    const names = Array.from({length: nSteps}, (_, k) => stepName(first + k));
    const program: string[] = [];
    const lines: string[] = [];
    const locality = options.locality;
    const earlierStep = (k: number) =>
        locality == null || rng.uniform() < locality.farShare
            ? names[rng.int(k)]!
            : names[k - 1 - rng.int(Math.min(locality.recentSteps, k))]!;
    names.forEach((name, k) => {
        let op1: string;
        let op2: string;
        if (k === nSteps - 1 && k > 0) {
            op1 = names[rng.int(Math.max(1, Math.floor((nSteps + 3) / 4)))]!;
            op2 = varNames[rng.int(nVars)]!;
        } else {
            op1 = k > 0 && rng.uniform() < P_STEP_OPERAND_1 ? earlierStep(k) : varNames[rng.int(nVars)]!;
            op2 = k > 0 && rng.uniform() < P_STEP_OPERAND_2 ? earlierStep(k) : varNames[rng.int(nVars)]!;
        }
        const v1 = values.get(op1)!;
        const v2 = values.get(op2)!;
        values.set(name, (v1 + v2) % 10);
        program.push(`${name}=${op1}+${op2}`);
        lines.push(`${name}=${op1}:${v1}+${op2}:${v2}=${String(v1 + v2).padStart(2, "0")}`);
    });

    const last = names[nSteps - 1]!;
    const question = varNames.map((v) => `${v}=${values.get(v)}`).join(",") + "\n" + program.join("\n") + "\n" + `${last}?`;
    return {seed, question, thinking: lines.join("\n"), answer: String(values.get(last)), steps: nSteps, vars: nVars};
}

/** `count` held-out problems: seeds EVAL_SEED_BASE + offset + i. */
export function heldOutDemoProblems(count: number, options: DemoTaskOptions = {}, offset = 0): DemoProblem[] {
    return Array.from({length: count}, (_, i) => generateDemoProblem((EVAL_SEED_BASE + offset + i) >>> 0, options));
}

/** The answer part of a model output: the text after the last `</think>` (if any), without `<|im_end|>`, trimmed. */
export function extractDemoAnswer(output: string): string {
    const parts = output.split("</think>");
    return parts[parts.length - 1]!.replace(/<\|im_end\|>/g, "").trim();
}

/** Grades an answer (the response text after the thinking): exactly the expected digit, surrounding whitespace allowed. */
export function isDemoAnswerCorrect(problem: Pick<DemoProblem, "answer">, answer: string): boolean {
    return extractDemoAnswer(answer) === problem.answer;
}

/**
 * Grades a thinking text line by line: how many of the reference lines it reproduces, in order, from the start
 * (a diagnostic for where a run went wrong; the answer alone decides correctness).
 */
export function demoThinkingPrefixLines(problem: Pick<DemoProblem, "thinking">, thinking: string): number {
    const expected = problem.thinking.split("\n");
    const got = thinking.trim().split("\n");
    let n = 0;
    while (n < expected.length && n < got.length && got[n]!.trim() === expected[n]) n++;
    return n;
}
