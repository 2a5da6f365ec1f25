// The training tool's loss weights on the many-task model's problems, read through its own make_batch
// (test/eval/train/lossWeights.py): the answer and the thought's tokens that decide it weigh --answer-loss, every other
// token of the assistant's turn 1. Where each family's deciding tokens are is what the training learns first, so a
// change to a thought's format that moves them fails here.
import {execFileSync} from "node:child_process";
import path from "node:path";
import {expect, test} from "vitest";
import {torchPython} from "../fixtures/torchPython.js";

const script = path.resolve(import.meta.dirname, "../eval/train/lossWeights.py");

type Weighed = {seed: number; family: string; targets: [string, number][]};

const SEEDS = [3, 17, 40, 41];

function weights(families: string[]): Weighed[] {
    const stdout = execFileSync(
        torchPython(),
        [script, "--task", "multi", "--families", families.join(","), "--seeds", SEEDS.join(","), "--answer-loss", "3"],
        {encoding: "utf8", timeout: 120_000}
    );
    return stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Weighed);
}

/**
 * The thought's targets (up to `</think>`, included), the answer's (after it and the blank line, the closing token left
 * out) and the closing token's.
 */
function split(targets: [string, number][]) {
    const end = targets.findIndex(([text]) => text === "</think>");
    expect(end).toBeGreaterThan(0);
    const rest = targets.slice(end + 1, -1);
    const blank = rest.findIndex(([text]) => text.trim() !== "");
    expect(rest.slice(0, blank).every(([, weight]) => weight === 1)).toBe(true);
    return {thought: targets.slice(0, end + 1), answer: rest.slice(blank), close: targets.at(-1)!};
}

test("sum and reverse weigh each line's first token and </think> as the answer: the choice between one more item and the end", () => {
    const rows = weights(["sum", "reverse"]);
    expect(rows.map((row) => row.family)).toEqual([...SEEDS.map(() => "sum"), ...SEEDS.map(() => "reverse")]);
    for (const row of rows) {
        const {thought, answer, close} = split(row.targets);
        const lines = thought
            .map(([text]) => text)
            .join("")
            .split("\n").length; // the last "line" is </think>
        const heavy = thought.flatMap(([text, weight], i) => (weight === 3 ? [{text, after: thought[i - 1]?.[0]}] : []));
        expect(heavy).toHaveLength(lines - 1);
        expect(heavy.every(({after}) => after === "\n")).toBe(true);
        expect(heavy.at(-1)!.text).toBe("</think>");
        expect(heavy.slice(0, -1).every(({text}) => /^\d/.test(text))).toBe(true);
        // the first line's number (always 01) and every other token of the thought weigh 1
        expect(thought[0]![1]).toBe(1);
        expect(thought.filter(([, weight]) => weight !== 1 && weight !== 3)).toEqual([]);
        expect(answer.every(([, weight]) => weight === 3)).toBe(true);
        expect(close).toEqual(["<|im_end|>", 1]);
    }
});

test("tally weighs its mark on every vote's line; chase and program only their answers", () => {
    for (const row of weights(["tally", "chase", "program"])) {
        const {thought, answer} = split(row.targets);
        const heavy = thought.filter(([, weight]) => weight === 3).map(([text]) => text);
        if (row.family === "tally") {
            const votes =
                thought
                    .map(([text]) => text)
                    .join("")
                    .split("\n").length - 2; // less line 00 and </think>
            expect(heavy).toHaveLength(votes);
            expect(heavy.every((text) => text === "+" || text === ".")).toBe(true);
        } else {
            expect(heavy).toEqual([]);
        }
        expect(answer.length).toBeGreaterThan(0);
        expect(answer.every(([, weight]) => weight === 3)).toBe(true);
    }
});
