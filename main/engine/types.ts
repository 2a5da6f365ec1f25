import type {BuildInfo} from "../../preload/contract.js";

export type ChatTurn =
    | {role: "user", text: string}
    | {role: "assistant", text: string, thinking: string};

/** What a GGUF file says about itself, read from its header without loading weights. */
export type ModelInspection = {
    path: string,
    name: string,
    sizeBytes: number,
    architecture: string | null,
    contextLength: number | null,
    layers: number | null,
    headCount: number | null,
    headCountKv: number | null,
    embeddingLength: number | null,
    hasChatTemplate: boolean
};

export type GenerationChunk = {segment: "thought" | "answer", text: string, tokens: number};

export type GenerateRequest = {
    /** The conversation so far; the last turn is the user's prompt to answer. */
    history: ChatTurn[],
    systemPrompt: string,
    temperature: number,
    maxTokens: number,
    /** Sampling seed; a fixed seed makes a generation repeatable. */
    seed?: number,
    signal: AbortSignal,
    onChunk(chunk: GenerationChunk): void
};

export type GenerationResult = {
    stopReason: "eogToken" | "maxTokens" | "abort" | "stopGenerationTrigger" | "customStopTrigger" | "functionCalls",
    /** Tokens evaluated for the prompt in this generation (after prefix reuse). */
    promptTokens: number
};

export type LlamaRuntimeInfo = BuildInfo;
