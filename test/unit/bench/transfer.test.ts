import {describe, expect, it} from "vitest";
import {fullRunsOf, transferTable, type TransferRow} from "../../bench/transfer.js";

const row = (
    family: TransferRow["family"],
    policy: string,
    share: number,
    accuracy: number,
    thoughtExact: number | null = null
): TransferRow => ({
    family,
    policy,
    share,
    accuracy,
    thoughtExact
});

describe("the transfer suite's table", () => {
    it("averages each policy over the held-out families and over the calibrated ones, apart, at each share", () => {
        const rows = [
            row("reverse", "full", 1, 1, 1),
            row("tally", "full", 1, 0.5, 1),
            row("sum", "full", 1, 1, 1),
            row("reverse", "trimkv (prompts)", 0.5, 1, 0.5),
            row("tally", "trimkv (prompts)", 0.5, 0.5, 0.25),
            row("sum", "trimkv (prompts)", 0.5, 0.25, 0),
            row("reverse", "h2o", 0.5, 0, 0),
            row("sum", "h2o", 0.5, 0.75, 0.5)
        ];
        const lines = transferTable(rows, ["reverse", "tally"], [0.5]).split("\n");
        const cells = (name: string) =>
            lines
                .find((line) => line.startsWith(`| ${name} `))!
                .split("|")
                .slice(2, -1)
                .map((cell) => cell.trim());
        expect(lines[0]).toMatch(/held out, 50% .* calibrated, 50%/);
        expect(cells("full")).toEqual(["0.750 (1.000)", "1.000 (1.000)"]);
        expect(cells("trimkv (prompts)")).toEqual(["0.750 (0.375)", "0.250 (0.000)"]);
        expect(cells("h2o")).toEqual(["0.000 (0.000)", "0.750 (0.500)"]);
    });

    it("marks a share no row measured", () => {
        const table = transferTable([row("sum", "lethe", 0.25, 1)], ["chase"], [0.25, 0.5]);
        expect(table.split("\n").find((line) => line.startsWith("| lethe "))).toMatch(/\| - \| - \| 1\.000 \| - \|/);
    });
});

describe("Full's runs kept between the transfer suite's sets", () => {
    it("takes back each family whose runs are whole and drops the others", () => {
        const run = {cells: 120, thought: "a", correct: true};
        const saved = {
            sum: [run, {...run, correct: false}],
            tally: [run, {cells: 0, thought: "b", correct: true}],
            chase: [{cells: 12, thought: 3, correct: true}],
            merge: "runs",
            reverse: []
        };
        expect(fullRunsOf(saved)).toEqual({sum: saved.sum});
        expect(fullRunsOf(null)).toBeUndefined();
        expect(fullRunsOf("full")).toBeUndefined();
    });
});
