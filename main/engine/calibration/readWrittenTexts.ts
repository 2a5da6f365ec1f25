import {resolveChatWrapper, type LlamaModel} from "node-llama-cpp";
import {NativeKv} from "../native/NativeKv.js";
import {writeDatasetFile} from "./datasetFile.js";
import {readCalibrationData, type TextToRead} from "./readCalibrationData.js";
import type {CalibrationDataset} from "./types.js";
import {renderWrittenText, type WrittenText} from "./writtenTexts.js";

/**
 * Reads the `missing` texts with Full KV (`readCalibrationData`), each cut to `settings.maxTokens`, in one context sized
 * to the longest, keeping about `perText` samples of each; each text's data is kept in its file (`files`, by index) as
 * soon as it is read, so a cancelled job goes on from the next.
 */
export async function readWrittenTexts(
    job: {model: LlamaModel; threads?: number; signal?: AbortSignal},
    texts: WrittenText[],
    missing: number[],
    files: string[],
    settings: {maxTokens: number; readThresholds: number[]; seed: number},
    perText: number,
    report: {progress: (done: number, total: number) => void; onRead: (data: CalibrationDataset) => void; log: (line: string) => void}
): Promise<Map<number, CalibrationDataset>> {
    const chatWrapper = resolveChatWrapper(job.model);
    const rendered = new Map<number, TextToRead>();
    for (const index of missing) {
        const text = renderWrittenText(job.model, chatWrapper, texts[index]!, settings.maxTokens);
        if (text.cut) report.log(`text ${index + 1}: cut to ${settings.maxTokens} tokens (the reading limit)`);
        rendered.set(index, text);
    }
    const longest = Math.max(...[...rendered.values()].map((text) => text.tokens.length));
    const context = await job.model.createContext({
        contextSize: longest + 16,
        threads: job.threads ?? 1,
        sequences: 1,
        flashAttention: false
    });
    const kv = new NativeKv(context);
    const read = new Map<number, CalibrationDataset>();
    try {
        const engine = {model: job.model, sequence: context.getSequence(), kv};
        for (const [done, index] of missing.entries()) {
            job.signal?.throwIfAborted();
            const text = rendered.get(index)!;
            const data = await readCalibrationData(engine, [text], {
                maxSamples: perText,
                readThreshold: settings.readThresholds[0],
                moreReadThresholds: settings.readThresholds.slice(1),
                seed: settings.seed * 100_000 + index,
                signal: job.signal,
                onProgress: (p) => report.progress(done + p.generated / text.tokens.length, missing.length)
            });
            await writeDatasetFile(files[index]!, data);
            read.set(index, data);
            report.onRead(data);
            report.progress(done + 1, missing.length);
            report.log(`reading ${done + 1}/${missing.length}: ${text.tokens.length} tokens read, ${data.tokens} kept`);
        }
    } finally {
        await kv.dispose();
        await context.dispose();
    }
    return read;
}
