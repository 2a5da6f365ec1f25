/** Hoyer sparsity of a non-negative vector: (sqrt(n) - |a|_1/|a|_2) / (sqrt(n) - 1). Lethe Eq. 1. */
export function hoyerSparsity(values: ArrayLike<number>, start = 0, length = values.length - start): number {
    if (length <= 1) return 0;
    let l1 = 0;
    let l2 = 0;
    for (let i = start; i < start + length; i++) {
        const v = Math.abs(values[i]!);
        l1 += v;
        l2 += v * v;
    }
    if (l2 === 0) return 0;
    const root = Math.sqrt(length);
    return (root - l1 / Math.sqrt(l2)) / (root - 1);
}

/** Indices of `values[start..start+n)` sorted by value, highest first (ties: lower index first). */
export function rankDescending(values: ArrayLike<number>, start: number, n: number): Int32Array {
    const order = new Int32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    order.sort((a, b) => values[start + b]! - values[start + a]! || a - b);
    return order;
}

/** Cell indices ordered by position (oldest first). */
export function orderByPosition(positions: Int32Array): Int32Array {
    const order = new Int32Array(positions.length);
    for (let i = 0; i < order.length; i++) order[i] = i;
    order.sort((a, b) => positions[a]! - positions[b]!);
    return order;
}

/**
 * Folds the (layer, head) rows of `scores` (`layers * heads * n`) whose layer `include` names into one value per cell:
 * the one row a selection over shared cells ranks by.
 */
export type RowFold = (scores: Float32Array, layers: number, heads: number, n: number, include: (layer: number) => boolean) => Float32Array;

/** Each (layer, head) row of scores divided by its total, summed over the included rows: one comparable vector. */
export const aggregateNormalised: RowFold = (scores, layers, heads, n, include) => {
    const out = new Float32Array(n);
    for (let l = 0; l < layers; l++) {
        if (!include(l)) continue;
        for (let h = 0; h < heads; h++) {
            const base = (l * heads + h) * n;
            let total = 0;
            for (let j = 0; j < n; j++) total += scores[base + j]!;
            if (total <= 0) continue;
            for (let j = 0; j < n; j++) out[j] = out[j]! + scores[base + j]! / total;
        }
    }
    return out;
};

/**
 * Per cell, the largest score over the included rows: one vector kept by a cell's best head (LeanKV §4 aggregates a KV
 * head's query heads by their maximum).
 */
export const maxOverRows: RowFold = (scores, layers, heads, n, include) => rowMax(scores, layers, heads, n, include, 0);

function rowMax(
    scores: Float32Array,
    layers: number,
    heads: number,
    n: number,
    include: (layer: number) => boolean,
    floor: number
): Float32Array {
    const out = new Float32Array(n).fill(floor);
    for (let l = 0; l < layers; l++) {
        if (!include(l)) continue;
        for (let h = 0; h < heads; h++) {
            const base = (l * heads + h) * n;
            for (let j = 0; j < n; j++) out[j] = Math.max(out[j]!, scores[base + j]!);
        }
    }
    return out;
}

/**
 * llama.cpp's grouped-query attention: query head `q` of `heads` reads KV head floor(q / (heads / kvHeads)). Throws
 * when the query heads do not divide into the KV heads.
 */
export function kvHeadOf(q: number, heads: number, kvHeads: number): number {
    const group = heads / kvHeads;
    if (!Number.isInteger(group) || group < 1) throw new RangeError(`${heads} query heads do not divide into ${kvHeads} KV heads`);
    return Math.floor(q / group);
}

/** Per layer, the scores summed over heads: `layers * n` from `layers * heads * n` (Lethe Eq. 2's head sum). */
export function sumHeads(scores: Float32Array, layers: number, heads: number, n: number): Float32Array {
    if (heads === 1) return scores;
    const out = new Float32Array(layers * n);
    for (let l = 0; l < layers; l++) {
        for (let h = 0; h < heads; h++) {
            const base = (l * heads + h) * n;
            for (let j = 0; j < n; j++) out[l * n + j] = out[l * n + j]! + scores[base + j]!;
        }
    }
    return out;
}

/**
 * A ranking with a policy's structure first: the `sinks` oldest cells, then the `recent` newest (newest first), then
 * the rest by `scores[start..start+n)` descending. Returns the ranking and how many structural cells lead it.
 */
export function structuredOrder(byPosition: Int32Array, sinks: number, recent: number, scores: ArrayLike<number> | null, start = 0) {
    const n = byPosition.length;
    const order = new Int32Array(n);
    const taken = new Uint8Array(n);
    let k = 0;
    for (let i = 0; i < Math.min(sinks, n); i++) {
        order[k++] = byPosition[i]!;
        taken[byPosition[i]!] = 1;
    }
    for (let i = n - 1; i >= Math.max(0, n - recent); i--) {
        const j = byPosition[i]!;
        if (taken[j] === 0) {
            order[k++] = j;
            taken[j] = 1;
        }
    }
    const structural = k;
    const rest = scores == null ? byPosition.slice().reverse() : rankDescending(scores, start, n);
    for (const j of rest) {
        if (taken[j] === 0) order[k++] = j;
    }
    return {order, structural};
}

/**
 * log sigmoid(g) in double, stable at both ends: `-log1p(exp(-g))` for g >= 0, `g - log1p(exp(g))` below (TRIM-KV's
 * log beta from a gate logit g; a huge g, as for cells the gates never saw, gives 0: never forgotten).
 */
export function logSigmoid(g: number): number {
    return g >= 0 ? -Math.log1p(Math.exp(-g)) : g - Math.log1p(Math.exp(g));
}

/**
 * The step t the retention is measured at, a cell's age being t - pos: the tokens seen (written to the sequence, kept or
 * not) plus one, or the newest position plus two when that is later (the tokens seen unknown or behind the cells).
 */
export function retentionStep(positions: Int32Array, tokensSeen: number | undefined): number {
    let newest = -1;
    for (const position of positions) newest = Math.max(newest, position);
    // TRIM-KV's age as the authors count it (its paper; `ngocbh/trimkv` TrimKVCache.compress): q_idx - pos, q_idx = seen + 1.
    return Math.max(newest + 1, tokensSeen ?? 0) + 1;
}

/** TRIM-KV (Bui et al.): log of a cell's retention at step t, log(beta^(t - pos)) = `(t - pos) * log beta`, for one (layer, head) row from `start`. */
export function decayedRetention(logBeta: Float32Array, start: number, positions: Int32Array, t: number): Float64Array {
    const out = new Float64Array(positions.length);
    for (let j = 0; j < positions.length; j++) {
        const age = Math.max(0, t - positions[j]!);
        out[j] = age === 0 ? 0 : age * logBeta[start + j]!;
    }
    return out;
}

/**
 * Per cell, the largest log beta over the (layer, head) rows whose layer is included. A cell's age `t - pos` is the same in
 * every row, so ranking by it ranks by the max over layers and heads of `(t - pos) * log beta`: TRIM-KV's global
 * ranking on llama.cpp's shared cells (a cell stays while any head still retains it). `logBeta` is `layers * heads * n`.
 */
export function maxLogBeta(
    logBeta: Float32Array,
    layers: number,
    heads: number,
    n: number,
    include: (layer: number) => boolean = () => true
): Float32Array {
    return rowMax(logBeta, layers, heads, n, include, -Infinity);
}

/**
 * Per-head cells: the `keep` tokens of `held` (one pair's tokens, by cell) with the highest `value`, the `pinned` tokens
 * first (position 0 and the newest, which stay in every head); of equal values the earlier cell, as `rankDescending`
 * orders them, and a NaN below every number. The tokens come in cell order. `value` may be overwritten.
 *
 * A round keeps all but a few of a pair's cells, once per (layer, KV head): the `keep`-th largest value is selected
 * (`selectAscending`, no sort), and one pass takes the cells above it and the first of those equal to it.
 */
export function topHeld(held: Int32Array, value: Float32Array | Float64Array, keep: number, pinned: ReadonlySet<number>): Int32Array {
    const n = held.length;
    const count = Math.max(0, Math.min(keep, n));
    const values = new Float64Array(n);
    for (let j = 0; j < n; j++) {
        if (pinned.has(held[j]!)) value[j] = Number.POSITIVE_INFINITY;
        else if (Number.isNaN(value[j]!)) value[j] = Number.NEGATIVE_INFINITY;
        values[j] = value[j]!;
    }
    if (count === n) return held.slice();
    if (count === 0) return new Int32Array(0);
    const threshold = selectAscending(values, n - count);
    let equal = count;
    for (let j = 0; j < n; j++) if (value[j]! > threshold) equal--;
    const out = new Int32Array(count);
    let o = 0;
    for (let j = 0; j < n && o < count; j++) {
        const v = value[j]!;
        if (v > threshold || (v === threshold && equal-- > 0)) out[o++] = held[j]!;
    }
    return out;
}

/**
 * The value at index `k` of `values` sorted ascending (Hoare's selection: partitions around a median of three until `k`
 * is placed), reordering `values` in place. Linear on average where a sort is n log n. No NaN in `values`.
 */
export function selectAscending(values: Float64Array, k: number): number {
    if (!(k >= 0 && k < values.length)) throw new RangeError(`no index ${k} among ${values.length} values`);
    let lo = 0;
    let hi = values.length - 1;
    while (hi > lo) {
        const a = values[lo]!;
        const b = values[(lo + hi) >> 1]!;
        const c = values[hi]!;
        const pivot = a < b ? (b < c ? b : a < c ? c : a) : a < c ? a : b < c ? c : b;
        let i = lo;
        let j = hi;
        while (i <= j) {
            while (values[i]! < pivot) i++;
            while (values[j]! > pivot) j--;
            if (i <= j) {
                const swap = values[i]!;
                values[i++] = values[j]!;
                values[j--] = swap;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break;
    }
    return values[k]!;
}
