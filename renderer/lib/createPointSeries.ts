import type {KvSample} from "../../preload/contract.js";

/** One point of the memory-against-tokens chart (Lethe Fig. 4's shape). */
export type MemoryPoint = {tokens: number; fullBytes: number; allocatedBytes: number; liveBytes: number};

export function toPoint(sample: KvSample): MemoryPoint {
    return {tokens: sample.tokensSeen, fullBytes: sample.fullBytes, allocatedBytes: sample.allocatedBytes, liveBytes: sample.liveBytes};
}

/** At most `max` points, evenly spread, always keeping the first and the last. */
export function decimate<T>(points: readonly T[], max: number): T[] {
    if (points.length <= max || max < 2) return [...points];
    const result: T[] = [];
    const step = (points.length - 1) / (max - 1);
    for (let i = 0; i < max; i++) result.push(points[Math.round(i * step)]!);
    return result;
}

/** A growing series of points held in bounded memory: past `2 × max` points it is thinned back to `max`. */
export function createPointSeries(max = 400) {
    let points: MemoryPoint[] = [];
    return {
        get points(): readonly MemoryPoint[] {
            return points;
        },
        push(sample: KvSample): void {
            points.push(toPoint(sample));
            if (points.length > 2 * max) points = decimate(points, max);
        },
        clear(): void {
            points = [];
        }
    };
}
