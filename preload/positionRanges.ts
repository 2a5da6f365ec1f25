// Token positions as ranges: what a memory sample carries of the cells evicted since the one before (a delta, not a
// snapshot of the cache). Pure: the engine, the chat service and the renderer read them here.

/** Positions as sorted, merged half-open ranges, flat: `[start0, end0, start1, end1, ...]`. */
export function toRanges(positions: ArrayLike<number>): number[] {
    const sorted = Int32Array.from(positions).sort();
    const ranges: number[] = [];
    for (const position of sorted) {
        const last = ranges.length - 1;
        if (last > 0 && position <= ranges[last]!) ranges[last] = Math.max(ranges[last]!, position + 1);
        else ranges.push(position, position + 1);
    }
    return ranges;
}

/** The union of two range lists (`toRanges`' form), sorted and merged. */
export function mergeRanges(a: readonly number[], b: readonly number[]): number[] {
    const pairs: [number, number][] = [];
    for (const list of [a, b]) {
        for (let i = 0; i + 1 < list.length; i += 2) pairs.push([list[i]!, list[i + 1]!]);
    }
    pairs.sort((x, y) => x[0] - y[0]);
    const merged: number[] = [];
    for (const [start, end] of pairs) {
        const last = merged.length - 1;
        if (last > 0 && start <= merged[last]!) merged[last] = Math.max(merged[last]!, end);
        else merged.push(start, end);
    }
    return merged;
}

/** Marks the positions below `length` that `ranges` hold: 1 evicted, 0 not. */
export function maskOfRanges(ranges: readonly number[], length: number): Uint8Array {
    const mask = new Uint8Array(Math.max(0, length));
    for (let i = 0; i + 1 < ranges.length; i += 2) mask.fill(1, Math.max(0, ranges[i]!), Math.min(length, ranges[i + 1]!));
    return mask;
}
