import {describe, expect, test} from "vitest";
import {describeFootprint, formatMemory, formatPercent, formatPerToken, lastSample, savingsOf, splitMemory} from "../../../renderer/lib/formatMemory.js";
import {kvSample} from "./fakeBridge.js";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

describe("memory formatting", () => {
    test("bytes read as MiB below a GiB and as GiB above, with sensible precision", () => {
        expect(formatMemory(0)).toBe("0.00 MiB");
        expect(formatMemory(64 * 1024)).toBe("0.06 MiB");
        expect(formatMemory(1.5 * MiB)).toBe("1.50 MiB");
        expect(formatMemory(12.34 * MiB)).toBe("12.3 MiB");
        expect(formatMemory(512 * MiB)).toBe("512 MiB");
        expect(formatMemory(1023.9 * MiB)).toBe("1024 MiB");
        expect(formatMemory(GiB)).toBe("1.00 GiB");
        expect(formatMemory(1.25 * GiB)).toBe("1.25 GiB");
        expect(formatMemory(40 * GiB)).toBe("40.0 GiB");
        expect(splitMemory(12.34 * MiB)).toEqual({value: "12.3", unit: "MiB"});
        expect(formatMemory(Number.NaN)).toBe("0.00 MiB");
    });

    test("per-token costs read in KiB until a MiB", () => {
        expect(formatPerToken(512)).toBe("0.5 KiB/token");
        expect(formatPerToken(131_072)).toBe("128 KiB/token");
        expect(formatPerToken(1.5 * MiB)).toBe("1.50 MiB/token");
    });

    test("savings are 1 - part / full, as a rounded percent", () => {
        expect(savingsOf(38, 100)).toBeCloseTo(0.62);
        expect(formatPercent(savingsOf(38, 100))).toBe("62%");
        expect(formatPercent(savingsOf(100, 100))).toBe("0%");
        expect(formatPercent(savingsOf(120, 100))).toBe("−20%");
        expect(savingsOf(10, 0)).toBeNull();
        expect(formatPercent(null)).toBe("–");
    });

    test("a message's footprint is its last sample, live bytes and savings", () => {
        const sample = kvSample({liveBytes: 12.3 * MiB, fullBytes: 32.4 * MiB});
        expect(describeFootprint(sample)).toBe("KV 12.3 MiB live · 62% saved");
        expect(describeFootprint(kvSample({liveBytes: MiB, fullBytes: 0}))).toBe("KV 1.00 MiB live");
        expect(lastSample({policy: "h2o", budgetCells: 512, samples: [kvSample({step: 1}), kvSample({step: 9})]})?.step).toBe(9);
        expect(lastSample(null)).toBeNull();
        expect(lastSample({policy: "h2o", budgetCells: 512, samples: []})).toBeNull();
    });
});
