import type {GenerateRequest, GenerationResult} from "../../main/engine/EngineApi.js";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";

/**
 * One greedy answer to a single user question, the policy pruning every 8 tokens within `cells` cells, through an
 * engine in this process or in its own: the thought and the answer apart and as streamed together, the tokens written
 * and the prompt's, and why it stopped.
 */
export async function greedyAnswer(
    engine: {generate(request: GenerateRequest): Promise<GenerationResult>},
    question: string,
    policy: PolicyId,
    cells: number,
    options: {maxTokens?: number; onChunk?: (text: string) => void; compression?: Partial<CompressionSettings>} = {}
) {
    let thought = "";
    let answer = "";
    let text = "";
    let tokens = 0;
    const result = await engine.generate({
        history: [{role: "user", text: question}],
        systemPrompt: "",
        temperature: 0,
        maxTokens: options.maxTokens ?? 2048,
        signal: new AbortController().signal,
        kv: {compression: {...defaultCompressionSettings, policy, pruneEvery: 8, ...options.compression}, cells},
        onChunk(chunk) {
            tokens += chunk.tokens;
            text += chunk.text;
            if (chunk.segment === "thought") thought += chunk.text;
            else answer += chunk.text;
            options.onChunk?.(chunk.text);
        }
    });
    return {thought, answer, text, tokens, promptTokens: result.promptTokens, stopReason: result.stopReason};
}

/**
 * `greedyAnswer` as the task models' tests score it: the thought trimmed (to compare with a problem's), the answer, and
 * the cells the run used (the prompt, the tokens written and the template's closing tokens), which the pruned runs take
 * a share of.
 */
export async function greedySolve(
    engine: {generate(request: GenerateRequest): Promise<GenerationResult>},
    question: string,
    policy: PolicyId,
    cells: number
) {
    const run = await greedyAnswer(engine, question, policy, cells);
    return {thought: run.thought.trim(), answer: run.answer, used: run.promptTokens + run.tokens + 4};
}
