import {describe, expect, test} from "vitest";
import {createPointSeries, decimate} from "../../../renderer/lib/createPointSeries.js";
import {createRetentionHistory} from "../../../renderer/lib/createRetentionHistory.js";
import {retentionAt} from "../../../renderer/lib/retentionAt.js";
import {retentionColor, retentionTicks} from "../../../renderer/lib/retentionColor.js";
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

    test("a column holds what the shared cells kept of the tokens seen, beside the layers' own shares", () => {
        const history = createRetentionHistory(4);
        // 128 live cells of 512, then of 1024 tokens seen: the shared cells keep 25%, then 12.5%.
        history.push({step: 1, keptPerLayer: [0.05, 0.2], cellsLive: 128, tokensSeen: 512});
        history.push({step: 2, keptPerLayer: [0.05, 0.2], cellsLive: 128, tokensSeen: 1024});
        expect(history.columns.map((column) => column.shared)).toEqual([0.25, 0.125]);
        // Merged columns average it like the layers.
        for (let step = 3; step <= 6; step++)
            history.push({step, keptPerLayer: [0.05, 0.2], cellsLive: 128, tokensSeen: 1024});
        expect(history.columns[0]!.shared).toBeCloseTo(0.1875);
        // Without the counts there is no shared share.
        history.clear();
        history.push({step: 1, keptPerLayer: [1]});
        expect(history.columns[0]!.shared).toBeNaN();
    });

    test("the pointer finds the layer, the steps and the share under it", () => {
        const history = createRetentionHistory(16);
        history.push({step: 10, keptPerLayer: [0.05, 0.4, 0.1, 0.3], cellsLive: 100, tokensSeen: 400});
        history.push({step: 20, keptPerLayer: [0.02, 0.3, 0.1, 0.2], cellsLive: 100, tokensSeen: 800});
        // Right half, second row of four: layer 1 at step 20.
        expect(retentionAt(history, 0.75, 0.3)).toEqual({layer: 1, firstStep: 20, lastStep: 20, value: expect.closeTo(0.3, 5)});
        expect(retentionAt(history, 0.1, 0.99)).toMatchObject({layer: 3, firstStep: 10, value: expect.closeTo(0.3, 5)});
        expect(retentionAt(history, 0.6, "shared")).toEqual({layer: "shared", firstStep: 20, lastStep: 20, value: 0.125});
        expect(retentionAt(history, 1.2, 0.5)).toBeNull();
        expect(retentionAt(createRetentionHistory(), 0.5, 0.5)).toBeNull();
    });

    test("the colour scale spreads small shares apart: 25% kept sits in the middle", () => {
        expect(retentionTicks.find((tick) => tick.share === 0.25)?.at).toBeCloseTo(0.5);
        // 2% and 20% are far apart on the scale, not both near the dark end.
        const [, g2] = retentionColor(0.02);
        const [, g20] = retentionColor(0.2);
        expect(g20 - g2).toBeGreaterThan(60);
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
