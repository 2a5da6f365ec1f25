// A model's own answers to prompts, greedy with Full KV and thinking on: texts a calibration can read back (`--traces`,
// the bench's transfer suite) as the model wrote them.
import {LlamaText, resolveChatWrapper, type LlamaModel, type Token} from "node-llama-cpp";
import {collectCalibrationData} from "../../main/engine/calibration/collectCalibrationData.js";
import type {WrittenText} from "../../main/engine/calibration/writtenTexts.js";
import {NativeKv} from "../../main/engine/native/NativeKv.js";

/** Each prompt's question, thought and answer as the model writes them, one prompt at a time. */
export async function answerPrompts(
    model: LlamaModel,
    prompts: string[],
    options: {maxTokens: number; threads: number; onAnswer?: (index: number, tokens: number, stop: string) => void}
): Promise<WrittenText[]> {
    const chatWrapper = resolveChatWrapper(model);
    const context = await model.createContext({contextSize: 4096, flashAttention: false, threads: options.threads, sequences: 1});
    const kv = new NativeKv(context);
    const suffix = chatWrapper.settings.segments?.thought?.suffix;
    const marker = suffix == null ? "</think>" : LlamaText(suffix).toString().trim();
    const sequence = context.getSequence();
    const texts: WrittenText[] = [];
    try {
        for (const [index, user] of prompts.entries()) {
            // the fewest samples: only the text written is used
            const data = await collectCalibrationData({model, chatWrapper, sequence, kv}, [{user}], {
                maxTokens: options.maxTokens,
                maxSamples: 1
            });
            const text = data.texts[0]!;
            const written = model.detokenize(Array.from(text.tokens.subarray(text.promptTokens)) as Token[], false);
            const end = written.indexOf(marker);
            const thought = (end < 0 ? written : written.slice(0, end)).trim();
            const answer = end < 0 ? "" : written.slice(end + marker.length).trim();
            texts.push({turns: [{user, thought, answer}]});
            options.onAnswer?.(index, text.generatedTokens, text.stop);
        }
    } finally {
        await kv.dispose();
        await context.dispose();
    }
    return texts;
}
