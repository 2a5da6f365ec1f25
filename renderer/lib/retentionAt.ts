import type {RetentionView} from "./createRetentionHistory.js";

/** One heatmap cell: a layer's row (or the shared cells' row), the steps its column stands for, and its share. */
export type RetentionPoint = {layer: number | "shared", firstStep: number, lastStep: number, value: number};

/**
 * The heatmap cell under a pointer: `x` across the columns and `y` down the layers, each as a share of the map's
 * width and height (0..1); `"shared"` for the shared cells' row. `null` off the map or where nothing was measured.
 */
export function retentionAt(view: RetentionView, x: number, y: number | "shared"): RetentionPoint | null {
    const columns = view.columns.length;
    if (columns === 0 || view.layers === 0 || x < 0 || x >= 1)
        return null;
    const column = view.columns[Math.min(columns - 1, Math.floor(x * columns))]!;
    if (y === "shared")
        return Number.isNaN(column.shared) ? null : {layer: "shared", firstStep: column.firstStep, lastStep: column.lastStep, value: column.shared};
    if (y < 0 || y >= 1)
        return null;
    const layer = Math.min(view.layers - 1, Math.floor(y * view.layers));
    const value = column.kept[layer] ?? Number.NaN;
    return Number.isNaN(value) ? null : {layer, firstStep: column.firstStep, lastStep: column.lastStep, value};
}
