import {
    LlamaChat,
    type ChatHistoryItem,
    type ChatWrapper,
    type LlamaChatResponseChunk,
    type LlamaChatSession,
    type LLamaChatGenerateResponseOptions
} from "node-llama-cpp";
import type {CompressionSettings} from "../../../preload/contract/compression.js";
import type {BuildInfo} from "../../../preload/contract/engine.js";
import {policyEntry} from "../../../preload/policyCatalogue.js";
import {AppError} from "../../AppError.js";
import {fullKvAnswerRoom, kvBudgetExceeded} from "../../kv/budgetCap.js";
import {answerPrompt, promptTail, tokenizeChat} from "./chatPrompt.js";
import {compressionSupport} from "../../kv/compressionSupport.js";
import type {EngineContext} from "../runtime/EngineContext.js";
import type {ContextConfig, LoadedModel, RequestStates, SetStatus} from "../runtime/engineState.js";
import {KvController} from "../pruning/KvController.js";
import type {NativeKv} from "../native/NativeKv.js";
import {prefill} from "./prefill.js";
import {requireRetentionGates} from "../retention/requireRetentionGates.js";
import type {SavedStates} from "../states/SavedStates.js";
import {policyNeeds} from "../policies/scoring.js";
import type {GenerateRequest, GenerationResult, StateOutcome} from "../EngineApi.js";

/** What a generation runs on: the loaded model, the build (compression needs the patched one), the context and its states. */
export type AnswerParts = {
    loaded: LoadedModel;
    build: BuildInfo | null;
    context: EngineContext;
    states: SavedStates;
    setStatus: SetStatus;
    /** Whether the build runs layers off the CPU (a GPU or rpc-servers): a policy switch then gets a new context. Defaults to `false`. */
    offloads?: boolean;
};

/** Tokens short of Full KV's budget at which its token limit stops an answer (the opening's estimate may be short). */
const fullKvBudgetSlack = 16;

/**
 * Streams an answer to the last user turn of `request.history` (or the rest of the unfinished answer that ends it), in the
 * context for the request's budget: the prompt is read (prefill), then node-llama-cpp generates with the conversation's
 * KV policy pruning as it goes. The caller holds the engine's lock.
 */
export async function generateAnswer(parts: AnswerParts, request: GenerateRequest): Promise<GenerationResult> {
    const {loaded, context, states: saved, setStatus} = parts;
    const last = request.history.at(-1);
    const continuing = request.continueLast === true;
    if (last == null || last.role !== (continuing ? "assistant" : "user"))
        throw new AppError("BAD_REQUEST", continuing ? "Only an answer can be continued" : "The conversation must end with a user message");

    const {compression, cells} = request.kv;
    // Full KV frees nothing: it runs on any build and model, stops at its budget, and its cache is the whole sequence.
    const keepsEveryToken = policyEntry(compression.policy).keepsEveryToken;
    if (!keepsEveryToken) {
        if (parts.build?.patched !== true)
            throw new AppError(
                "ENGINE_UNPATCHED",
                "Compression needs Ponder's patched llama.cpp build, which is not loaded: run npm run build:native, or use Full KV"
            );
        const support = compressionSupport(loaded.inspection.architecture);
        if (!support.supported) throw new AppError("BAD_REQUEST", support.note!);
    }
    // TRIM-KV runs on the model's own retention gates: without valid ones it is refused with the reason, never replaced.
    const retentionGates = policyNeeds(compression).retention === true ? (await requireRetentionGates(loaded.inspection)).path : null;

    setStatus({state: "generating"});
    let controller: KvController | null = null;
    const internalAbort = new AbortController();
    const forwardAbort = () => internalAbort.abort();
    request.signal.addEventListener("abort", forwardAbort);
    let stoppedBy: "budget" | null = null;
    try {
        const previousContext = context.active;
        const active = await context.ensure(loaded, contextConfig(cells, compression, parts.offloads === true), !keepsEveryToken);
        const {session} = active;
        if (active.kv != null) {
            const sequence = session.sequence;
            controller = new KvController({
                kv: active.kv,
                sequenceId: 0, // the context has one sequence
                compression,
                cells,
                tokensSeen: () => sequence.nextTokenIndex,
                now: () => performance.now(),
                retentionGates
            });
            await startController(controller, active.kv, retentionGates);
            active.controller = controller;
        }

        const thinking = request.thinking?.enabled !== false;
        const {history, full, skipThought, openingKind} = answerPrompt(loaded.chatWrapper, request.systemPrompt, request.history, thinking);
        // Tokens evaluated for this answer: the new message (and a history rebuilt into a new context).
        const inputBefore = session.sequence.tokenMeter.usedInputTokens;
        // The prompt in tokens: the rendered history and the opening the wrapper adds (as last measured). Full KV's
        // refusal names this figure, and usage reports the same one measured (below).
        const renderedTokens = tokenizeChat(loaded, full);
        const rendered = renderedTokens.length;
        const promptLength = rendered + (loaded.openingTokens.get(openingKind) ?? 0);
        if ((controller == null || keepsEveryToken) && promptLength > cells - fullKvAnswerRoom) throw kvBudgetExceeded(promptLength, cells);
        const outputBefore = session.sequence.tokenMeter.usedOutputTokens;
        // The new message is read in chunks a stop can come between; with a pruning policy each is pruned as it goes,
        // so a question longer than the budget still fits. The last tokens (the assistant's opening) are left to
        // node-llama-cpp.
        const states: RequestStates | undefined =
            request.states == null
                ? undefined
                : {
                      files: request.states,
                      expectation: saved.expectation(loaded.inspection, active.config, compression),
                      outcome: {restored: null, note: null, saved: null} satisfies StateOutcome as StateOutcome
                  };
        // For the progress's wording (readReason): the earlier turns' tokens, and whether the context was made anew.
        const reading = {
            newContext: previousContext != null && previousContext !== active,
            earlierTokens: request.onRebuild == null || request.history.length < 2 ? 0 : tokenizeChat(loaded, history).length
        };
        await prefill(saved, {
            active,
            rendered: renderedTokens,
            controller,
            cells,
            onProgress: request.onRebuild,
            holdBack: promptTail,
            signal: internalAbort.signal,
            states,
            reading
        });
        session.setChatHistory(history);
        controller?.beginAnswer();
        const started = performance.now();
        let generated = 0;
        let sinceSample = 0;
        const sampleEvery = request.sampleEvery ?? Math.max(4, Math.min(32, compression.pruneEvery));
        const kvController = controller;
        const sample = () => {
            if (kvController == null || request.onSample == null) return;
            const seconds = (performance.now() - started) / 1000;
            void kvController.sample(seconds > 0 ? generated / seconds : 0).then(request.onSample, () => {});
        };

        // Full KV never frees a cell: it stops at the budget (below, as the tokens arrive). node-llama-cpp may hold a few
        // tokens back before it hands them on (a partial stop trigger), so a token limit a little short of the budget
        // backs that up: past the context's end node-llama-cpp would shift the context, which Full KV cannot do.
        const budgetTokens = keepsEveryToken ? Math.max(1, cells - fullKvBudgetSlack - promptLength) : Infinity;
        const tokenLimit = Math.min(request.maxTokens ?? Infinity, budgetTokens);
        const options = {
            signal: internalAbort.signal,
            stopOnAbortSignal: true,
            // no limit: undefined, as node-llama-cpp takes it
            maxTokens: Number.isFinite(tokenLimit) ? tokenLimit : undefined,
            temperature: request.temperature,
            topP: request.topP,
            topK: request.topK,
            minP: request.minP,
            repeatPenalty:
                request.repeatPenalty != null && request.repeatPenalty > 1
                    ? {penalty: request.repeatPenalty, lastTokens: 64}
                    : (false as const),
            seed: request.seed,
            customStopTriggers: request.stop != null && request.stop.length > 0 ? request.stop : undefined,
            budgets: {thoughtTokens: request.thinking?.budget ?? Infinity},
            onResponseChunk: (chunk: LlamaChatResponseChunk) => {
                const segment = chunk.type === "segment" && chunk.segmentType === "thought" ? "thought" : "answer";
                if (chunk.text === "" && chunk.tokens.length === 0) return;
                request.onChunk({segment, text: chunk.text, tokens: chunk.tokens.length});
                generated += chunk.tokens.length;
                sinceSample += chunk.tokens.length;
                kvController?.onTokens(chunk.tokens.length);
                if (sinceSample >= sampleEvery) {
                    sinceSample = 0;
                    sample();
                }
                // Full KV never frees a cell: stop at the budget instead of letting node-llama-cpp shift the context.
                if (keepsEveryToken && session.sequence.nextTokenIndex >= cells - 2 && stoppedBy == null) {
                    stoppedBy = "budget";
                    internalAbort.abort();
                }
            }
        };
        const result =
            last.role === "user" && !skipThought
                ? await session.promptWithMeta(last.text, options)
                : await continueResponse(session, loaded.chatWrapper, full, options);

        const seconds = (performance.now() - started) / 1000;
        const finalSample = controller != null ? await controller.sample(seconds > 0 ? generated / seconds : 0, true) : null;
        if (finalSample != null) request.onSample?.(finalSample);
        const promptTokens = session.sequence.tokenMeter.usedInputTokens - inputBefore;
        // Tokens the model wrote (segment markers included), and before them the whole prompt: the sequence keeps
        // every token it has seen, evicted ones too.
        const outputTokens = session.sequence.tokenMeter.usedOutputTokens - outputBefore;
        const prompt = session.sequence.nextTokenIndex - outputTokens;
        loaded.openingTokens.set(openingKind, Math.max(0, prompt - rendered));
        // Full KV keeps every cell: the whole sequence is the state the next turn's prompt starts with, written later.
        if (states?.files.save != null && keepsEveryToken)
            states.outcome.pending = saved.defer(active, loaded, states.files.save, states.expectation, renderedTokens, full);
        return {
            stopReason:
                stoppedBy === "budget" || (result.stopReason === "maxTokens" && budgetTokens < (request.maxTokens ?? Infinity))
                    ? "budget"
                    : result.stopReason,
            promptTokens,
            promptLength: prompt,
            outputTokens,
            states: states?.outcome
        };
    } catch (err) {
        // A stop pressed before the first token surfaces as an AbortError: it is still a stop.
        if (request.signal.aborted) return {stopReason: "abort", promptTokens: 0};
        if (err instanceof AppError) throw err;
        if (controller?.error != null)
            throw new AppError("INTERNAL", `Pruning failed, so the answer stopped: ${controller.error.message}`, {cause: err});
        const message = (err as Error).message;
        if (/slot|kv cache|failed to decode|NoKvSlot/i.test(message))
            throw new AppError(
                "BAD_REQUEST",
                `The conversation does not fit in the KV budget of ${cells} cells: raise the budget or start a new conversation (${message})`,
                {cause: err}
            );
        throw new AppError("INTERNAL", `Generation failed: ${message}`, {cause: err});
    } finally {
        request.signal.removeEventListener("abort", forwardAbort);
        const active = context.active;
        if (active != null && active.controller === controller) active.controller = null;
        setStatus({state: "ready"});
    }
}

/**
 * Starts the controller: its scoring, and for TRIM-KV the model's retention gates, loaded into the context. A build without
 * the gates, or an engine that refuses the gate file, is an error that says so.
 */
async function startController(controller: KvController, kv: NativeKv, retentionGates: string | null): Promise<void> {
    try {
        await controller.start();
    } catch (err) {
        if (retentionGates != null && kv.retentionGates == null)
            throw new AppError(
                "POLICY_UNAVAILABLE",
                `The engine refused this model's retention gates (${retentionGates}): ${(err as Error).message}`,
                {cause: err}
            );
        throw err;
    }
}

/**
 * Generates the rest of the unfinished answer that ends `history`, in the session's sequence: node-llama-cpp continues
 * a chat history whose last item is a model response (an unended thought segment goes on as thought).
 */
async function continueResponse(
    session: LlamaChatSession,
    chatWrapper: ChatWrapper,
    history: ChatHistoryItem[],
    options: LLamaChatGenerateResponseOptions<undefined>
): Promise<{stopReason: GenerationResult["stopReason"]}> {
    const chat = new LlamaChat({contextSequence: session.sequence, chatWrapper, autoDisposeSequence: false});
    try {
        const {metadata} = await chat.generateResponse(history, options);
        return {stopReason: metadata.stopReason};
    } finally {
        chat.dispose({disposeSequence: false});
    }
}

/** The context a generation asks for: its budget's cells, the K and V cache types and flash attention. */
export function contextConfig(cells: number, compression: CompressionSettings, offloads: boolean): ContextConfig {
    return {
        cells,
        kvType: compression.kvType,
        kvTypeV: compression.kvTypeV,
        flashAttention: compression.flashAttention,
        reads: offloads ? policyReads(compression) : null
    };
}

/**
 * The per-cell values a policy turns on in the patched engine and the rows it scores, as a key: two policies with the
 * same key share a context on a GPU or RPC build.
 */
function policyReads(compression: CompressionSettings): string {
    if (policyEntry(compression.policy).keepsEveryToken) return "";
    const needs = policyNeeds(compression);
    // What shapes the graph: the values read and the query rows scored (the decay is a number the graph takes as it is).
    return JSON.stringify({
        scores: needs.scores !== false,
        gates: needs.retention === true,
        norms: needs.valueNorms === true,
        allRows: needs.allRows,
        everyRow: needs.everyRow === true,
        rows: needs.rows ?? null
    });
}
