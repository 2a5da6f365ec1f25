// The data of a retention calibration: the model thinks with Full KV on each prompt while the engine captures each layer's
// attn_norm row of every token written (the gate's input, native/patches 0012) and keeps each cell's last strong read
// (the label); a seeded uniform sample of the tokens is kept, its horizons read when its text ends.
import type {ChatHistoryItem, ChatModelResponse, ChatWrapper, LlamaContextSequence, LlamaModel, Token} from "node-llama-cpp";
import {AppError} from "../../AppError.js";
import type {NativeKv} from "../native/NativeKv.js";
import {CalibrationRecorder} from "./CalibrationRecorder.js";
import {throwIfAborted} from "./throwIfAborted.js";
import type {CalibrationDataset, CalibrationPrompt, CalibrationText, CollectCalibrationOptions} from "./types.js";

export type CalibrationEngine = {
    model: LlamaModel;
    chatWrapper: ChatWrapper;
    /** A sequence of the context `kv` drives, with room for the longest prompt plus `maxTokens`; it is cleared before each prompt. */
    sequence: LlamaContextSequence;
    kv: NativeKv;
};

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
    const {maxTokens = 1024, signal, onProgress} = options;
    const {model, chatWrapper, sequence, kv} = engine;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new RangeError(`maxTokens must be a positive integer, got ${maxTokens}`);
    const settings = CalibrationRecorder.settings(options);
    if (sequence.context !== kv.context) throw new Error("the sequence is not of the context the NativeKv drives");

    const {layers} = await kv.stats();
    const rendered = prompts.map((prompt) => renderPrompt(model, chatWrapper, prompt));
    const longest = Math.max(0, ...rendered.map((tokens) => tokens.length));
    if (longest + maxTokens > sequence.context.contextSize)
        throw new AppError(
            "BAD_REQUEST",
            `Calibration needs a context of ${longest + maxTokens} cells (the longest prompt, ${longest} tokens, ` +
                `and ${maxTokens} generated), the context has ${sequence.context.contextSize}.`
        );

    const recorder = new CalibrationRecorder(kv, sequence, layers, model.embeddingVectorSize, settings);
    const texts: CalibrationText[] = [];
    let tokensSeen = 0;

    await recorder.start();
    try {
        for (const [promptIndex, promptTokens] of rendered.entries()) {
            throwIfAborted(signal);
            await recorder.startText();

            const textIndex = texts.length;
            const textTokens: Token[] = [...promptTokens];
            let written = 0;
            let stop: CalibrationText["stop"] = "limit";

            const take = async () => {
                const captured = await recorder.take(textIndex, textTokens, promptTokens.length);
                written += captured;
                tokensSeen += captured;
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
            await recorder.label(textIndex, written - 1);
            if (textTokens.length !== written) throw new Error(`the engine wrote ${written} tokens of a text of ${textTokens.length}`);
            await recorder.labelAtOtherThresholds(textIndex, written - 1, async () => {
                await sequence.evaluateWithoutGeneratingNewTokens(textTokens);
            });
            texts.push({
                prompt: promptIndex,
                promptTokens: promptTokens.length,
                generatedTokens: written - promptTokens.length,
                stop,
                tokens: Int32Array.from(textTokens)
            });
        }
    } finally {
        await recorder.stop();
    }

    return recorder.toDataset({tokensSeen, texts});
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
