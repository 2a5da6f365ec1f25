import {describe, expect, it} from "vitest";
import {RoundCounters} from "../../../main/engine/pruning/RoundCounters.js";

const stats = {cellsUsed: 40, cellsAllocated: 256, bytesPerCell: 8, bytesAllocated: 2048, bytesUsed: 320, layers: 3};

function sampleOf(counters: RoundCounters, heads = false) {
    return counters.sample({since: counters.takeSince(), stats: stats as never, step: 7, tokensSeen: 100, tokensPerSecond: 12, heads});
}

describe("RoundCounters", () => {
    it("counts rounds and hands each sample only the rounds and evictions since the last one", () => {
        const counters = new RoundCounters();
        counters.countRound({evict: Int32Array.of(3, 4, 5), evicted: 3, ms: 2.4, step: 1, tokensSeen: 60});
        counters.countRound({evict: Int32Array.of(9), evicted: 1, ms: 1.4, step: 2, tokensSeen: 70});
        const first = sampleOf(counters);
        expect(first.pruneRounds).toBe(2);
        expect(first.tokensEvicted).toBe(4);
        expect(first.scoringMs).toBe(4);
        expect(first.evicted).toEqual([3, 6, 9, 10]);
        expect(first.rounds?.map((r) => r.tokensSeen)).toEqual([60, 70]);
        expect(first.movingMs).toBeUndefined();
        expect(first.sparsityPerLayer).toEqual([0, 0, 0]);
        const second = sampleOf(counters);
        expect(second.evicted).toEqual([]);
        expect(second.rounds).toBeUndefined();
        expect(second.pruneRounds).toBe(2);
    });

    it("keeps the peak of the cells it saw and the moving time on per-head cells", () => {
        const counters = new RoundCounters();
        counters.seeCells(90);
        counters.seeCells(50);
        counters.countRound({evict: new Int32Array(0), evicted: 0, ms: 5, movingMs: 2.6, step: 0, tokensSeen: 10});
        const sample = sampleOf(counters, true);
        expect(sample.cellsPeak).toBe(90);
        expect(sample.movingMs).toBe(3);
        expect(sample.evicted).toEqual([]);
    });

    it("saves and loads every counter", () => {
        const counters = new RoundCounters();
        counters.seeCells(33);
        counters.decided(2, Float32Array.of(0.5, 0.25));
        counters.countRound({evict: Int32Array.of(1), evicted: 1, ms: 3, movingMs: 1, step: 4, tokensSeen: 20});
        const loaded = new RoundCounters();
        loaded.load(counters.save());
        expect(loaded.save()).toEqual(counters.save());
        expect(sampleOf(loaded, true)).toMatchObject({
            pruneRounds: 1,
            forcedDrops: 2,
            cellsPeak: 40,
            movingMs: 1,
            sparsityPerLayer: [0.5, 0.25]
        });
    });
});
