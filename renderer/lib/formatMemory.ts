// KV memory figures as people read them (a `KvSample`: live, allocated, what a full cache would hold): binary units,
// MiB up to a GiB, then GiB; savings in percent.

import {bytesPerMib as mib, type KvSample, type MessageStats} from "../../preload/contract.js";

const kib = 1024;
const gib = 1024 * mib;

export type MemoryParts = {value: string; unit: "KiB" | "MiB" | "GiB"};

function digits(value: number): string {
    return value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0);
}

/** `12_897_485` -> `{value: "12.3", unit: "MiB"}`: MiB below a GiB (two decimals under 10), GiB above. */
export function splitMemory(bytes: number): MemoryParts {
    const safe = Number.isFinite(bytes) ? Math.max(0, bytes) : 0;
    if (safe >= gib) return {value: digits(safe / gib), unit: "GiB"};
    return {value: digits(safe / mib), unit: "MiB"};
}

/** `"12.3 MiB"`, `"1.25 GiB"`, `"0.06 MiB"`. */
export function formatMemory(bytes: number): string {
    const {value, unit} = splitMemory(bytes);
    return `${value} ${unit}`;
}

/** Per-token cost, small: `"48 KiB/token"`, `"1.50 MiB/token"`. */
export function formatPerToken(bytes: number): string {
    if (bytes < mib) {
        const value = bytes / kib;
        return `${value.toFixed(value < 10 ? 1 : 0)} KiB/token`;
    }
    return `${formatMemory(bytes)}/token`;
}

/** Share of the full-equivalent cache not held: `1 - part / full`; `null` before there is a full cache to compare with. */
export function savingsOf(part: number, full: number): number | null {
    if (!(full > 0) || !Number.isFinite(part)) return null;
    return 1 - part / full;
}

/** `0.623` -> `"62%"`; negative savings (more allocated than a full cache needs) keep their sign: `"−20%"`. */
export function formatPercent(share: number | null): string {
    if (share == null || !Number.isFinite(share)) return "–";
    const percent = Math.round(share * 100);
    return percent < 0 ? `−${-percent}%` : `${percent}%`;
}

/** The reading that sums up a message: its last sample. */
export function lastSample(stats: MessageStats | null | undefined): KvSample | null {
    return stats?.samples?.at(-1) ?? null;
}

/**
 * Memory against a full cache in neutral words, a measure and not a verdict on the answer: `"62% less than a full
 * cache"`, `"20% more than a full cache"` (an allocation still filling).
 */
export function describeSavings(share: number): string {
    return share < 0 ? `${formatPercent(-share)} more than a full cache` : `${formatPercent(share)} less than a full cache`;
}

/** A message footer's line: `"KV 12.3 MiB live · 62% less than a full cache"`. */
export function describeFootprint(sample: KvSample): string {
    const saved = savingsOf(sample.liveBytes, sample.fullBytes);
    const live = `KV ${formatMemory(sample.liveBytes)} live`;
    return saved == null ? live : `${live} · ${describeSavings(saved)}`;
}

/** An answer's memory in words a person reads without knowing what a KV cache is, and the jargon apart. */
export type AnswerMemory = {
    /** `"Used 12.3 MiB of memory, 62% less than a full cache (32.4 MiB)"`. */
    line: string;
    /** Set when the budget forced drops: the answer may not be the one a full cache gives. */
    mayDiffer: string | null;
    /** Prune rounds, evictions and forced drops in a line, for the Advanced details. */
    advanced: string;
};

/** `sample` (an answer's last) as `AnswerMemory`. */
export function describeAnswerMemory(sample: KvSample): AnswerMemory {
    const saved = savingsOf(sample.liveBytes, sample.fullBytes);
    const used = `Used ${formatMemory(sample.liveBytes)} of memory`;
    const line = saved == null ? used : `${used}, ${describeSavings(saved)} (${formatMemory(sample.fullBytes)})`;
    const mayDiffer =
        sample.forcedDrops > 0 ? "The memory budget was full, so this answer may differ from the one a full cache gives." : null;
    const advanced = [
        `${count(sample.cellsLive)} of ${count(sample.tokensSeen)} tokens kept in ${count(sample.cellsAllocated)} cells`,
        `${count(sample.pruneRounds)} prune rounds`,
        `${count(sample.tokensEvicted)} evicted`,
        `${count(sample.forcedDrops)} forced drops${sample.forcedDrops > 0 ? " (freed by the full budget, not chosen by the policy)" : ""}`
    ].join(" · ");
    return {line, mayDiffer, advanced};
}

/** What the gauge's count of tokens freed by a full budget means, in plain words. */
export const budgetFullExplained =
    "Tokens freed because the memory budget was full, although the policy would have kept them. " +
    "Many of them mean the budget is too small for this policy.";

/** What a forced drop is, wherever the count is shown. */
export const forcedDropsExplained =
    "Forced drops: tokens freed because the budget was full although the policy would have kept them " +
    "(the budget chose these, not the policy). Many of them mean the budget is too small for this policy.";

/** The footprint's tooltip: every figure behind it, and that it measures memory, not the answer. */
export function describeSampleDetail(sample: KvSample): string {
    const peak = sample.cellsPeak != null ? `, ${count(sample.cellsPeak)} at most` : "";
    return [
        [
            `Allocated ${formatMemory(sample.allocatedBytes)} (${count(sample.cellsAllocated)} cells)`,
            `live ${formatMemory(sample.liveBytes)} (${count(sample.cellsLive)} cells${peak})`,
            `full cache ${formatMemory(sample.fullBytes)} (${count(sample.tokensSeen)} tokens)`,
            `${count(sample.pruneRounds)} prune rounds, ${count(sample.tokensEvicted)} evicted, ${count(sample.forcedDrops)} forced drops`
        ].join(" · "),
        ...(sample.forcedDrops > 0 ? [forcedDropsExplained] : []),
        "Memory only: it says nothing about whether the answer is right. Compare with a version under Full KV."
    ].join("\n");
}

export function count(value: number): string {
    return Math.round(value).toLocaleString("en-US");
}
