/** Hoyer sparsity of a non-negative vector: (sqrt(n) - |a|_1/|a|_2) / (sqrt(n) - 1). Lethe Eq. 1. */
export function hoyerSparsity(values: ArrayLike<number>, start = 0, length = values.length - start): number {
    if (length <= 1)
        return 0;
    let l1 = 0;
    let l2 = 0;
    for (let i = start; i < start + length; i++) {
        const v = Math.abs(values[i]!);
        l1 += v;
        l2 += v * v;
    }
    if (l2 === 0)
        return 0;
    const root = Math.sqrt(length);
    return (root - l1 / Math.sqrt(l2)) / (root - 1);
}

/** Indices of `values[start..start+n)` sorted by value, highest first (ties: lower index first). */
export function rankDescending(values: ArrayLike<number>, start: number, n: number): Int32Array {
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++)
        order[i] = i;
    order.sort((a, b) => (values[start + b]! - values[start + a]!) || (a - b));
    return order;
}

/** Cell indices ordered by position (oldest first). */
export function orderByPosition(positions: Int32Array): Int32Array {
    const order = new Int32Array(positions.length);
    for (let i = 0; i < order.length; i++)
        order[i] = i;
    order.sort((a, b) => positions[a]! - positions[b]!);
    return order;
}

/** Marks the `sinks` oldest and the `recent` newest cells in `mask`. */
export function keepSinksAndRecent(mask: Uint8Array, byPosition: Int32Array, sinks: number, recent: number): void {
    const n = byPosition.length;
    for (let i = 0; i < Math.min(sinks, n); i++)
        mask[byPosition[i]!] = 1;
    for (let i = Math.max(0, n - recent); i < n; i++)
        mask[byPosition[i]!] = 1;
}

/** Each layer's scores divided by that layer's total, summed over the given layers: one comparable vector. */
export function aggregateNormalised(scores: Float32Array, layers: number, n: number, include: (layer: number) => boolean): Float32Array {
    const out = new Float32Array(n);
    for (let l = 0; l < layers; l++) {
        if (!include(l))
            continue;
        let total = 0;
        for (let j = 0; j < n; j++)
            total += scores[l * n + j]!;
        if (total <= 0)
            continue;
        for (let j = 0; j < n; j++)
            out[j] = out[j]! + scores[l * n + j]! / total;
    }
    return out;
}
