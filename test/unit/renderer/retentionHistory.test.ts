import {describe, expect, test} from "vitest";
import {createPointSeries, decimate} from "../../../renderer/lib/createPointSeries.js";
import {createRetentionHistory} from "../../../renderer/lib/createRetentionHistory.js";
import {kvSample} from "./fakeBridge.js";

describe("retention history (the heatmap's data)", () => {
    test("each sample is a column until the cap", () => {
        const history = createRetentionHistory(16);
        for (let step = 1; step <= 10; step++)
            history.push({step, keptPerLayer: [1, step / 10, 0]});
        expect(history.layers).toBe(3);
        expect(history.columns).toHaveLength(10);
        expect(history.columns[4]).toMatchObject({firstStep: 5, lastStep: 5, count: 1});
        expect(history.columns[4]!.kept[1]).toBeCloseTo(0.5);
    });

    test("memory stays bounded however long the answer, and columns hold the mean of their samples", () => {
        const history = createRetentionHistory(64);
        const samples = 100_000;
        for (let step = 1; step <= samples; step++)
            history.push({step, keptPerLayer: [step % 2, 0.25]});
        expect(history.columns.length).toBeLessThanOrEqual(64);
        expect(history.columns.length).toBeGreaterThanOrEqual(32);
        // Every sample is counted once, in order, without gaps.
        expect(history.columns.reduce((sum, column) => sum + column.count, 0)).toBe(samples);
        expect(history.columns[0]!.firstStep).toBe(1);
        expect(history.columns.at(-1)!.lastStep).toBe(samples);
        for (let i = 1; i < history.columns.length; i++)
            expect(history.columns[i]!.firstStep).toBe(history.columns[i - 1]!.lastStep + 1);
        // Alternating 0 and 1 averages to 0.5 in every full column; the constant layer stays constant.
        for (const column of history.columns.slice(0, -1)) {
            expect(column.kept[0]).toBeCloseTo(0.5, 5);
            expect(column.kept[1]).toBeCloseTo(0.25, 5);
        }
    });

    test("a sample with another layer count starts over; one without layers is skipped", () => {
        const history = createRetentionHistory(16);
        history.push({step: 1, keptPerLayer: [1, 1]});
        history.push({step: 2, keptPerLayer: []});
        expect(history.columns).toHaveLength(1);
        history.push({step: 3, keptPerLayer: [0.5, 0.5, 0.5]});
        expect(history.layers).toBe(3);
        expect(history.columns).toHaveLength(1);
    });

    test("the memory chart's points are thinned evenly, keeping both ends", () => {
        const points = Array.from({length: 1001}, (_, i) => i);
        const thinned = decimate(points, 101);
        expect(thinned).toHaveLength(101);
        expect(thinned[0]).toBe(0);
        expect(thinned.at(-1)).toBe(1000);
        expect(thinned[50]).toBe(500);
        expect(decimate([1, 2, 3], 10)).toEqual([1, 2, 3]);

        const series = createPointSeries(50);
        for (let step = 1; step <= 10_000; step++)
            series.push(kvSample({step, tokensSeen: step}));
        expect(series.points.length).toBeLessThanOrEqual(100);
        expect(series.points.at(-1)?.tokens).toBe(10_000);
    });
});
