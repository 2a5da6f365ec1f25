import {resolveChatWrapper, type LlamaModel} from "node-llama-cpp";
import {NativeKv} from "../native/NativeKv.js";
import {collectCalibrationData} from "./collectCalibrationData.js";
import {writeDatasetFile} from "./datasetFile.js";
import type {SeededPrompt} from "./prompts.js";
import type {CalibrationDataset, CollectCalibrationOptions} from "./types.js";
import type {CalibrationSettings} from "./writeCalibratedSidecar.js";

/**
 * The model thinks with Full KV on the `missing` prompts (`collectCalibrationData`), one at a time in one context sized
 * to the longest, keeping about `perPrompt` samples of each; each prompt's data is kept in its file (`files`, by index)
 * as soon as it is thought, and `onThought` is told, so a cancelled job goes on from the next. Returns the seconds spent
 * thinking and the prompts thought.
 */
export async function thinkPrompts(
    job: {model: LlamaModel; threads?: number; signal?: AbortSignal},
    prompts: SeededPrompt[],
    missing: number[],
    files: string[],
    settings: CalibrationSettings,
    perPrompt: number,
    report: {
        progress: (done: number, total: number, remaining: number | null) => void;
        onThought: (index: number, data: CalibrationDataset) => Promise<void>;
        log: (line: string) => void;
    }
): Promise<{seconds: number; thought: number}> {
    const chatWrapper = resolveChatWrapper(job.model);
    const longest = Math.max(...missing.map((index) => job.model.tokenize(prompts[index]!.user).length));
    // the rendered prompt adds the template's markers to the message's own tokens
    const context = await job.model.createContext({
        contextSize: longest + 256 + settings.maxTokens,
        threads: job.threads ?? 1,
        sequences: 1,
        flashAttention: false
    });
    const kv = new NativeKv(context);
    let seconds = 0;
    let thought = 0;
    try {
        const engine = {model: job.model, chatWrapper, sequence: context.getSequence(), kv};
        for (const index of missing) {
            job.signal?.throwIfAborted();
            const t0 = performance.now();
            const data = await collectCalibrationData(engine, [{user: prompts[index]!.user}], {
                maxTokens: settings.maxTokens,
                maxSamples: perPrompt,
                readThreshold: settings.readThresholds[0],
                moreReadThresholds: settings.readThresholds.slice(1),
                seed: settings.seed * 100_000 + index,
                signal: job.signal,
                onProgress: (p) => report.progress(index + p.generated / settings.maxTokens, prompts.length, null)
            } satisfies CollectCalibrationOptions);
            if (data.texts.every((text) => text.generatedTokens === 0)) report.log(`prompt ${index + 1}: the model wrote nothing`);
            await writeDatasetFile(files[index]!, data);
            seconds += (performance.now() - t0) / 1000;
            thought++;
            await report.onThought(index, data);
            const left = missing.length - thought;
            report.progress(
                index + 1,
                prompts.length,
                (seconds / thought) * (left + settings.validationPrompts * 2) + trainingEstimate(data, settings)
            );
            report.log(
                `thinking ${index + 1}/${prompts.length}: ${data.texts[0]?.generatedTokens ?? 0} tokens written (${data.texts[0]?.stop ?? "-"}), ${data.tokens} kept`
            );
        }
    } finally {
        await kv.dispose();
        await context.dispose();
    }
    return {seconds, thought};
}

/**
 * Seconds to train on as many samples as one prompt's (`sample`) times the prompts: about 4 x layers x width x hidden
 * multiply-adds per sample and epoch (forward and the first layer's gradient) at about 1.5e9 a second (measured here).
 */
function trainingEstimate(sample: CalibrationDataset, settings: CalibrationSettings): number {
    return (
        (Math.min(settings.tokens, sample.tokens * settings.prompts) *
            sample.layers *
            sample.embeddingLength *
            settings.hidden *
            4 *
            settings.epochs) /
        1.5e9
    );
}
