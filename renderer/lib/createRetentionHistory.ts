import type {KvSample} from "../../preload/contract.js";

/** One heatmap column: the means over the samples it stands for. */
export type RetentionColumn = {
    firstStep: number,
    lastStep: number,
    /** Samples averaged into this column. */
    count: number,
    /** Per layer, what the layer's own selection would keep, as a share of the tokens seen (`KvSample.keptPerLayer`). */
    kept: Float32Array,
    /** What the shared cells kept: live cells / tokens seen; NaN when the samples lack the counts. */
    shared: number
};

/** What a column is made of: a sample's step, per-layer shares and, for the shared row, its live cells and tokens seen. */
export type RetentionSample = Pick<KvSample, "step" | "keptPerLayer"> & Partial<Pick<KvSample, "cellsLive" | "tokensSeen">>;

export type RetentionView = {layers: number, columns: readonly RetentionColumn[]};

export type RetentionHistory = RetentionView & {
    push(sample: RetentionSample): void,
    clear(): void
};

function merge(a: RetentionColumn, b: RetentionColumn): RetentionColumn {
    const count = a.count + b.count;
    const kept = new Float32Array(a.kept.length);
    for (let l = 0; l < kept.length; l++)
        kept[l] = ((a.kept[l] ?? 0) * a.count + (b.kept[l] ?? 0) * b.count) / count;
    return {firstStep: a.firstStep, lastStep: b.lastStep, count, kept, shared: (a.shared * a.count + b.shared * b.count) / count};
}

/**
 * Per-layer retention over decode steps, in bounded memory: past `maxColumns` columns, neighbours merge pairwise
 * (weighted means) and each later column averages twice as many samples, so a 100k-token chain of thought still
 * holds at most `maxColumns` columns of `layers` floats. A sample with another layer count starts over.
 */
export function createRetentionHistory(maxColumns = 240): RetentionHistory {
    const limit = Math.max(2, Math.floor(maxColumns / 2) * 2);
    let layers = 0;
    let columns: RetentionColumn[] = [];
    /** Samples per full column. */
    let stride = 1;

    function push(sample: RetentionSample): void {
        const values = sample.keptPerLayer;
        if (values.length === 0)
            return;
        if (values.length !== layers) {
            layers = values.length;
            columns = [];
            stride = 1;
        }
        const shared = sample.cellsLive != null && sample.tokensSeen != null && sample.tokensSeen > 0
            ? Math.min(1, sample.cellsLive / sample.tokensSeen)
            : Number.NaN;
        const column: RetentionColumn = {firstStep: sample.step, lastStep: sample.step, count: 1, kept: Float32Array.from(values), shared};
        const last = columns.at(-1);
        if (last && last.count < stride)
            columns[columns.length - 1] = merge(last, column);
        else
            columns.push(column);
        if (columns.length > limit) {
            const halved: RetentionColumn[] = [];
            for (let i = 0; i < columns.length; i += 2) {
                const next = columns[i + 1];
                halved.push(next ? merge(columns[i]!, next) : columns[i]!);
            }
            columns = halved;
            stride *= 2;
        }
    }

    return {
        get layers() {
            return layers;
        },
        get columns() {
            return columns;
        },
        push,
        clear(): void {
            layers = 0;
            columns = [];
            stride = 1;
        }
    };
}
