// The data of a retention calibration: the model thinks with Full KV on each prompt while the engine captures each layer's
// attn_norm row of every token written (the gate's input, native/patches 0012) and keeps each cell's last strong read
// (the label); a seeded uniform sample of the tokens is kept, its horizons read when its text ends.
import type {ChatHistoryItem, ChatModelResponse, ChatWrapper, LlamaContextSequence, LlamaModel, Token} from "node-llama-cpp";
import {AppError} from "../../AppError.js";
import type {NativeKv} from "../native/NativeKv.js";
import {sequenceIdOf} from "../native/ponderAddon.js";
import type {CapturedNorms} from "../native/types.js";
import {CalibrationReservoir} from "./CalibrationReservoir.js";
import {halfToFloat} from "./halfToFloat.js";
import type {CalibrationDataset, CalibrationPrompt, CalibrationText, CollectCalibrationOptions} from "./types.js";

export type CalibrationEngine = {
    model: LlamaModel;
    chatWrapper: ChatWrapper;
    /** A sequence of the context `kv` drives, with room for the longest prompt plus `maxTokens`; it is cleared before each prompt. */
    sequence: LlamaContextSequence;
    kv: NativeKv;
};

/** Bytes a sample's features take in the dataset. */
export function featureBytesPerSample(layers: number, embeddingLength: number): number {
    return layers * embeddingLength * 4;
}

/**
 * Generates greedily with Full KV on every prompt (rendered by the model's chat template, thinking on) up to `maxTokens`
 * tokens each, and returns a seeded uniform sample (reservoir) of the tokens written, prompts included, each with its
 * attn_norm rows (taken when the token is written) and its read horizon per layer and KV head (read when its text ends).
 * Memory: the samples (`maxSamples x layers x embeddingLength x 4` bytes at most, bounded by `maxFeatureBytes`), plus,
 * while a prompt is decoded, its rows as F16 in the engine (prompt tokens x layers x embeddingLength x 2 bytes), and the
 * read horizons next to the KV cache (4 bytes per cell, layer and KV head). Turns the capture and the horizons off and
 * clears the sequence when it ends, however it ends.
 */
export async function collectCalibrationData(
    engine: CalibrationEngine,
    prompts: CalibrationPrompt[],
    options: CollectCalibrationOptions = {}
): Promise<CalibrationDataset> {
    const {
        maxTokens = 1024,
        maxSamples = 8192,
        maxFeatureBytes = 256 * 1024 * 1024,
        readThreshold = 0.5,
        moreReadThresholds = [],
        minWatched = 16,
        seed = 1,
        signal,
        onProgress
    } = options;
    const {model, chatWrapper, sequence, kv} = engine;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new RangeError(`maxTokens must be a positive integer, got ${maxTokens}`);
    if (!Number.isInteger(maxSamples) || maxSamples < 1) throw new RangeError(`maxSamples must be a positive integer, got ${maxSamples}`);
    for (const threshold of [readThreshold, ...moreReadThresholds])
        if (!(threshold > 0 && threshold <= 1)) throw new RangeError(`a read threshold must be within (0, 1], got ${threshold}`);
    if (sequence.context !== kv.context) throw new Error("the sequence is not of the context the NativeKv drives");

    const {layers} = await kv.stats();
    const embeddingLength = model.embeddingVectorSize;
    const rowLength = layers * embeddingLength;
    const cap = Math.max(1, Math.min(maxSamples, Math.floor(maxFeatureBytes / featureBytesPerSample(layers, embeddingLength))));
    const rendered = prompts.map((prompt) => renderPrompt(model, chatWrapper, prompt));
    const longest = Math.max(0, ...rendered.map((tokens) => tokens.length));
    if (longest + maxTokens > sequence.context.contextSize)
        throw new AppError(
            "BAD_REQUEST",
            `Calibration needs a context of ${longest + maxTokens} cells (the longest prompt, ${longest} tokens, ` +
                `and ${maxTokens} generated), the context has ${sequence.context.contextSize}.`
        );

    const reservoir = new CalibrationReservoir(cap, rowLength, seed, moreReadThresholds.length);
    const texts: CalibrationText[] = [];
    let headCountKv = 0;
    let tokensSeen = 0;

    await kv.configureNormCapture(true);
    await kv.configureReadHorizon(readThreshold);
    try {
        for (const [promptIndex, promptTokens] of rendered.entries()) {
            throwIfAborted(signal);
            await sequence.clearHistory();
            await kv.takeCapturedNorms(); // nothing of an earlier text

            const textIndex = texts.length;
            const textTokens: Token[] = [...promptTokens];
            let written = 0;
            let stop: CalibrationText["stop"] = "limit";

            const take = async () => {
                const captured = await kv.takeCapturedNorms();
                checkCaptured(captured, layers, embeddingLength);
                for (let i = 0; i < captured.tokens; i++) {
                    const position = captured.positions[i]!;
                    const slot = reservoir.offer();
                    if (slot >= 0)
                        reservoir.fill(slot, captured, i, {
                            text: textIndex,
                            position,
                            token: textTokens[position] ?? -1,
                            generated: position >= promptTokens.length
                        });
                }
                written += captured.tokens;
                tokensSeen += captured.tokens;
            };

            const generator = sequence.evaluate(promptTokens, {temperature: 0, yieldEogToken: true});
            try {
                for await (const token of generator) {
                    // the prompt, or the token yielded before, has been written
                    await take();
                    const generated = written - promptTokens.length;
                    onProgress?.({prompt: promptIndex, prompts: prompts.length, tokensSeen, generated});
                    if (model.isEogToken(token)) {
                        stop = "eog";
                        break;
                    }
                    if (generated >= maxTokens) break;
                    throwIfAborted(signal);
                    textTokens.push(token);
                }
            } finally {
                await generator.return(undefined);
            }
            await take();

            // the horizons of this text's samples, now that no later query can read them
            const horizon = await kv.readHorizon(sequenceIdOf(sequence));
            headCountKv = Math.max(headCountKv, horizon.heads);
            reservoir.finalize(textIndex, horizon, written - 1);
            if (textTokens.length !== written) throw new Error(`the engine wrote ${written} tokens of a text of ${textTokens.length}`);
            // the same text read again in one pass at each other threshold: the same cells, other horizons
            if (moreReadThresholds.length > 0) {
                await kv.configureNormCapture(false);
                for (const [k, threshold] of moreReadThresholds.entries()) {
                    throwIfAborted(signal);
                    await sequence.clearHistory();
                    await kv.configureReadHorizon(threshold);
                    await sequence.evaluateWithoutGeneratingNewTokens(textTokens);
                    reservoir.finalize(textIndex, await kv.readHorizon(sequenceIdOf(sequence)), written - 1, k);
                }
                await kv.configureReadHorizon(readThreshold);
                await kv.configureNormCapture(true);
            }
            texts.push({
                prompt: promptIndex,
                promptTokens: promptTokens.length,
                generatedTokens: written - promptTokens.length,
                stop,
                tokens: Int32Array.from(textTokens)
            });
        }
    } finally {
        await kv.configureNormCapture(false);
        await kv.configureReadHorizon(null);
        if (!sequence.disposed) await sequence.clearHistory();
    }

    return reservoir.toDataset(
        {layers, embeddingLength, headCountKv, readThreshold, minWatched, tokensSeen, texts, seed},
        moreReadThresholds
    );
}

function renderPrompt(model: LlamaModel, chatWrapper: ChatWrapper, prompt: CalibrationPrompt): Token[] {
    const chatHistory: ChatHistoryItem[] = [];
    if ((prompt.system ?? "") !== "") chatHistory.push({type: "system", text: prompt.system!});
    // The thought opened as an answer opens it (LlamaChat adds the template's thought prefix to an answer it writes):
    // without it a model trained to think after that prefix writes something else (the demo model: wrong program lines).
    const opening: ChatModelResponse["response"] =
        chatWrapper.settings.segments?.thought != null ? [{type: "segment", segmentType: "thought", text: "", ended: false}] : [];
    chatHistory.push({type: "user", text: prompt.user}, {type: "model", response: opening});
    return chatWrapper.generateContextState({chatHistory}).contextText.tokenize(model.tokenizer);
}

export function checkCaptured(captured: CapturedNorms, layers: number, embeddingLength: number): void {
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

export function throwIfAborted(signal: AbortSignal | undefined): void {
    if (signal?.aborted) throw signal.reason ?? new Error("calibration cancelled");
}
