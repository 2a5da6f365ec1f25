import type {KvSample, MessageStats} from "../../preload/contract.js";
import {mergeRanges} from "../../preload/positionRanges.js";

/** The memory samples stored with an answer's statistics; none when they cannot be read. */
export function parseSamples(json: string): KvSample[] {
    try {
        const samples = (JSON.parse(json) as Partial<MessageStats>).samples;
        return Array.isArray(samples) ? samples : [];
    } catch {
        return [];
    }
}

/**
 * Appends a sample, halving the older ones when the list is full so a long answer keeps its whole shape. A sample left out
 * hands its evicted positions (a delta) to the next one kept, so the union over the samples stays what was evicted.
 */
export function pushSample(samples: KvSample[], sample: KvSample, max: number): void {
    samples.push(sample);
    if (samples.length > max) {
        const thinned: KvSample[] = [];
        let carried: number[] = [];
        for (const [index, kept] of samples.entries()) {
            if (index % 2 === 0 || index === samples.length - 1) {
                thinned.push(carried.length > 0 ? {...kept, evicted: mergeRanges(carried, kept.evicted ?? [])} : kept);
                carried = [];
            } else carried = mergeRanges(carried, kept.evicted ?? []);
        }
        samples.splice(0, samples.length, ...thinned);
    }
}
