// What writing a text (collectCalibrationData) and reading one (readCalibrationData) share: the engine captures each
// layer's attn_norm row of every token and keeps each cell's last strong read; the recorder offers the captured rows to
// a seeded reservoir and, when a text ends, labels its samples at the read threshold, then at each other threshold from
// the text read again.
import type {LlamaContextSequence, Token} from "node-llama-cpp";
import {AppError} from "../../AppError.js";
import type {NativeKv} from "../native/NativeKv.js";
import {sequenceIdOf} from "../native/ponderAddon.js";
import type {CapturedNorms} from "../native/types.js";
import {CalibrationReservoir} from "./CalibrationReservoir.js";
import {halfToFloat} from "./halfToFloat.js";
import {throwIfAborted} from "./throwIfAborted.js";
import type {CalibrationDataset, CalibrationText, CollectCalibrationOptions} from "./types.js";

/** What the recorder reads of a run's options, with their defaults. */
export type RecorderSettings = Required<
    Pick<CollectCalibrationOptions, "maxSamples" | "maxFeatureBytes" | "readThreshold" | "moreReadThresholds" | "minWatched" | "seed">
> &
    Pick<CollectCalibrationOptions, "signal">;

/** The samples of the texts a calibration writes or reads, and their labels: one recorder per run. */
export class CalibrationRecorder {
    /** The recorder's settings of a run's options, defaults filled in; refuses a sample bound or a read threshold out of range. */
    public static settings(options: CollectCalibrationOptions): RecorderSettings {
        const {
            maxSamples = 8192,
            maxFeatureBytes = 256 * 1024 * 1024,
            readThreshold = 0.5,
            moreReadThresholds = [],
            minWatched = 16,
            seed = 1,
            signal
        } = options;
        if (!Number.isInteger(maxSamples) || maxSamples < 1)
            throw new RangeError(`maxSamples must be a positive integer, got ${maxSamples}`);
        for (const threshold of [readThreshold, ...moreReadThresholds])
            if (!(threshold > 0 && threshold <= 1)) throw new RangeError(`a read threshold must be within (0, 1], got ${threshold}`);
        return {maxSamples, maxFeatureBytes, readThreshold, moreReadThresholds, minWatched, seed, signal};
    }

    private readonly _reservoir: CalibrationReservoir;
    private _headCountKv = 0;

    public constructor(
        private readonly _kv: NativeKv,
        private readonly _sequence: LlamaContextSequence,
        private readonly _layers: number,
        private readonly _embeddingLength: number,
        private readonly _settings: RecorderSettings
    ) {
        const cap = Math.max(
            1,
            Math.min(_settings.maxSamples, Math.floor(_settings.maxFeatureBytes / featureBytesPerSample(_layers, _embeddingLength)))
        );
        this._reservoir = new CalibrationReservoir(cap, _layers * _embeddingLength, _settings.seed, _settings.moreReadThresholds.length);
    }

    /** Turns the capture and the read horizons on (at the read threshold). */
    public async start(): Promise<void> {
        await this._kv.configureNormCapture(true);
        await this._kv.configureReadHorizon(this._settings.readThreshold);
    }

    /** Turns the capture and the horizons off and clears the sequence; for a `finally`, however the run ends. */
    public async stop(): Promise<void> {
        await this._kv.configureNormCapture(false);
        await this._kv.configureReadHorizon(null);
        if (!this._sequence.disposed) await this._sequence.clearHistory();
    }

    /** Clears the sequence and drops what the engine captured of an earlier text. */
    public async startText(): Promise<void> {
        await this._sequence.clearHistory();
        await this._kv.takeCapturedNorms(); // nothing of an earlier text
    }

    /**
     * Offers the rows the engine captured since the last take to the reservoir, as tokens of `text` (`tokens` position by
     * position, the first `promptTokens` the prompt's); returns how many tokens were captured.
     */
    public async take(text: number, tokens: readonly Token[], promptTokens: number): Promise<number> {
        const captured = await this._kv.takeCapturedNorms();
        checkCaptured(captured, this._layers, this._embeddingLength);
        for (let i = 0; i < captured.tokens; i++) {
            const position = captured.positions[i]!;
            const slot = this._reservoir.offer();
            if (slot >= 0)
                this._reservoir.fill(slot, captured, i, {
                    text,
                    position,
                    token: tokens[position] ?? -1,
                    generated: position >= promptTokens
                });
        }
        return captured.tokens;
    }

    /** Labels the samples of `text`, which ended at `lastPosition`, from the cells' last strong reads. */
    public async label(text: number, lastPosition: number): Promise<void> {
        const horizon = await this._kv.readHorizon(sequenceIdOf(this._sequence));
        this._headCountKv = Math.max(this._headCountKv, horizon.heads);
        this._reservoir.finalize(text, horizon, lastPosition);
    }

    /**
     * The same text read again (`readAgain`, into the cleared sequence) in one pass at each other threshold: the same
     * cells, other horizons. The capture is off meanwhile; the read threshold and the capture are on again after.
     */
    public async labelAtOtherThresholds(text: number, lastPosition: number, readAgain: () => Promise<void>): Promise<void> {
        const {readThreshold, moreReadThresholds, signal} = this._settings;
        if (moreReadThresholds.length === 0) return;
        await this._kv.configureNormCapture(false);
        for (const [k, threshold] of moreReadThresholds.entries()) {
            throwIfAborted(signal);
            await this._sequence.clearHistory();
            await this._kv.configureReadHorizon(threshold);
            await readAgain();
            this._reservoir.finalize(text, await this._kv.readHorizon(sequenceIdOf(this._sequence)), lastPosition, k);
        }
        await this._kv.configureReadHorizon(readThreshold);
        await this._kv.configureNormCapture(true);
    }

    /** The samples with their labels, in text and position order. */
    public toDataset(meta: {tokensSeen: number; texts: CalibrationText[]}): CalibrationDataset {
        const {readThreshold, moreReadThresholds, minWatched, seed} = this._settings;
        return this._reservoir.toDataset(
            {
                layers: this._layers,
                embeddingLength: this._embeddingLength,
                headCountKv: this._headCountKv,
                readThreshold,
                minWatched,
                tokensSeen: meta.tokensSeen,
                texts: meta.texts,
                seed
            },
            moreReadThresholds
        );
    }
}

/** Bytes a sample's features take in the dataset. */
function featureBytesPerSample(layers: number, embeddingLength: number): number {
    return layers * embeddingLength * 4;
}

function checkCaptured(captured: CapturedNorms, layers: number, embeddingLength: number): void {
    if (captured.tokens === 0) return;
    if (captured.layers !== layers || captured.width !== embeddingLength)
        throw new Error(
            `the engine captured rows of ${captured.layers} x ${captured.width}, the model has ${layers} layers of ${embeddingLength}`
        );
    const rowLength = layers * embeddingLength;
    for (let layer = 0; layer < layers; layer++) {
        if (
            Number.isNaN(halfToFloat(captured.rows[layer * embeddingLength]!)) &&
            Number.isNaN(halfToFloat(captured.rows[(captured.tokens - 1) * rowLength + layer * embeddingLength]!))
        )
            throw new AppError(
                "MODEL_INVALID",
                `This model's graph has no attn_norm in layer ${layer} that the retention gates could read: ` + "it cannot be calibrated."
            );
    }
}
