import fs from "node:fs/promises";
import path from "node:path";
import {readGgufFileInfo} from "node-llama-cpp";
import {AppError} from "../../AppError.js";
import {checkGgufHeader} from "../gguf/checkGgufHeader.js";
import type {ModelInspection} from "../EngineApi.js";

/**
 * Reads a GGUF file's header and checks that the file is whole, with an error a person can act on
 * for a missing file, a folder, a file that is not GGUF, a damaged header and a truncated download.
 */
export async function inspectModel(modelPath: string): Promise<ModelInspection> {
    const resolved = path.resolve(modelPath);
    let stat;
    try {
        stat = await fs.stat(resolved);
    } catch {
        throw new AppError("MODEL_INVALID", `No model file at ${resolved}`);
    }
    if (!stat.isFile()) throw new AppError("MODEL_INVALID", `${resolved} is not a file`);

    // Every length and count is checked against the file before node-llama-cpp's reader sees it: that reader (and
    // llama.cpp's) trusts them, and a hostile header aborts the process or grows memory without end.
    const header = await checkGgufHeader(resolved);

    let info;
    try {
        info = await readGgufFileInfo(resolved, {readTensorInfo: false, logWarnings: false, sourceType: "filesystem"});
    } catch (err) {
        throw new AppError("MODEL_INVALID", `${path.basename(resolved)} has a damaged GGUF header: ${(err as Error).message}`, {
            cause: err
        });
    }

    const metadata = info.metadata;
    const template = metadata.tokenizer?.chat_template;
    const arch = (info.architectureMetadata ?? {}) as Record<string, unknown> & {attention?: Record<string, unknown>};
    return {
        path: resolved,
        name: String(metadata.general?.name ?? path.basename(resolved, path.extname(resolved))),
        sizeBytes: stat.size,
        architecture: metadata.general?.architecture ?? null,
        contextLength: asNumber(arch.context_length),
        layers: asNumber(arch.block_count),
        headCount: asNumber(arch.attention?.head_count),
        headCountKv: asNumber(arch.attention?.head_count_kv) ?? asNumber(arch.attention?.head_count),
        embeddingLength: asNumber(arch.embedding_length),
        keyLength: asNumber(arch.attention?.key_length),
        valueLength: asNumber(arch.attention?.value_length),
        feedForwardLength: asNumber(arch.feed_forward_length),
        vocabularySize:
            asNumber(arch.vocab_size) ?? (Array.isArray(metadata.tokenizer?.ggml?.tokens) ? metadata.tokenizer.ggml.tokens.length : null),
        weightsBytes: header.tensorBytes,
        layerWeightsBytes: header.layerTensorBytes,
        outputWeightsBytes: header.outputTensorBytes,
        tiedOutputBytes: header.tiedOutputBytes,
        parameterCount: header.parameterCount,
        weightType: header.weightType,
        hasChatTemplate: typeof template === "string",
        thinkingToggle: typeof template === "string" && /<think>|enable_thinking/.test(template),
        declaredSampling: declaredSampling(metadata.general as Record<string, unknown> | undefined)
    };
}

/** `general.sampling.*` (llama.cpp's LLM_KV_GENERAL_SAMPLING_*), as far as the file declares it. */
function declaredSampling(general: Record<string, unknown> | undefined): ModelInspection["declaredSampling"] {
    const sampling = general?.sampling as Record<string, unknown> | undefined;
    if (sampling == null || typeof sampling !== "object") return undefined;
    const fields = {
        temperature: sampling.temp,
        topP: sampling.top_p,
        topK: sampling.top_k,
        minP: sampling.min_p,
        repeatPenalty: sampling.penalty_repeat
    };
    const declared = Object.fromEntries(
        Object.entries(fields)
            .map(([key, value]) => [key, asNumber(value)])
            .filter(([, value]) => value != null)
    );
    return Object.keys(declared).length > 0 ? declared : undefined;
}

function asNumber(value: unknown): number | null {
    if (typeof value === "number") return value;
    if (typeof value === "bigint") return Number(value);
    if (Array.isArray(value) && typeof value[0] === "number") return value[0];
    return null;
}
