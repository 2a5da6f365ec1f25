import {describe, expect, it} from "vitest";
import type {KvSample} from "../../../preload/contract.js";
import type {GenerationChunk} from "../../../main/engine/EngineApi.js";
import {compareRuns, type RecordedRun} from "../../vulkan/compareRuns.js";

const run = (chunks: [GenerationChunk["segment"], string, number][], samples: Partial<KvSample>[] = []): RecordedRun => ({
    chunks: chunks.map(([segment, text, tokens]) => ({segment, text, tokens})),
    samples: samples as KvSample[],
    stopReason: "maxTokens"
});

describe("compareRuns", () => {
    it("finds no divergence where the texts are equal and only the chunk boundaries differ", () => {
        const a = run([
            ["answer", "The sum", 2],
            ["answer", " is 12.", 3]
        ]);
        const b = run([
            ["answer", "The", 1],
            ["answer", " sum is", 2],
            ["answer", " 12.", 2]
        ]);
        expect(compareRuns(a, b)).toMatchObject({firstDivergence: null, firstDivergentChar: null, compared: 5});
    });

    it("counts the tokens of the chunks that end before the first differing character, in both runs", () => {
        const a = run([
            ["answer", "The", 1],
            ["answer", " sum", 1],
            ["answer", " is 12", 2]
        ]);
        const b = run([
            ["answer", "The sum", 2],
            ["answer", " is 13", 2]
        ]);
        expect(compareRuns(a, b)).toMatchObject({firstDivergentChar: "\u0000answer\u0000The sum is 1".length, firstDivergence: 2});
    });

    it("tells the same text in the thought from the answer", () => {
        const a = run([
            ["thought", "ok", 1],
            ["answer", "done", 1]
        ]);
        const b = run([
            ["thought", "ok", 1],
            ["thought", "done", 1]
        ]);
        expect(compareRuns(a, b).firstDivergence).toBe(1);
    });

    it("counts the samples whose counters differ before the divergence only", () => {
        const a = run(
            [
                ["answer", "ab", 2],
                ["answer", "c", 1]
            ],
            [
                {step: 1, cellsLive: 5, tokensEvicted: 0, pruneRounds: 0},
                {step: 3, cellsLive: 4, tokensEvicted: 2, pruneRounds: 1}
            ]
        );
        const b = run(
            [
                ["answer", "ab", 2],
                ["answer", "d", 1]
            ],
            [
                {step: 1, cellsLive: 6, tokensEvicted: 0, pruneRounds: 0},
                {step: 3, cellsLive: 9, tokensEvicted: 0, pruneRounds: 0}
            ]
        );
        expect(compareRuns(a, b)).toMatchObject({firstDivergence: 2, countersDiffer: 1});
    });
});
