import {Chart, Filler, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip, type ChartDataset} from "chart.js";
import {bytesPerMib} from "../../preload/contract.js";
import type {MemoryPoint} from "./createPointSeries.js";
import {count, formatMemory} from "./formatMemory.js";
import type {ThemeColors} from "./readThemeColors.js";

// Only the pieces this chart uses, so the bundle carries no other controllers, scales or plugins.
Chart.register(LineController, LineElement, PointElement, LinearScale, Filler, Tooltip, Legend);

const gib = 1024 * bytesPerMib;
type XY = {x: number; y: number};

export type SavingsChart = {
    update(points: readonly MemoryPoint[]): void;
    setColors(colors: ThemeColors): void;
    destroy(): void;
};

/** KV memory against tokens: a full cache's line, the allocation, and the live cells filled (Lethe Fig. 4's shape). */
export function createSavingsChart(canvas: HTMLCanvasElement, colors: ThemeColors): SavingsChart {
    let unit = {bytes: bytesPerMib, name: "MiB"};
    const line = (label: string): ChartDataset<"line", XY[]> => ({
        label,
        data: [],
        pointRadius: 0,
        pointHoverRadius: 3,
        borderWidth: 2,
        tension: 0,
        fill: false
    });
    const datasets = [line("Full cache"), line("Allocated"), line("Live")];
    const chart = new Chart<"line", XY[]>(canvas, {
        type: "line",
        data: {datasets},
        options: {
            animation: false,
            responsive: true,
            maintainAspectRatio: false,
            parsing: false,
            normalized: true,
            interaction: {mode: "nearest", axis: "x", intersect: false},
            scales: {
                x: {
                    type: "linear",
                    min: 0,
                    title: {display: true, text: "Tokens in the conversation"},
                    ticks: {maxTicksLimit: 6, precision: 0}
                },
                y: {type: "linear", min: 0, title: {display: true, text: "KV memory (MiB)"}, ticks: {maxTicksLimit: 5}}
            },
            plugins: {
                legend: {position: "bottom", labels: {usePointStyle: true, pointStyle: "line", boxWidth: 18, padding: 12}},
                tooltip: {
                    callbacks: {
                        title: (items) => (items[0] ? `${count(items[0].parsed.x ?? 0)} tokens` : ""),
                        label: (item) => `${item.dataset.label}: ${formatMemory((item.parsed.y ?? 0) * unit.bytes)}`
                    }
                }
            }
        }
    });

    function setColors(theme: ThemeColors): void {
        const [full, allocated, live] = datasets as [ChartDataset<"line", XY[]>, ChartDataset<"line", XY[]>, ChartDataset<"line", XY[]>];
        Object.assign(full, {borderColor: theme.muted, backgroundColor: theme.muted, borderDash: [6, 4], borderWidth: 1.5});
        Object.assign(allocated, {borderColor: theme.warning, backgroundColor: theme.warning, borderWidth: 1.5});
        Object.assign(live, {borderColor: theme.accent, backgroundColor: theme.accentSoft, fill: "origin"});
        const options = chart.options;
        for (const scale of [options.scales?.x, options.scales?.y]) {
            if (!scale) continue;
            scale.grid = {color: theme.border};
            scale.border = {color: theme.border};
            scale.ticks = {...scale.ticks, color: theme.muted};
            if ("title" in scale && scale.title) scale.title.color = theme.muted;
        }
        if (options.plugins?.legend?.labels) options.plugins.legend.labels.color = theme.text;
        chart.update("none");
    }

    function update(points: readonly MemoryPoint[]): void {
        const peak = points.reduce((max, point) => Math.max(max, point.fullBytes, point.allocatedBytes), 0);
        unit = peak >= gib ? {bytes: gib, name: "GiB"} : {bytes: bytesPerMib, name: "MiB"};
        const y = chart.options.scales?.y;
        if (y && "title" in y && y.title) y.title.text = `KV memory (${unit.name})`;
        datasets[0]!.data = points.map((point) => ({x: point.tokens, y: point.fullBytes / unit.bytes}));
        datasets[1]!.data = points.map((point) => ({x: point.tokens, y: point.allocatedBytes / unit.bytes}));
        datasets[2]!.data = points.map((point) => ({x: point.tokens, y: point.liveBytes / unit.bytes}));
        chart.update("none");
    }

    setColors(colors);
    return {update, setColors, destroy: () => chart.destroy()};
}
