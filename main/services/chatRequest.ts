import type {MessageStats} from "../../preload/contract.js";
import type {GenerateRequest} from "../engine/EngineApi.js";
import type {AnswerProgress} from "./AnswerProgress.js";
import type {ChatAnswer} from "./chatAnswer.js";
import {recordSample} from "./recordSample.js";
import type {StateStore} from "./StateStore.js";
import type {Clock, Emit} from "./types.js";

/** What the engine's request reports to, besides the answer itself. */
type ChatRequestContext = {
    emit: Emit;
    now: Clock;
    progress: AnswerProgress;
    /** Where the statistics of the answer go as it streams. */
    stats: MessageStats;
    maxSamples: number;
    states: StateStore | undefined;
    /** Stops the answer: the person's stop, or a save that failed. */
    signal: AbortSignal;
};

/**
 * The engine's request for a chat answer, once its turn has come: its history and sampling, the states it may load and
 * save, and the callbacks that save what arrives, record the samples and tell the renderer.
 */
export function chatRequest(answer: ChatAnswer, seed: number, context: ChatRequestContext): Omit<GenerateRequest, "kv"> {
    const {conversationId, messageId, settings, continuing} = answer;
    const {emit, progress, stats} = context;
    return {
        states: statesOf(answer, context.states),
        onRebuild: (progress, reason) => emit("chat:rebuild", {conversationId, progress, reason}),
        onSample: (sample) => {
            recordSample(stats, sample, context.maxSamples);
            emit("chat:memory", {conversationId, messageId, sample});
        },
        history: answer.history,
        continueLast: continuing,
        systemPrompt: settings.systemPrompt,
        temperature: settings.temperature,
        topP: settings.topP,
        topK: settings.topK,
        minP: settings.minP,
        repeatPenalty: settings.repeatPenalty,
        thinking: {enabled: settings.thinking, budget: settings.thinkingBudget},
        maxTokens: settings.maxTokens,
        seed,
        signal: context.signal,
        onChunk: (chunk) => {
            const now = context.now();
            progress.add(chunk, now);
            if (chunk.segment === "thought" && !continuing)
                (stats.thoughtChunks ??= []).push(progress.fields.thinking_tokens, progress.fields.thinking.length);
            const {thinking_tokens: thinkingTokens, answer_tokens: answerTokens, total_ms: elapsedMs} = progress.fields;
            emit("chat:delta", {
                conversationId,
                messageId,
                segment: chunk.segment,
                text: chunk.text,
                thinkingTokens,
                answerTokens,
                elapsedMs
            });
            progress.saveIfDue(now);
        }
    };
}

/** The path's earlier answers, newest first (and the answer itself, when it goes on): their states may be loaded. */
function statesOf(answer: ChatAnswer, store: StateStore | undefined): GenerateRequest["states"] {
    if (store == null) return undefined;
    const {conversationId, messageId, row: answerRow, continuing} = answer;
    return {
        load: answer.rows
            .filter((row) => row.role === "assistant" && (continuing ? row.seq <= answerRow.seq : row.id !== messageId))
            .reverse()
            .map((row) => store.pathOf(conversationId, row.id)),
        // A disk budget of 0 saves none (the states already there may still be loaded).
        save: store.saving ? store.prepare(conversationId, messageId) : undefined
    };
}
