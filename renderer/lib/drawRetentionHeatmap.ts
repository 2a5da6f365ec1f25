import {retentionColor} from "./retentionColor.js";

/**
 * Paints a grid of kept shares (`rows` top to bottom, `columns` left to right; `valueAt(column, row)`) onto the
 * canvas's whole bitmap, one pixel-aligned cell per value, through an ImageData of the grid's size scaled up without
 * smoothing. A value that is not a number is left as the background.
 */
export function drawRetentionHeatmap(canvas: HTMLCanvasElement, rows: number, columns: number,
    valueAt: (column: number, row: number) => number, background: string): void {
    const context = canvas.getContext("2d");
    if (!context)
        return;
    const {width, height} = canvas;
    context.fillStyle = background;
    context.fillRect(0, 0, width, height);
    if (columns === 0 || rows === 0 || width === 0 || height === 0)
        return;

    const image = new ImageData(columns, rows);
    for (let x = 0; x < columns; x++) {
        for (let y = 0; y < rows; y++) {
            const value = valueAt(x, y);
            if (Number.isNaN(value))
                continue;
            const [r, g, b] = retentionColor(value);
            const offset = (y * columns + x) * 4;
            image.data[offset] = r;
            image.data[offset + 1] = g;
            image.data[offset + 2] = b;
            image.data[offset + 3] = 255;
        }
    }
    const source = document.createElement("canvas");
    source.width = columns;
    source.height = rows;
    source.getContext("2d")?.putImageData(image, 0, 0);
    context.imageSmoothingEnabled = false;
    context.drawImage(source, 0, 0, width, height);
}
