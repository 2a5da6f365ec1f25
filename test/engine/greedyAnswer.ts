import type {GenerateRequest, GenerationResult} from "../../main/engine/EngineApi.js";
import type {CompressionSettings, PolicyId} from "../../preload/contract.js";
import {defaultCompressionSettings} from "../../main/services/schemas.js";
import {isDemoAnswerCorrect} from "../../main/demo/demoTask.js";

type Generator = {generate(request: GenerateRequest): Promise<GenerationResult>};

/**
 * One greedy answer to a single user question, the policy pruning every 8 tokens within `cells` cells, through an
 * engine in this process or in its own: the thought and the answer apart and as streamed together, the tokens written
 * and the prompt's, and why it stopped.
 */
export async function greedyAnswer(
    engine: Generator,
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
    engine: Generator,
    question: string,
    policy: PolicyId,
    cells: number,
    compression: Partial<CompressionSettings> = {}
) {
    const run = await greedyAnswer(engine, question, policy, cells, {compression});
    return {thought: run.thought.trim(), answer: run.answer, used: run.promptTokens + run.tokens + 4, promptTokens: run.promptTokens};
}

/**
 * Scores a task model's held-out problems as its tests do: `score("full", 1)` first, at 4,096 cells, records the cells
 * each problem used (and its prompt's tokens); a pruning policy then runs at `share` of them. Each row says whether the
 * answer is right and the thought the generator's, line for line.
 */
export function heldOutScorer(
    engine: Generator,
    problems: readonly {question: string; thinking: string; answer: string; family?: string}[]
) {
    const fullCells: number[] = [];
    const promptTokens: number[] = [];
    async function score(policy: PolicyId, share: number, compression: Partial<CompressionSettings> = {}) {
        if (policy !== "full" && fullCells.length !== problems.length) throw new Error("score Full KV first");
        const rows = [];
        for (const [index, problem] of problems.entries()) {
            const cells = policy === "full" ? 4096 : Math.round(fullCells[index]! * share);
            const run = await greedySolve(engine, problem.question, policy, cells, compression);
            if (policy === "full") {
                fullCells[index] = run.used;
                promptTokens[index] = run.promptTokens;
            }
            rows.push({family: problem.family, right: isDemoAnswerCorrect(problem, run.answer), same: run.thought === problem.thinking});
        }
        return {right: rows.filter((row) => row.right).length, same: rows.filter((row) => row.same).length, rows};
    }
    return {fullCells, promptTokens, score};
}
