import {describe, expect, it} from "vitest";
import {recordSample} from "../../../main/services/recordSample.js";
import type {MessageStats, PruneRound, TokenScores} from "../../../preload/contract.js";
import {evictedThrough, hexOfLayers, layersOfHex, mergeTokenScores, pushRound, tokenScoreAt} from "../../../preload/tokenScores.js";
import {kvSample} from "../renderer/fakeBridge.js";

function record(positions: number[], round: number, kind: TokenScores["kind"] = "attention"): TokenScores {
    return {
        kind,
        layers: 5,
        positions,
        scores: positions.map((position) => position / 10),
        rounds: positions.map(() => round),
        keptBy: positions.map(() => "11")
    };
}

const round = (n: number, evicted: number[] = [n * 10, n * 10 + 5]): PruneRound => ({
    first: n,
    last: n,
    step: n * 8,
    tokensSeen: 100 + n * 8,
    evicted
});

describe("what prune rounds record of tokens", () => {
    it("writes and reads which layers kept a cell as hex, the first digit for layers 0-3", () => {
        // 6 layers x 2 cells, layer-major: cell 0 kept by layers 0, 2, 5; cell 1 by layer 4.
        const mask = Uint8Array.from([1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0]);
        expect(hexOfLayers(mask, 6, 2, 0)).toBe("52");
        expect(hexOfLayers(mask, 6, 2, 1)).toBe("01");
        expect(layersOfHex("52", 6)).toEqual([0, 2, 5]);
        expect(layersOfHex("01", 6)).toEqual([4]);
        // Bits past the model's layers are not layers.
        expect(layersOfHex("ff", 6)).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it("merges records by position, the newer winning, and keeps the newest positions within the cap", () => {
        const merged = mergeTokenScores(record([1, 3, 5], 1), record([3, 4], 2));
        expect(merged.positions).toEqual([1, 3, 4, 5]);
        expect(merged.rounds).toEqual([1, 2, 2, 1]);
        expect(mergeTokenScores(merged, record([9], 3), 3).positions).toEqual([4, 5, 9]);
        // Another kind (a record of another policy) starts over.
        expect(mergeTokenScores(merged, record([2], 3, "retention")).positions).toEqual([2]);
        expect(tokenScoreAt(merged, 4)).toEqual({score: 0.4, round: 2, keptBy: [0, 4]});
        expect(tokenScoreAt(merged, 2)).toBeNull();
        expect(tokenScoreAt(undefined, 2)).toBeNull();
    });

    it("keeps at most the cap of rounds, merging neighbours and their evictions, and knows what was evicted through each", () => {
        const rounds: PruneRound[] = [];
        for (let n = 1; n <= 9; n++) pushRound(rounds, round(n), 4);
        expect(rounds.length).toBeLessThanOrEqual(4);
        expect(rounds[0]!.first).toBe(1);
        expect(rounds.at(-1)!.last).toBe(9);
        // Every round is still counted once, in order.
        for (let i = 1; i < rounds.length; i++) expect(rounds[i]!.first).toBe(rounds[i - 1]!.last + 1);
        expect(evictedThrough(rounds, rounds.length - 1)).toEqual(
            Array.from({length: 9}, (_, i) => [(i + 1) * 10, (i + 1) * 10 + 5]).flat()
        );
        expect(evictedThrough([round(1, [0, 4]), round(2, [4, 9])], 0)).toEqual([0, 4]);
        expect(evictedThrough([round(1, [0, 4]), round(2, [4, 9])], 1)).toEqual([0, 9]);
    });

    it("stores a sample's rounds and token scores beside the samples, which stay as small as before", () => {
        const stats: MessageStats = {policy: "lethe", budgetCells: 64, samples: []};
        recordSample(stats, kvSample({step: 8, tokens: record([1, 2], 1), rounds: [round(1)]}), 400);
        recordSample(stats, kvSample({step: 16}), 400);
        recordSample(stats, kvSample({step: 24, tokens: record([2, 3], 2), rounds: [round(2), round(3)]}), 400);
        expect(stats.samples.map((sample) => [sample.step, "tokens" in sample, "rounds" in sample])).toEqual([
            [8, false, false],
            [16, false, false],
            [24, false, false]
        ]);
        expect(stats.tokens?.positions).toEqual([1, 2, 3]);
        expect(stats.tokens?.rounds).toEqual([1, 2, 2]);
        expect(stats.rounds?.map((r) => r.first)).toEqual([1, 2, 3]);
    });
});
