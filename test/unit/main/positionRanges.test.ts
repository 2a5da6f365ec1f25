import {describe, expect, it} from "vitest";
import type {KvSample} from "../../../preload/contract.js";
import {maskOfRanges, mergeRanges, toRanges} from "../../../preload/positionRanges.js";
import {pushSample} from "../../../main/services/pushSample.js";
import {kvSample} from "../renderer/fakeBridge.js";

describe("evicted positions as ranges", () => {
    it("sorts and merges adjacent and repeated positions into half-open ranges", () => {
        expect(toRanges([])).toEqual([]);
        expect(toRanges(Int32Array.from([9, 3, 4, 5, 12, 10, 4]))).toEqual([3, 6, 9, 11, 12, 13]);
    });

    it("unites two lists, merging what overlaps or touches", () => {
        expect(mergeRanges([3, 6, 20, 22], [0, 2, 5, 9, 22, 23])).toEqual([0, 2, 3, 9, 20, 23]);
        expect(mergeRanges([], [1, 2])).toEqual([1, 2]);
    });

    it("marks the positions held below a length", () => {
        expect(Array.from(maskOfRanges([1, 3, 5, 9], 7))).toEqual([0, 1, 1, 0, 0, 1, 1]);
    });
});

describe("memory samples thinned out", () => {
    it("keep every evicted position: a sample left out hands its ranges to the next one kept", () => {
        const samples: KvSample[] = [];
        for (let step = 0; step < 9; step++) pushSample(samples, kvSample({step, evicted: [step * 10, step * 10 + 2]}), 8);
        expect(samples.length).toBeLessThan(9);
        const union = samples.reduce((all, sample) => mergeRanges(all, sample.evicted ?? []), [] as number[]);
        expect(union).toEqual(Array.from({length: 9}, (_, step) => [step * 10, step * 10 + 2]).flat());
    });
});
