import {mulberry32} from "../../shared/mulberry32.js";
import type {CapturedNorms} from "../native/types.js";
import {halfToFloat} from "./halfToFloat.js";
import type {CalibrationDataset} from "./types.js";

type SampleInfo = {text: number; position: number; token: number; generated: boolean};

/** Algorithm R over every token written, seeded; slots hold their features at once and their labels when their text ends. */
export class CalibrationReservoir {
    private readonly _cap: number;
    private readonly _rowLength: number;
    private readonly _random: () => number;
    private _seen = 0;
    private _size = 0;
    private _features = new Float32Array(0);
    private readonly _info: SampleInfo[] = [];
    private readonly _horizons: (Float32Array | null)[] = [];
    /** Per other read threshold, per slot. */
    private readonly _alternatives: (Float32Array | null)[][];
    private readonly _followers: number[] = [];

    public constructor(cap: number, rowLength: number, seed: number, alternatives: number) {
        this._cap = cap;
        this._rowLength = rowLength;
        this._random = mulberry32(seed).uniform;
        this._alternatives = Array.from({length: alternatives}, () => []);
    }

    /** The slot the next token goes to, or -1 when it is not sampled. */
    public offer(): number {
        const index = this._seen++;
        if (index < this._cap) return index;
        const slot = Math.floor(this._random() * (index + 1));
        return slot < this._cap ? slot : -1;
    }

    public fill(slot: number, captured: CapturedNorms, token: number, info: SampleInfo): void {
        if (slot >= this._size) {
            this._size = slot + 1;
            if (this._features.length < this._size * this._rowLength) {
                // grow by doubling, up to the cap
                const grown = new Float32Array(Math.min(this._cap, Math.max(64, this._size * 2)) * this._rowLength);
                grown.set(this._features);
                this._features = grown;
            }
        }
        const source = captured.rows;
        const from = token * this._rowLength;
        const to = slot * this._rowLength;
        for (let i = 0; i < this._rowLength; i++) this._features[to + i] = halfToFloat(source[from + i]!);
        this._info[slot] = info;
        this._horizons[slot] = null;
        for (const alternative of this._alternatives) alternative[slot] = null;
        this._followers[slot] = 0;
    }

    /**
     * Labels of the samples of `text`: horizons from the cells' last strong reads (at the other read threshold
     * `alternative`, when given), followers up to `lastPosition`.
     */
    public finalize(
        text: number,
        horizon: {positions: Int32Array; heads: number; last: Float32Array[]},
        lastPosition: number,
        alternative: number | null = null
    ): void {
        const cellOf = new Map<number, number>();
        horizon.positions.forEach((position, cell) => cellOf.set(position, cell));
        const n = horizon.positions.length;
        const layers = horizon.last.length;
        for (let slot = 0; slot < this._size; slot++) {
            const info = this._info[slot]!;
            if (info.text !== text) continue;
            const cell = cellOf.get(info.position);
            if (cell == null) throw new Error(`the cell of position ${info.position} is gone: calibration needs Full KV`);
            const values = new Float32Array(layers * horizon.heads);
            for (let layer = 0; layer < layers; layer++) {
                for (let head = 0; head < horizon.heads; head++)
                    values[layer * horizon.heads + head] = Math.max(0, horizon.last[layer]![head * n + cell]! - info.position);
            }
            if (alternative != null) {
                this._alternatives[alternative]![slot] = values;
                continue;
            }
            this._horizons[slot] = values;
            this._followers[slot] = lastPosition - info.position;
        }
    }

    public toDataset(
        meta: Omit<
            CalibrationDataset,
            "tokens" | "features" | "horizons" | "followers" | "positions" | "text" | "tokenIds" | "generated"
        > & {
            headCountKv: number;
        },
        moreReadThresholds: number[]
    ): CalibrationDataset {
        const {layers, headCountKv} = meta;
        // in text and position order
        const order = Array.from({length: this._size}, (_, slot) => slot).sort(
            (a, b) => this._info[a]!.text - this._info[b]!.text || this._info[a]!.position - this._info[b]!.position
        );
        const n = order.length;
        const features = new Float32Array(n * this._rowLength);
        const horizons = new Float32Array(n * layers * headCountKv);
        const alternatives = moreReadThresholds.map((readThreshold) => ({
            readThreshold,
            horizons: new Float32Array(n * layers * headCountKv)
        }));
        const followers = new Int32Array(n);
        const positions = new Int32Array(n);
        const text = new Int32Array(n);
        const tokenIds = new Int32Array(n);
        const generated = new Uint8Array(n);
        order.forEach((slot, i) => {
            const info = this._info[slot]!;
            features.set(this._features.subarray(slot * this._rowLength, (slot + 1) * this._rowLength), i * this._rowLength);
            const put = (values: Float32Array | null | undefined, into: Float32Array) => {
                if (values == null) throw new Error(`sample ${slot} has no horizon: its text never ended`);
                const heads = values.length / layers;
                for (let layer = 0; layer < layers; layer++)
                    into.set(values.subarray(layer * heads, (layer + 1) * heads), (i * layers + layer) * headCountKv);
            };
            put(this._horizons[slot], horizons);
            alternatives.forEach((alternative, k) => put(this._alternatives[k]![slot], alternative.horizons));
            followers[i] = this._followers[slot]!;
            positions[i] = info.position;
            text[i] = info.text;
            tokenIds[i] = info.token;
            generated[i] = info.generated ? 1 : 0;
        });
        return {...meta, tokens: n, features, horizons, followers, positions, text, tokenIds, generated, alternatives};
    }
}
