import {describe, expect, test} from "vitest";
import {EVAL_SEED_BASE} from "../../eval/demoTask.js";
import {generateRecurProblem, heldOutRecurProblems} from "../../eval/recurTask.js";

describe("the recurrence task", () => {
    test("gives the problem test/eval/train/recurTask.py gives for the same seed", () => {
        // python3 test/eval/train/recurTask.py --seed 2147483655 --count 1 --min-lines 6 --max-lines 6
        expect(generateRecurProblem(EVAL_SEED_BASE + 7, {minLines: 6, maxLines: 6})).toEqual({
            seed: 2147483655,
            question: "AA=7,AB=5\nf(n)=f(n-1)+f(n/2)\nAH?",
            thinking:
                "AC=AB:5+AB:5=10/AH\nAD=AC:0+AB:5=05/AG\nAE=AD:5+AC:0=05/AF\nAF=AE:5+AC:0=05/AE\nAG=AF:5+AD:5=10/AD\nAH=AG:0+AD:5=05/AC",
            answer: "5",
            lines: 6
        });
        // python3 test/eval/train/recurTask.py --count 1
        const first = heldOutRecurProblems(1)[0]!;
        expect(first.seed).toBe(2 ** 31);
        expect(first.question.endsWith("\nEH?")).toBe(true);
        expect(first.thinking.endsWith("EG=EF:1+CD:7=08/AD\nEH=EG:8+CD:7=15/AC")).toBe(true);
        expect([first.answer, first.lines]).toEqual(["5", 110]);
    });

    test("thinks f(n) = f(n-1) + f(n/2) mod 10 one line per value, counting down from the asked name, and answers the asked line", () => {
        for (const problem of heldOutRecurProblems(100)) {
            const [seeds, rule, asked] = problem.question.split("\n");
            expect(rule).toBe("f(n)=f(n-1)+f(n/2)");
            const values = new Map(seeds!.split(",").map((pair) => [pair.slice(0, 2), Number(pair.slice(3))] as const));
            const lines = problem.thinking.split("\n");
            expect(lines).toHaveLength(problem.lines);
            expect(problem.lines).toBeGreaterThanOrEqual(60);
            expect(problem.lines).toBeLessThanOrEqual(120);
            const names: string[] = [...values.keys()];
            for (const [index, line] of lines.entries()) {
                const match = /^([A-Z]{2})=([A-Z]{2}):(\d)\+([A-Z]{2}):(\d)=(\d\d)\/([A-Z]{2})$/.exec(line)!;
                expect(match).not.toBeNull();
                const [, name, previous, a, half, b, sum, left] = match;
                const n = index + 2;
                expect([previous, half]).toEqual([names[n - 1], names[Math.floor(n / 2)]]);
                expect([Number(a), Number(b)]).toEqual([values.get(previous!), values.get(half!)]);
                expect(Number(sum)).toBe(Number(a) + Number(b));
                // a countdown of names: the asked name on the first line, AC (2) on the asked line
                const count = lines.length + 1 - index;
                expect(left).toBe("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[Math.floor(count / 26)]! + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[count % 26]!);
                names.push(name!);
                values.set(name!, Number(sum) % 10);
            }
            expect(asked).toBe(`${names[names.length - 1]}?`);
            expect(problem.answer).toBe(String(values.get(names[names.length - 1]!)));
        }
        expect(() => generateRecurProblem(1, {minLines: 0})).toThrow(RangeError);
        expect(() => generateRecurProblem(1, {minLines: 10, maxLines: 675})).toThrow(RangeError);
    });
});
