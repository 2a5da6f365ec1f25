// The heatmap's colour scale: viridis (perceptually uniform, readable for colour-blind people, on light and dark
// backgrounds alike), on the square root of the share kept: 0 = nothing of the tokens seen (dark violet), 25% = the
// middle, 1 = all of them (yellow). Under a tight budget most shares are small; the root spreads them apart.

const stops: [number, number, number][] = [
    [68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142],
    [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]
];

/** The shares the legend marks, with where each sits on it (0..1). */
export const retentionTicks = [0, 0.05, 0.25, 1].map((share) => ({share, at: Math.sqrt(share)}));

/** Kept fraction (clamped to 0..1) -> `[r, g, b]`. */
export function retentionColor(fraction: number): [number, number, number] {
    const t = Number.isFinite(fraction) ? Math.sqrt(Math.min(1, Math.max(0, fraction))) : 0;
    const position = t * (stops.length - 1);
    const index = Math.min(stops.length - 2, Math.floor(position));
    const local = position - index;
    const a = stops[index]!;
    const b = stops[index + 1]!;
    return [0, 1, 2].map((channel) => Math.round(a[channel]! + (b[channel]! - a[channel]!) * local)) as [number, number, number];
}
