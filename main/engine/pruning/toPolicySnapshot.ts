import type {ScoreSnapshot as NativeScoreSnapshot, RetentionSnapshot, ValueNormSnapshot} from "../native/types.js";
import {logSigmoid} from "../policies/scoreMath.js";
import type {ScoreSnapshot} from "../policies/types.js";

/**
 * The native per-layer, per-head arrays as the policies' flat `(layer * heads + head) * n + cell` arrays; with `retention`,
 * the gates' logits as log beta, with `valueNorms` the cells' value L1 norms, in the cells' order of the scores (matched by
 * position).
 */
export function toPolicySnapshot(
    native: NativeScoreSnapshot,
    retention?: RetentionSnapshot,
    valueNorms?: ValueNormSnapshot
): ScoreSnapshot {
    const n = native.positions.length;
    const layers = native.layers.length;
    const heads = native.heads;
    const accumulated = new Float32Array(layers * heads * n);
    const last = new Float32Array(layers * heads * n);
    native.layers.forEach((layer, l) => {
        accumulated.set(layer.accumulated.subarray(0, heads * n), l * heads * n);
        last.set(layer.last.subarray(0, heads * n), l * heads * n);
    });
    const snapshot: ScoreSnapshot = {positions: native.positions, layers, heads, accumulated, last};
    if (retention != null) {
        snapshot.retention = retentionLogBeta(retention, native.positions, layers);
        snapshot.retentionHeads = retention.heads;
    }
    if (valueNorms != null) {
        snapshot.valueNorms = valueNormsByCell(valueNorms, native.positions, layers);
        snapshot.valueHeads = valueNorms.heads;
    }
    return snapshot;
}

/** Each cell of `positions`' column in a read of the cells at `readPositions`, looked up once (-1: the read lacks it). */
export function columnsIn(readPositions: Int32Array, positions: ArrayLike<number>): Int32Array {
    const n = positions.length;
    const column = new Int32Array(n);
    if (readPositions.length === n && readPositions.every((position, j) => position === positions[j])) {
        for (let j = 0; j < n; j++) column[j] = j;
        return column;
    }
    const source = new Map(Array.from(readPositions, (position, k) => [position, k]));
    for (let j = 0; j < n; j++) column[j] = source.get(positions[j]!) ?? -1;
    return column;
}

/**
 * One layer-major per-cell read (`values[layer][h * m + k]` for the read's k-th cell at `read[k]`) laid out
 * `(layer * heads + head) * n + j` for the cells at `positions`, each value passed through `map` (`undefined` for a
 * cell or layer the read lacks).
 */
function byCell(
    readPositions: Int32Array,
    values: Float32Array[],
    heads: number,
    positions: Int32Array,
    layers: number,
    map: (value: number | undefined) => number
): Float32Array {
    const n = positions.length;
    const m = readPositions.length;
    const out = new Float32Array(layers * heads * n);
    const column = columnsIn(readPositions, positions);
    for (let l = 0; l < layers; l++) {
        const layer = values[l];
        for (let h = 0; h < heads; h++) {
            for (let j = 0; j < n; j++) {
                const k = column[j]!;
                out[(l * heads + h) * n + j] = map(layer == null || k < 0 ? undefined : layer[h * m + k]);
            }
        }
    }
    return out;
}

/**
 * The cells' value L1 norms laid out `(layer * heads + head) * n + j` for the cells at `positions` (LAVa). A cell the read
 * lacks, a layer it lacks, or a NaN counts as 0 (no norm known, as for cells written while the norms were off).
 */
function valueNormsByCell(read: ValueNormSnapshot, positions: Int32Array, layers: number): Float32Array {
    return byCell(read.positions, read.norms, read.heads, positions, layers, (v) => (v != null && Number.isFinite(v) ? v : 0));
}

/**
 * The gates' logits g as log beta = logsigmoid(g), computed in double (TRIM-KV: beta = sigmoid(g)), laid out
 * `(layer * heads + head) * n + j` for the cells at `positions`. A cell the gates did not see (written while they were off,
 * restored from a state) or a NaN logit counts as never forgotten (log beta 0); so does a layer the read lacks.
 */
export function retentionLogBeta(retention: RetentionSnapshot, positions: Int32Array, layers: number): Float32Array {
    return byCell(retention.positions, retention.logits, retention.heads, positions, layers, (g) =>
        g == null || Number.isNaN(g) ? 0 : logSigmoid(g)
    );
}
