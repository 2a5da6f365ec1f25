import type {RetentionView} from "./createRetentionHistory.js";
import {retentionColor} from "./retentionColor.js";

/**
 * Paints layers (rows, layer 0 on top) by heatmap columns (decode steps, left to right) onto the canvas's whole
 * bitmap, one pixel-aligned cell per value, through an ImageData of the view's size scaled up without smoothing.
 */
export function drawRetentionHeatmap(canvas: HTMLCanvasElement, view: RetentionView, background: string): void {
    const context = canvas.getContext("2d");
    if (!context)
        return;
    const {width, height} = canvas;
    context.fillStyle = background;
    context.fillRect(0, 0, width, height);
    const columns = view.columns.length;
    if (columns === 0 || view.layers === 0 || width === 0 || height === 0)
        return;

    const image = new ImageData(columns, view.layers);
    for (let x = 0; x < columns; x++) {
        const kept = view.columns[x]!.kept;
        for (let y = 0; y < view.layers; y++) {
            const [r, g, b] = retentionColor(kept[y] ?? 0);
            const offset = (y * columns + x) * 4;
            image.data[offset] = r;
            image.data[offset + 1] = g;
            image.data[offset + 2] = b;
            image.data[offset + 3] = 255;
        }
    }
    const source = document.createElement("canvas");
    source.width = columns;
    source.height = view.layers;
    source.getContext("2d")?.putImageData(image, 0, 0);
    context.imageSmoothingEnabled = false;
    context.drawImage(source, 0, 0, width, height);
}
