// The data of a retention calibration from texts already written: each text is read with Full KV at prompt speed
// (batches of `chunk` tokens) while the engine captures each layer's attn_norm row of every token and keeps each cell's
// last strong read, as it does while the model writes (collectCalibrationData). Reading a text gives the same attention
// as writing it, up to the rounding of batched against one-token kernels, so the same labels at a fraction of the cost.
import type {Token} from "node-llama-cpp";
import {AppError} from "../../AppError.js";
import {CalibrationRecorder} from "./CalibrationRecorder.js";
import type {CalibrationEngine} from "./collectCalibrationData.js";
import {throwIfAborted} from "./throwIfAborted.js";
import type {CalibrationDataset, CalibrationText, CollectCalibrationOptions} from "./types.js";

/** A text to read: its tokens, of which the first `promptTokens` are the question (the rest the model's). */
export type TextToRead = {tokens: Token[]; promptTokens: number; cut?: boolean};

export type ReadCalibrationOptions = Omit<CollectCalibrationOptions, "maxTokens"> & {
    /**
     * Tokens per evaluation while reading: the prompt chunk the engine reads a prompt in (larger batches read far slower
     * on the CPU build: docs/BENCHMARKS.md, "Calibration by reading"). Defaults to `128`.
     */
    chunk?: number;
};

/**
 * Reads every text with Full KV and returns a seeded uniform sample (reservoir) of its tokens with their attn_norm rows
 * and read horizons, as `collectCalibrationData` does for texts it has the model write. `onProgress` reports tokens
 * read as `generated` (of the current text). The capture, the horizons and the sequence are cleared however it ends.
 */
export async function readCalibrationData(
    engine: Omit<CalibrationEngine, "chatWrapper">,
    texts: TextToRead[],
    options: ReadCalibrationOptions = {}
): Promise<CalibrationDataset> {
    const {chunk = 128, signal, onProgress} = options;
    const {model, sequence, kv} = engine;
    if (!Number.isInteger(chunk) || chunk < 1) throw new RangeError(`chunk must be a positive integer, got ${chunk}`);
    const settings = CalibrationRecorder.settings(options);
    if (sequence.context !== kv.context) throw new Error("the sequence is not of the context the NativeKv drives");
    const longest = Math.max(0, ...texts.map((text) => text.tokens.length));
    if (longest > sequence.context.contextSize)
        throw new AppError(
            "BAD_REQUEST",
            `Reading needs a context of ${longest} cells (the longest text), the context has ${sequence.context.contextSize}.`
        );

    const {layers} = await kv.stats();
    const recorder = new CalibrationRecorder(kv, sequence, layers, model.embeddingVectorSize, settings);
    const done: CalibrationText[] = [];
    let tokensSeen = 0;

    const read = async (tokens: Token[], capture: ((from: number) => Promise<void>) | null, textIndex: number) => {
        for (let from = 0; from < tokens.length; from += chunk) {
            throwIfAborted(signal);
            await sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(from, from + chunk));
            if (capture != null) {
                await capture(from);
                onProgress?.({prompt: textIndex, prompts: texts.length, tokensSeen, generated: Math.min(tokens.length, from + chunk)});
            }
        }
    };

    await recorder.start();
    try {
        for (const [textIndex, text] of texts.entries()) {
            throwIfAborted(signal);
            if (text.tokens.length < 2) throw new Error(`text ${textIndex + 1} has fewer than 2 tokens`);
            await recorder.startText();
            let taken = 0;
            await read(
                text.tokens,
                async () => {
                    const captured = await recorder.take(textIndex, text.tokens, text.promptTokens);
                    taken += captured;
                    tokensSeen += captured;
                },
                textIndex
            );
            if (taken !== text.tokens.length) throw new Error(`the engine captured ${taken} tokens of a text of ${text.tokens.length}`);
            await recorder.label(textIndex, text.tokens.length - 1);
            await recorder.labelAtOtherThresholds(textIndex, text.tokens.length - 1, () => read(text.tokens, null, textIndex));
            done.push({
                prompt: textIndex,
                promptTokens: text.promptTokens,
                generatedTokens: text.tokens.length - text.promptTokens,
                stop: text.cut === true ? "limit" : "eog",
                tokens: Int32Array.from(text.tokens)
            });
        }
    } finally {
        await recorder.stop();
    }
    return recorder.toDataset({tokensSeen, texts: done});
}
