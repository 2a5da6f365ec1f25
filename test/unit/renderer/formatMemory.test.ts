import {describe, expect, test} from "vitest";
import {
    describeAnswerMemory,
    describeFootprint,
    describeSampleDetail,
    describeSavings,
    formatMemory,
    formatPercent,
    formatPerToken,
    lastSample,
    savingsOf,
    splitMemory
} from "../../../renderer/lib/formatMemory.js";
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

    test("a message's footprint is its last sample, live bytes and savings, in neutral words", () => {
        const sample = kvSample({liveBytes: 12.3 * MiB, fullBytes: 32.4 * MiB});
        // A measure of memory, not a verdict on the answer: no "saved".
        expect(describeFootprint(sample)).toBe("KV 12.3 MiB live · 62% less than a full cache");
        expect(describeFootprint(kvSample({liveBytes: MiB, fullBytes: 0}))).toBe("KV 1.00 MiB live");
        expect(describeSavings(-0.2)).toBe("20% more than a full cache");
        expect(describeSampleDetail(sample)).toMatch(/says nothing about whether the answer is right/);
        expect(describeSampleDetail(sample)).not.toMatch(/budget chose/);
        // Forced drops are explained where they are counted: the budget chose them, not the policy.
        expect(describeSampleDetail(kvSample({forcedDrops: 35}))).toMatch(/35 forced drops[\s\S]*the budget chose these, not the policy/);
        // The answer's peak of live cells, where the sample has it (older ones do not).
        expect(describeSampleDetail(kvSample({cellsLive: 100, cellsPeak: 128}))).toMatch(/\(100 cells, 128 at most\)/);
        expect(describeSampleDetail(kvSample({cellsLive: 100}))).toMatch(/\(100 cells\)/);
        expect(lastSample({policy: "h2o", budgetCells: 512, samples: [kvSample({step: 1}), kvSample({step: 9})]})?.step).toBe(9);
        expect(lastSample(null)).toBeNull();
        expect(lastSample({policy: "h2o", budgetCells: 512, samples: []})).toBeNull();
    });
});

describe("an answer's memory in words", () => {
    test("says how much it used against a full cache, and that it may differ from Full KV's only when the budget forced drops", () => {
        const plain = describeAnswerMemory(kvSample({liveBytes: 12.3 * MiB, fullBytes: 32.4 * MiB, forcedDrops: 0}));
        expect(plain.line).toBe("Used 12.3 MiB of memory, 62% less than a full cache (32.4 MiB)");
        expect(plain.mayDiffer).toBeNull();
        expect(describeAnswerMemory(kvSample({liveBytes: MiB, fullBytes: 0})).line).toBe("Used 1.00 MiB of memory");
        const forced = describeAnswerMemory(
            kvSample({forcedDrops: 457, pruneRounds: 12, tokensEvicted: 900, cellsLive: 128, tokensSeen: 1028, cellsAllocated: 256})
        );
        expect(forced.mayDiffer).toBe("The memory budget was full, so this answer may differ from the one a full cache gives.");
        // The jargon is in the advanced line only.
        expect(forced.line).not.toMatch(/forced|prune|round/);
        expect(forced.advanced).toBe(
            "128 of 1,028 tokens kept in 256 cells · 12 prune rounds · 900 evicted · " +
                "457 forced drops (freed by the full budget, not chosen by the policy)"
        );
    });
});

describe("file sizes", () => {
    test("are powers of 1024 and named so (a 4.87 MiB file is not 4.9 MB)", async () => {
        const {formatBytes} = await import("../../../renderer/lib/format.js");
        expect(formatBytes(5_106_880)).toBe("4.9 MiB");
        expect(formatBytes(512)).toBe("512 B");
        expect(formatBytes(1536)).toBe("1.5 KiB");
        expect(formatBytes(3 * GiB)).toBe("3.0 GiB");
    });
});

describe("parameter counts", () => {
    test("read as model cards write them", async () => {
        const {formatParameters} = await import("../../../renderer/lib/format.js");
        expect(formatParameters(1_777_088_000)).toBe("1.78 B");
        expect(formatParameters(494_032_768)).toBe("494 M");
        expect(formatParameters(2_400_000)).toBe("2.40 M");
        expect(formatParameters(12_345_678_901)).toBe("12.3 B");
        expect(formatParameters(950)).toBe("950");
    });
});

describe("list dates", () => {
    test("tell conversations apart: the time today, the day this year, the year before that", async () => {
        const {formatListDate} = await import("../../../renderer/lib/format.js");
        const now = new Date(2026, 2, 14, 18, 30).getTime();
        expect(formatListDate(new Date(2026, 2, 14, 9, 5).getTime(), now)).toBe("09:05");
        expect(formatListDate(new Date(2026, 0, 3, 23, 59).getTime(), now)).toBe("Jan 3");
        expect(formatListDate(new Date(2025, 11, 31, 12, 0).getTime(), now)).toBe("Dec 31, 2025");
    });
});
