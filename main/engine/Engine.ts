import {
    LlamaChat, LlamaChatSession, resolveChatWrapper, type ChatHistoryItem, type ChatModelResponse, type ChatWrapper, type Llama,
    type LlamaChatResponseChunk, type LLamaChatGenerateResponseOptions, type LlamaContext, type LlamaModel, type Token
} from "node-llama-cpp";
import fs from "node:fs";
import os from "node:os";
import {withLock} from "lifecycle-utils";
import type {BuildInfo, CompressionSettings, EngineStatus, LayerPlacement, ReadReason} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {assertBudgetWithinCap, fullKvAnswerRoom, kvBudgetExceeded} from "./budgetCap.js";
import {compressionSupport} from "./compressionSupport.js";
import {contextFit} from "./contextFit.js";
import type {EngineApi, LoadOptions, RuntimeOptions} from "./EngineApi.js";
import {inspectModel} from "./inspectModel.js";
import {KvController} from "./KvController.js";
import {cacheTypeProblem, describeKvTypes, formatMib} from "./kvMemory.js";
import {NativeKv} from "./native/NativeKv.js";
import {readReason, type PromptReading} from "./readReason.js";
import {requireRetentionGates} from "./retention/requireRetentionGates.js";
import {policyNeeds} from "./scoring.js";
import {gateSequenceDecodes, ponderContextOf} from "./native/ponderAddon.js";
import {gpuOffload} from "./gpuOffload.js";
import {connectRpcServers, describeRpcProblems} from "./rpc/connectRpcServers.js";
import {hasRpcDevices} from "./rpc/rpcEndpoint.js";
import {DeferredState} from "./DeferredState.js";
import {findStateCandidate, restoreSequenceState, saveSequenceState} from "./SequenceStates.js";
import {hashSettings, reviveTyped, tagTyped, type StateExpectation} from "./stateFile.js";
import type {
    ChatTurn, CountTokensRequest, GenerateRequest, GenerationResult, ModelInspection, PromptTokenCount, StateFiles, StateOutcome, StateSave
} from "./types.js";

export type {LoadOptions};

export type LlamaLoader = (options: RuntimeOptions) => Promise<{llama: Llama, build: BuildInfo, warning?: string}>;

export type EngineOptions = {
    /** Loads the llama.cpp runtime; the app's loader prefers the patched build and says when it is missing. */
    loadLlama: LlamaLoader,
    /** The runtime to load (the engine build). Defaults to `{build: "auto"}`. */
    runtime?: RuntimeOptions,
    /** Threads per context; `0` lets llama.cpp decide. Defaults to `0`. */
    threads?: number,
    /** Whether `dispose()` also disposes the runtime `loadLlama` gave (false when the caller shares it). Defaults to `true`. */
    ownsRuntime?: boolean,
    /**
     * Bytes free where a new context goes, read before each one is created (its fit is checked against them). Defaults to
     * `freeMemory()`: free VRAM on a GPU build, free RAM otherwise.
     */
    freeMemory?: () => Promise<number>
};

/** What a context is created with; a change rebuilds it. */
export type ContextConfig = Pick<CompressionSettings, "kvType" | "kvTypeV" | "flashAttention"> & {cells: number};

/** Positions node-llama-cpp may reach while pruning keeps the live cells within the budget. */
const prunedPositionLimit = 1 << 22;
/**
 * The largest KV state saved for resuming: a larger one is not written (the write would hold up what it runs before: a
 * pruned prompt's reading, the next request, quitting).
 */
const maxStateBytes = 256 * 1024 * 1024;


/**
 * `openingTokens`: tokens the chat wrapper writes at the start of the model's turn (a forced `<think>\n`) beyond the
 * rendered history, learnt from the last generation of each kind (a new answer with thinking on or off, a
 * continuation), so a refusal counts the prompt as usage does.
 */
type Loaded = {model: LlamaModel, inspection: ModelInspection, chatWrapper: ChatWrapper, options: LoadOptions, openingTokens: Map<string, number>};
/** `controller`: the KV controller of the generation in progress, the gate every decode of the sequence waits for. */
type Active = {context: LlamaContext, session: LlamaChatSession, kv: NativeKv | null, config: ContextConfig, controller: KvController | null};

/**
 * Owns the llama.cpp runtime, the loaded model and its chat context, and runs one generation at a time with
 * the conversation's KV policy. The only module (with its helpers) that imports node-llama-cpp.
 */
export class Engine implements EngineApi {
    private _llama: Llama | null = null;
    private _build: BuildInfo | null = null;
    private _runtimeLoad: Promise<{llama: Llama, build: BuildInfo}> | null = null;
    private _runtimeOptions: RuntimeOptions;
    private _loaded: Loaded | null = null;
    private _active: Active | null = null;
    private _status: EngineStatus = {state: "idle", build: null, model: null, progress: null, message: null, placement: null};
    private _generating = false;
    private readonly _listeners = new Set<(status: EngineStatus) => void>();
    private readonly _stateListeners = new Set<(save: StateSave) => void>();
    /** Full KV's state after an answer, written off the answer's path (DeferredState). A listener's failure stays its own. */
    private readonly _deferred = new DeferredState((save) => this._stateListeners.forEach((listener) => {
        try {
            listener(save);
        } catch {
            // the write, and the request it ran before, go on
        }
    }));

    constructor(private readonly _options: EngineOptions) {
        this._runtimeOptions = _options.runtime ?? {};
    }

    get status(): EngineStatus {
        return this._status;
    }

    get inspection(): ModelInspection | null {
        return this._loaded?.inspection ?? null;
    }

    onStatus(listener: (status: EngineStatus) => void): () => void {
        this._listeners.add(listener);
        return () => this._listeners.delete(listener);
    }

    /** Loads the runtime (once, however many ask at the same time) and reports which llama.cpp build it is. */
    async runtime(): Promise<{llama: Llama, build: BuildInfo}> {
        if (this._llama != null && this._build != null)
            return {llama: this._llama, build: this._build};
        this._runtimeLoad ??= (async () => {
            try {
                const loaded = await this._options.loadLlama(this._runtimeOptions);
                const {llama} = loaded;
                // The rpc-servers are registered before any model loads: llama.cpp places layers on the devices it knows then.
                const rpc = await connectRpcServers(llama, this._runtimeOptions.rpcServers ?? []);
                const build: BuildInfo = {...loaded.build, rpc};
                this._llama = llama;
                this._build = build;
                const message = [loaded.warning, describeRpcProblems(rpc)].filter((part) => part != null).join(" ");
                this._setStatus({build, message: message !== "" ? message : null});
                return {llama, build};
            } catch (err) {
                this._setStatus({state: "error", message: (err as Error).message});
                throw err;
            } finally {
                this._runtimeLoad = null;
            }
        })();
        return this._runtimeLoad;
    }

    async start(): Promise<BuildInfo> {
        return (await this.runtime()).build;
    }

    async freeMemory(): Promise<number> {
        const {llama, build} = await this.runtime();
        return offloads(build) ? (await llama.getVramState()).free : os.freemem();
    }

    inspect(modelPath: string): Promise<ModelInspection> {
        return inspectModel(modelPath);
    }

    /**
     * Validates and loads a GGUF model, replacing the loaded one. A file that fails validation changes nothing; a
     * model that fails to load puts the previous one back. Loads and generations run one at a time, in order.
     */
    async loadModel(modelPath: string, modelInfo: EngineStatus["model"], options: LoadOptions = {}): Promise<ModelInspection> {
        if (this._generating)
            throw new AppError("BUSY", "Stop the current answer before loading another model");
        return withLock([this, "engine"], async () => {
            if (this._generating)
                throw new AppError("BUSY", "Stop the current answer before loading another model");
            const inspection = await inspectModel(modelPath);
            const {llama} = await this.runtime();
            const previous = this._loaded == null ? null : {inspection: this._loaded.inspection, info: this._status.model, options: this._loaded.options};
            await this._deferred.flush();
            await this._unload();
            this._setStatus({state: "loading", progress: 0, model: modelInfo, message: `Loading ${inspection.name}`});
            try {
                await this._load(llama, inspection, options);
            } catch (err) {
                const reason = `Could not load ${inspection.name}: ${(err as Error).message}`;
                const restored = previous != null && await this._load(llama, previous.inspection, previous.options).then(() => true, () => false);
                if (restored)
                    this._setStatus({state: "ready", progress: null, model: previous.info, message: `${reason}. ${previous.inspection.name} is loaded again.`});
                else
                    this._setStatus({state: "error", progress: null, model: null, message: reason});
                throw new AppError("MODEL_INVALID", reason, {cause: err});
            }
            this._setStatus({state: "ready", progress: null, model: modelInfo, message: null});
            return inspection;
        });
    }

    private async _load(llama: Llama, inspection: ModelInspection, options: LoadOptions): Promise<void> {
        let model: LlamaModel | null = null;
        try {
            model = await llama.loadModel({
                modelPath: inspection.path, gpuLayers: await this._gpuLayers(llama, inspection, options), onLoadProgress: (progress) => {
                // node-llama-cpp may report progress after the load resolved: a ready engine stays without progress.
                if (this._status.state === "loading")
                    this._setStatus({progress});
            }
            });
            // Resolving the chat wrapper renders the template several times: once per model, not per context.
            const chatWrapper = resolveChatWrapper(model);
            this._loaded = {model, inspection, chatWrapper, options, openingTokens: new Map()};
        } catch (err) {
            await model?.dispose();
            throw err;
        }
    }

    /**
     * The GPU layers setting as node-llama-cpp takes it. On a CPU build with rpc-servers, the remote devices are where
     * layers go, but node-llama-cpp's `"auto"` fit offloads nothing without a local GPU: `"auto"` is then the most layers
     * whose weights fit the servers' free memory (the context's own fit is checked when it is created).
     */
    private async _gpuLayers(llama: Llama, inspection: ModelInspection, options: LoadOptions): Promise<LoadOptions["gpuLayers"]> {
        const gpuLayers = options.gpuLayers ?? "auto";
        if (gpuLayers !== "auto" || this._build == null || this._build.gpu !== false || !hasRpcDevices(this._build.rpc))
            return gpuLayers;
        const free = (await llama.getVramState()).free;
        return gpuOffload(inspection, {gpuLayers: "auto", kvBytes: 0, computeBytes: 0, modelLoaded: false, freeVramBytes: free, freeRamBytes: os.freemem()}).gpuLayers;
    }

    /**
     * Where the loaded model's layers are, by device name ("CPU", "RPC0", …), once a context exists; `null` before, or on a
     * build without patch 0010.
     */
    layerDevices(): {layers: string[], output: string} | null {
        const active = this._active;
        if (active == null)
            return null;
        return ponderContextOf(active.context)?.ponderLayerDevices?.() ?? null;
    }

    /**
     * Streams an answer to the last user turn of `history`; the thinking and the answer arrive as separate
     * segments, and the KV policy prunes while the model thinks.
     */
    async generate(request: GenerateRequest): Promise<GenerationResult> {
        if (this._generating)
            throw new AppError("BUSY", "An answer is already being generated");
        // Held from here, so a load asked for meanwhile is refused; a load already running finishes first.
        this._generating = true;
        try {
            return await withLock([this, "engine"], request.signal, () => this._generate(request));
        } catch (err) {
            if (request.signal.aborted && !(err instanceof AppError))
                return {stopReason: "abort", promptTokens: 0};
            throw err;
        } finally {
            this._generating = false;
        }
    }

    /**
     * Counts the prompt an answer to `request.history` (ending with a new user message) would read, rendered and tokenized
     * as `generate` renders it, with the opening as last measured: the figure Full KV's refusal names. The message's
     * share is its rendered turn: what its text adds to the same prompt with an empty message, and the empty turn's own
     * tokens (its markers and the assistant's opening); at least the text's own tokens. Not the prompt less the earlier
     * turns rendered alone: a template may render those otherwise once a message follows (an earlier thought dropped).
     * `null` when no model is loaded.
     */
    async countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null> {
        const loaded = this._loaded;
        if (loaded == null)
            return null;
        const last = request.history.at(-1);
        if (last == null || last.role !== "user")
            throw new AppError("BAD_REQUEST", "A count needs a conversation that ends with a user message");
        const thinking = request.thinking !== false;
        const rendered = (systemPrompt: string, turns: ChatTurn[]) =>
            tokenizeChat(loaded, answerPrompt(loaded.chatWrapper, systemPrompt, turns, thinking).full).length;
        const {openingKind} = answerPrompt(loaded.chatWrapper, request.systemPrompt, request.history, thinking);
        const withText = rendered(request.systemPrompt, request.history);
        const withoutText = rendered(request.systemPrompt, [...request.history.slice(0, -1), {role: "user", text: ""}]);
        const emptyTurn = rendered("", [{role: "user", text: ""}]) - tokenizeChat(loaded, []).length;
        const ownTokens = loaded.model.tokenize(last.text, false).length;
        return {
            promptTokens: withText + (loaded.openingTokens.get(openingKind) ?? 0),
            messageTokens: Math.max(ownTokens, withText - withoutText + emptyTurn)
        };
    }

    private async _generate(request: GenerateRequest): Promise<GenerationResult> {
        const loaded = this._loaded;
        if (loaded == null)
            throw new AppError("MODEL_NOT_LOADED", "No model is loaded: open a model first");

        const last = request.history.at(-1);
        const continuing = request.continueLast === true;
        if (last == null || last.role !== (continuing ? "assistant" : "user"))
            throw new AppError("BAD_REQUEST", continuing ? "Only an answer can be continued" : "The conversation must end with a user message");

        const {compression, cells} = request.kv;
        if (compression.policy !== "full") {
            if (this._build?.patched !== true)
                throw new AppError("ENGINE_UNPATCHED", "Compression needs Ponder's patched llama.cpp build, which is not loaded: run npm run build:native, or use Full KV");
            const support = compressionSupport(loaded.inspection.architecture);
            if (!support.supported)
                throw new AppError("BAD_REQUEST", support.note!);
        }
        // TRIM-KV runs on the model's own retention gates: without valid ones it is refused with the reason, never replaced.
        const retentionGates = policyNeeds(compression).retention === true ? (await requireRetentionGates(loaded.inspection)).path : null;

        this._setStatus({state: "generating"});
        let controller: KvController | null = null;
        const internalAbort = new AbortController();
        const forwardAbort = () => internalAbort.abort();
        request.signal.addEventListener("abort", forwardAbort);
        let stoppedBy: "budget" | null = null;
        try {
            const previousContext = this._active;
            const active = await this._ensureContext(contextConfig(cells, compression), compression.policy !== "full");
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
            if ((controller == null || compression.policy === "full") && promptLength > cells - fullKvAnswerRoom)
                throw kvBudgetExceeded(promptLength, cells);
            const outputBefore = session.sequence.tokenMeter.usedOutputTokens;
            // The new message is read in chunks a stop can come between; with a pruning policy each is pruned as it goes,
            // so a question longer than the budget still fits. The last tokens (the assistant's opening) are left to
            // node-llama-cpp.
            const states = request.states == null ? undefined : {
                files: request.states, expectation: stateExpectation(loaded.inspection, active.config, compression),
                outcome: {restored: null, note: null, saved: null} satisfies StateOutcome as StateOutcome
            };
            // For the progress's wording (readReason): the earlier turns' tokens, and whether the context was made anew.
            const reading = {newContext: previousContext != null && previousContext !== active, earlierTokens: request.onRebuild == null || request.history.length < 2
                ? 0 : tokenizeChat(loaded, history).length};
            await this._prefill(active, renderedTokens, controller, cells, request.onRebuild, promptTail, internalAbort.signal, states, reading);
            session.setChatHistory(history);
            controller?.beginAnswer();
            const started = performance.now();
            let generated = 0;
            let sinceSample = 0;
            const sampleEvery = request.sampleEvery ?? Math.max(4, Math.min(32, compression.pruneEvery));
            const kvController = controller;
            const sample = () => {
                if (kvController == null || request.onSample == null)
                    return;
                const seconds = (performance.now() - started) / 1000;
                void kvController.sample(seconds > 0 ? generated / seconds : 0).then(request.onSample, () => {});
            };

            const options = {
                signal: internalAbort.signal,
                stopOnAbortSignal: true,
                maxTokens: request.maxTokens,
                temperature: request.temperature,
                topP: request.topP,
                topK: request.topK,
                minP: request.minP,
                repeatPenalty: request.repeatPenalty != null && request.repeatPenalty > 1 ? {penalty: request.repeatPenalty, lastTokens: 64} : false as const,
                seed: request.seed,
                customStopTriggers: request.stop != null && request.stop.length > 0 ? request.stop : undefined,
                budgets: {thoughtTokens: request.thinking?.budget ?? Infinity},
                onResponseChunk: (chunk: LlamaChatResponseChunk) => {
                    const segment = chunk.type === "segment" && chunk.segmentType === "thought" ? "thought" : "answer";
                    if (chunk.text === "" && chunk.tokens.length === 0)
                        return;
                    request.onChunk({segment, text: chunk.text, tokens: chunk.tokens.length});
                    generated += chunk.tokens.length;
                    sinceSample += chunk.tokens.length;
                    kvController?.onTokens(chunk.tokens.length);
                    if (sinceSample >= sampleEvery) {
                        sinceSample = 0;
                        sample();
                    }
                    // Full KV never frees a cell: stop at the budget instead of letting node-llama-cpp shift the context.
                    if (compression.policy === "full" && session.sequence.nextTokenIndex >= cells - 2 && stoppedBy == null) {
                        stoppedBy = "budget";
                        internalAbort.abort();
                    }
                }
            };
            const result = last.role === "user" && !skipThought
                ? await session.promptWithMeta(last.text, options)
                : await continueResponse(session, loaded.chatWrapper, full, options);

            const seconds = (performance.now() - started) / 1000;
            const finalSample = controller != null ? await controller.sample(seconds > 0 ? generated / seconds : 0) : null;
            if (finalSample != null)
                request.onSample?.(finalSample);
            const promptTokens = session.sequence.tokenMeter.usedInputTokens - inputBefore;
            // Tokens the model wrote (segment markers included), and before them the whole prompt: the sequence keeps
            // every token it has seen, evicted ones too.
            const outputTokens = session.sequence.tokenMeter.usedOutputTokens - outputBefore;
            const prompt = session.sequence.nextTokenIndex - outputTokens;
            loaded.openingTokens.set(openingKind, Math.max(0, prompt - rendered));
            // Full KV keeps every cell: the whole sequence is the state the next turn's prompt starts with, written later.
            if (states?.files.save != null && compression.policy === "full")
                states.outcome.pending = this._deferSave(active, states.files.save, states.expectation, renderedTokens, full);
            return {
                stopReason: stoppedBy === "budget" ? "budget" : result.stopReason, promptTokens, promptLength: prompt, outputTokens, states: states?.outcome
            };
        } catch (err) {
            // A stop pressed before the first token surfaces as an AbortError: it is still a stop.
            if (request.signal.aborted)
                return {stopReason: "abort", promptTokens: 0};
            if (err instanceof AppError)
                throw err;
            if (controller?.error != null)
                throw new AppError("INTERNAL", `Pruning failed, so the answer stopped: ${controller.error.message}`, {cause: err});
            const message = (err as Error).message;
            if (/slot|kv cache|failed to decode|NoKvSlot/i.test(message))
                throw new AppError("BAD_REQUEST", `The conversation does not fit in the KV budget of ${cells} cells: raise the budget or start a new conversation (${message})`, {cause: err});
            throw new AppError("INTERNAL", `Generation failed: ${message}`, {cause: err});
        } finally {
            request.signal.removeEventListener("abort", forwardAbort);
            if (this._active != null && this._active.controller === controller)
                this._active.controller = null;
            this._setStatus({state: "ready"});
        }
    }

    /**
     * Loads another build in this process: the model is unloaded, the runtime disposed and loaded with `options`, and the
     * model loaded again. (The app runs the engine in a process of its own, which `EngineProxy` restarts instead.)
     */
    async restart(options: RuntimeOptions): Promise<BuildInfo> {
        if (this._options.ownsRuntime === false)
            throw new AppError("BAD_REQUEST", "This engine shares its runtime: it cannot load another build");
        if (this._generating)
            throw new AppError("BUSY", "Stop the current answer before changing the engine build");
        return withLock([this, "engine"], async () => {
            if (this._generating)
                throw new AppError("BUSY", "Stop the current answer before changing the engine build");
            const previous = this._loaded == null ? null : {inspection: this._loaded.inspection, info: this._status.model, options: this._loaded.options};
            await this._deferred.flush();
            await this._unload();
            await this._disposeRuntime();
            this._runtimeOptions = options;
            this._setStatus({state: "loading", build: null, progress: null, model: previous?.info ?? null, message: null});
            const {llama, build} = await this.runtime();
            if (previous == null) {
                this._setStatus({state: "idle", model: null});
                return build;
            }
            try {
                await this._load(llama, previous.inspection, previous.options);
            } catch (err) {
                this._setStatus({state: "error", progress: null, model: null, message: `Could not load ${previous.inspection.name} again: ${(err as Error).message}`});
                throw new AppError("MODEL_INVALID", `Could not load ${previous.inspection.name} again`, {cause: err});
            }
            this._setStatus({state: "ready", progress: null, model: previous.info});
            return build;
        });
    }

    /**
     * Writes the state an answer left in the context (`StateOutcome.pending`; with `path`, only that one), after any
     * generation running; `null` when none waits (written already, or superseded by a later answer of its conversation).
     */
    async saveState(path?: string): Promise<StateSave | null> {
        return withLock([this, "engine"], () => this._deferred.flush(path));
    }

    /** What becomes of each state that waited in the context: written, not written, or superseded (`StateSave`). */
    onStateSettled(listener: (save: StateSave) => void): () => void {
        this._stateListeners.add(listener);
        return () => this._stateListeners.delete(listener);
    }

    /** Disposes the model and the runtime; a state waiting to be written is dropped (`saveState` first to keep it). */
    async dispose(): Promise<void> {
        await withLock([this, "engine"], () => {
            this._deferred.drop();
            return this._unload();
        });
        await this._disposeRuntime();
    }

    private async _disposeRuntime(): Promise<void> {
        await this._runtimeLoad?.catch(() => {});
        if (this._options.ownsRuntime !== false && this._llama != null) {
            // node-llama-cpp 3.22.1 keeps a dispose guard for a model whose load failed until that model is garbage
            // collected, so the runtime's dispose can wait without end after a failed load: bound the wait.
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([this._llama.dispose(), new Promise((resolve) => timer = setTimeout(resolve, runtimeDisposeMs))]);
            clearTimeout(timer);
        }
        this._llama = null;
        this._build = null;
    }

    /**
     * Evaluates the stored conversation into the context in chunks of `prefillChunk` tokens, with progress, when much of
     * it is not there yet (a new context after a budget change, another conversation): with a pruning policy the
     * controller prunes before any chunk that would not fit, so a history longer than the budget still fits.
     * node-llama-cpp then finds the prefix in place and evaluates only the rest.
     *
     * Under a pruning policy the prompt is always read afresh: cells an earlier answer pruned (or scored, with the
     * attention of tokens this request does not have) are never reused as a cached prefix, so the answer depends on its
     * inputs alone. Full KV reuses the prefix that still has every cell.
     */
    private async _prefill(active: Active, rendered: readonly Token[], controller: KvController | null, cells: number,
        onProgress: ((progress: number, reason: ReadReason) => void) | undefined, holdBack = 0, signal?: AbortSignal, states?: PrefillStates,
        reading: Pick<PromptReading, "earlierTokens" | "newContext"> = {earlierTokens: 0, newContext: false}): Promise<void> {
        if (rendered.length === 0)
            return;
        const sequence = active.session.sequence;
        const tokens = rendered.slice(0, Math.max(0, rendered.length - holdBack));
        const pruning = controller != null && controller.policyId !== "full";
        let common = 0;
        if (!pruning) {
            common = commonPrefixLength(sequence.contextTokens, tokens);
            if (common > 0 && active.kv != null) {
                // Full KV after a pruned answer in the same context: keep only the prefix that has every cell.
                const live = new Set((await active.kv.scores(0)).positions);
                let whole = 0;
                while (whole < common && live.has(whole))
                    whole++;
                common = whole;
            }
        }
        // A state waiting to be written goes to disk first, unless this prompt continues its conversation (DeferredState).
        await this._deferred.beforeChange(active, commonPrefixLength(sequence.contextTokens, rendered));
        if (states != null && common < tokens.length)
            common = await this._resume(active, controller, tokens, common, pruning, states);
        if (common === tokens.length && common === sequence.nextTokenIndex)
            return;

        if (common < sequence.nextTokenIndex)
            await sequence.eraseContextTokenRanges([{start: common, end: sequence.nextTokenIndex}]);
        const missing = tokens.length - common;
        if (!pruning && tokens.length > cells - fullKvAnswerRoom)
            throw kvBudgetExceeded(tokens.length, cells);
        const reason = readReason({...reading, reused: common, missing});
        const report = reason != null && onProgress != null ? (progress: number) => onProgress(progress, reason) : undefined;
        let done = 0;
        report?.(0);
        // A pruning policy's state is kept at the prompt's last whole chunk: the next turn's prompt passes through it.
        const checkpoint = pruning && states?.files.save != null ? Math.floor(tokens.length / prefillChunk) * prefillChunk : -1;
        while (done < missing) {
            signal?.throwIfAborted();
            // Chunks end at multiples of `prefillChunk`, wherever the reading starts, so a prompt read on from a state
            // is read in the same batches (and pruned at the same tokens) as one read from the start.
            const start = common + done;
            const chunk = tokens.slice(start, Math.min(tokens.length, (Math.floor(start / prefillChunk) + 1) * prefillChunk));
            await sequence.evaluateWithoutGeneratingNewTokens(chunk);
            done += chunk.length;
            report?.(done / missing);
            if (common + done === checkpoint && checkpoint > common && states != null)
                states.outcome.saved = await this._saveState(active, states.files.save!, "prompt", states.expectation, controller, states.outcome);
        }
    }

    /**
     * Loads the best matching state of `states` into the context when it spares reading more of `tokens` than the `common`
     * tokens already there: Full KV, the state of an earlier answer sharing the longest prefix; a pruning policy, a prompt
     * state whose tokens `tokens` starts with, its scores and the controller's state with it. Returns the tokens now in
     * place. A state refused or failing to load is a note, and the history is read again.
     */
    private async _resume(active: Active, controller: KvController | null, tokens: number[], common: number, pruning: boolean,
        states: PrefillStates): Promise<number> {
        const notes: string[] = [];
        const prefix = (saved: readonly number[]) => commonPrefixLength(saved, tokens);
        // The state that spares the most reading: Full KV's with the longest common prefix, a pruning policy's longest prompt.
        const reach = (saved: number[]) => pruning
            ? (prefix(saved) === saved.length && saved.length <= tokens.length ? saved.length : 0)
            : (prefix(saved) > common ? prefix(saved) : 0);
        const candidate = await findStateCandidate(states.files.load, pruning ? "prompt" : "answer", states.expectation, reach, notes, tokens.length);
        let restored = common;
        if (candidate != null) {
            const sequence = active.session.sequence;
            const kv = active.kv;
            try {
                await restoreSequenceState(sequence, candidate, {
                    scores: kv != null
                        ? async (positions, heads, layers) => {
                            await kv.restoreScores(0, positions, heads, layers.map(([accumulated, last]) => [accumulated!, last!]));
                        }
                        : null,
                    retention: kv?.retentionGates != null
                        ? async (positions, heads, layers) => {
                            await kv.restoreRetention(0, positions, heads, layers.map(([logits]) => logits!));
                        }
                        : null,
                    valueNorms: kv?.valueNormsOn === true
                        ? async (positions, heads, layers) => {
                            await kv.restoreValueNorms(0, positions, heads, layers.map(([norms]) => norms!));
                        }
                        : null
                });
                if (pruning && candidate.header.controller != null)
                    controller?.restore(reviveTyped(candidate.header.controller) as ReturnType<KvController["snapshot"]>);
                restored = prefix(candidate.tokens);
                states.outcome.restored = {path: candidate.path, tokens: candidate.tokens.length};
            } catch (err) {
                notes.push(`the saved state could not be loaded: ${(err as Error).message}`);
                // llama.cpp clears the sequence on a failed load: the history is read from the start.
                if (sequence.nextTokenIndex > 0)
                    await sequence.eraseContextTokenRanges([{start: 0, end: sequence.nextTokenIndex}]);
                restored = 0;
            }
        }
        if (states.outcome.restored == null && notes.length > 0) {
            states.outcome.note = `Reading the conversation again: ${notes[0]}`;
            this._setStatus({message: states.outcome.note});
        }
        return restored;
    }

    /**
     * Saves the sequence's state (with the scores, the retention gates' logits and the value norms the controller reads), or says in
     * `outcome.note` why it did not: a state larger than `maxStateBytes` (the write would hold the answer up), or a failed
     * write (a full disk): the answer is never lost for a state.
     */
    private async _saveState(active: Active, path: string, kind: "answer" | "prompt", expectation: StateExpectation,
        controller: KvController | null, outcome: StateOutcome): Promise<StateOutcome["saved"]> {
        const withScores = (controller?.scoringRows ?? 0) > 0;
        const stats = active.kv != null ? await active.kv.stats() : null;
        const liveBytes = stats != null ? stats.cellsUsed * stats.bytesPerCell : 0;
        if (liveBytes > maxStateBytes) {
            outcome.note ??= `The KV state (${formatMib(liveBytes)}) is larger than ${formatMib(maxStateBytes)}: not saved, the next turn reads the history again.`;
            return null;
        }
        try {
            return await saveSequenceState({
                sequence: active.session.sequence, kv: active.kv, path, kind, expectation, withScores,
                withRetention: controller?.readsRetention === true, withValueNorms: controller?.readsValueNorms === true,
                controller: controller == null ? null : tagTyped(controller.snapshot())
            });
        } catch (err) {
            outcome.note ??= `The KV state could not be saved (${(err as Error).message}): the next turn reads the history again.`;
            return null;
        }
    }

    /**
     * Keeps the sequence's state (Full KV's, after an answer) to write later (DeferredState): when asked (`saveState`), or
     * before a request that does not continue its conversation changes the context. Returns its file.
     */
    private _deferSave(active: Active, path: string, expectation: StateExpectation, rendered: Token[], chat: ChatHistoryItem[]): string {
        const loaded = this._loaded!;
        const tokens = active.session.sequence.nextTokenIndex;
        let continuedAt: number | null = null;
        this._deferred.defer({
            path,
            owner: active,
            continuedAt: () => continuedAt ??= continuedPrefix(loaded, rendered, chat),
            write: async () => {
                if (this._active !== active || active.session.sequence.nextTokenIndex !== tokens)
                    return {saved: null, note: "The context changed before its KV state was saved: the next turn reads the history again."};
                const outcome: StateOutcome = {restored: null, note: null, saved: null};
                const saved = await this._saveState(active, path, "answer", expectation, null, outcome);
                return {saved, note: outcome.note};
            }
        });
        return path;
    }

    /** The chat context for `config`, recreated when the budget, a KV cache type or flash attention changed. */
    private async _ensureContext(config: ContextConfig, pruning: boolean): Promise<Active> {
        const loaded = this._loaded!;
        const current = this._active;
        if (current != null && sameConfig(current.config, config)) {
            current.kv?.setPositionLimit(pruning ? prunedPositionLimit : current.kv.originalContextSize);
            return current;
        }
        const cacheProblem = cacheTypeProblem(loaded.inspection, config);
        if (cacheProblem != null)
            throw new AppError("BAD_REQUEST", cacheProblem);
        await this._deferred.flush();
        await this._disposeContext();
        await this._assertContextFits(loaded, config);

        let context: LlamaContext;
        try {
            context = await loaded.model.createContext({
                contextSize: config.cells,
                sequences: 1,
                flashAttention: config.flashAttention,
                threads: this._options.threads ?? 0,
                experimentalKvCacheKeyType: ggmlTypeName[config.kvType],
                experimentalKvCacheValueType: ggmlTypeName[config.kvTypeV]
            });
        } catch (err) {
            throw new AppError("BAD_REQUEST", `Could not allocate a KV cache of ${config.cells} cells (${describeKvTypes(config)}): ${(err as Error).message}`, {cause: err});
        }
        const kv = this._build?.patched === true ? new NativeKv(context) : null;
        if (pruning)
            kv?.setPositionLimit(prunedPositionLimit);
        const session = new LlamaChatSession({contextSequence: context.getSequence(), chatWrapper: loaded.chatWrapper, autoDisposeSequence: true});
        const active: Active = {context, session, kv, config, controller: null};
        // Every decode of the sequence waits for the generation's controller: its prune rounds never overlap a decode.
        if (kv != null)
            gateSequenceDecodes(session.sequence, (count, first) => active.controller?.beforeDecode(count, first) ?? count);
        this._active = active;
        this._setStatus({placement: this._placement(active)});
        return active;
    }

    /** Where the model's layers run, read from the context (patch 0010), with the rpc-server of each remote device. */
    private _placement(active: Active): LayerPlacement | null {
        const devices = ponderContextOf(active.context)?.ponderLayerDevices?.();
        if (devices == null)
            return null;
        const remote = new Map((this._build?.rpc?.servers ?? []).flatMap((server) => server.devices.map((device) => [device.name, server.endpoint] as const)));
        const names = [...new Set([...devices.layers, devices.output])];
        return {...devices, devices: names.map((name) => ({name, where: remote.get(name) ?? null}))};
    }

    /**
     * Refuses, before llama.cpp is asked, a context the model cannot use (more cells than its context, `budgetCap`) or one
     * the fit estimate says does not fit in free memory: the KV cache and the compute buffer llama.cpp reserves with it (a
     * scoring policy's scores come when it turns scoring on). Free memory is read once the previous context is gone.
     */
    private async _assertContextFits(loaded: Loaded, config: ContextConfig): Promise<void> {
        assertBudgetWithinCap(loaded.inspection, {...config, budget: {kind: "cells", cells: config.cells}});
        const free = await (this._options.freeMemory?.() ?? this.freeMemory());
        const onGpu = this._build != null && offloads(this._build);
        const gpu = onGpu ? {gpuLayers: loaded.model.gpuLayers, freeRamBytes: os.freemem()} : undefined;
        const fit = contextFit(loaded.inspection, config, free, {modelLoaded: true, gpu});
        if (fit == null || fit.fits)
            return;
        const room = fit.offload == null
            ? `${formatMib(fit.neededBytes)}, and ${formatMib(free)} is free`
            : `${formatMib(fit.offload.vramBytes)} of VRAM (${formatMib(fit.offload.freeVramBytes)} free) and ` +
                `${formatMib(fit.offload.ramBytes)} of RAM (${formatMib(fit.offload.freeRamBytes)} free)`;
        const cells = config.cells.toLocaleString("en-US");
        throw new AppError("BUDGET_DOES_NOT_FIT", `A KV cache of ${cells} cells (${describeKvTypes(config)}) with llama.cpp's compute buffer ` +
            `needs ${room}: choose a smaller budget or a quantized KV cache.`);
    }

    private async _disposeContext(): Promise<void> {
        const active = this._active;
        this._active = null;
        if (active == null)
            return;
        await active.kv?.dispose();
        active.session.dispose({disposeSequence: true});
        await active.context.dispose();
    }

    private async _unload(): Promise<void> {
        await this._disposeContext();
        const loaded = this._loaded;
        this._loaded = null;
        if (loaded != null) {
            await loaded.model.dispose();
            this._setStatus({state: "idle", model: null, placement: null});
        }
    }

    private _setStatus(patch: Partial<EngineStatus>): void {
        this._status = {...this._status, ...patch};
        for (const listener of this._listeners)
            listener(this._status);
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
            throw new AppError("POLICY_UNAVAILABLE", `The engine refused this model's retention gates (${retentionGates}): ${(err as Error).message}`, {cause: err});
        throw err;
    }
}

/**
 * Generates the rest of the unfinished answer that ends `history`, in the session's sequence: node-llama-cpp continues
 * a chat history whose last item is a model response (an unended thought segment goes on as thought).
 */
async function continueResponse(session: LlamaChatSession, chatWrapper: ChatWrapper, history: ChatHistoryItem[],
    options: LLamaChatGenerateResponseOptions<undefined>): Promise<{stopReason: GenerationResult["stopReason"]}> {
    const chat = new LlamaChat({contextSequence: session.sequence, chatWrapper, autoDisposeSequence: false});
    try {
        const {metadata} = await chat.generateResponse(history, options);
        return {stopReason: metadata.stopReason};
    } finally {
        chat.dispose({disposeSequence: false});
    }
}

/**
 * The chat an answer is generated in: the earlier turns (`history`), and with the last turn (`full`) a new user message
 * and an empty answer, or the unfinished answer. Thinking off: the answer opens with an empty, closed thought, where the
 * template has thought segments. `openingKind` keys the opening the wrapper adds beyond the rendering (`openingTokens`).
 */
function answerPrompt(chatWrapper: ChatWrapper, systemPrompt: string, turns: ChatTurn[], thinking: boolean) {
    const last = turns.at(-1)!;
    const history = toChatHistory(systemPrompt, turns.slice(0, -1));
    const skipThought = last.role === "user" && !thinking && chatWrapper.settings.segments?.thought != null;
    const opening: ChatModelResponse["response"] = skipThought ? [{type: "segment", segmentType: "thought", text: "", ended: true}] : [];
    const full: ChatHistoryItem[] = last.role === "user"
        ? [...history, {type: "user", text: last.text}, {type: "model", response: opening}]
        : [...history, {type: "model", response: partialResponse(last)}];
    return {history, full, skipThought, openingKind: `${last.role}:${skipThought ? "no-thought" : "thought"}`};
}

/** A chat rendered by the model's chat wrapper, in tokens. */
function tokenizeChat(loaded: Loaded, chat: ChatHistoryItem[]): Token[] {
    return loaded.chatWrapper.generateContextState({chatHistory: chat}).contextText.tokenize(loaded.model.tokenizer);
}

/** An unfinished answer as a model response: its thought is still open when no answer text followed it. */
function partialResponse(turn: Extract<ChatTurn, {role: "assistant"}>): ChatModelResponse["response"] {
    const response: ChatModelResponse["response"] = [];
    if (turn.thinking !== "")
        response.push({type: "segment", segmentType: "thought", text: turn.thinking, ended: turn.text !== ""});
    if (turn.text !== "")
        response.push(turn.text);
    return response;
}

/**
 * The tokens of a prompt that a later request of the same conversation keeps: its rendering up to where it reads otherwise
 * once the answer is history (the assistant's opening, a thought a template drops), found by rendering the chat with the
 * answer's turn closed by an empty user message.
 */
function continuedPrefix(loaded: Loaded, rendered: readonly Token[], chat: ChatHistoryItem[]): number {
    try {
        return commonPrefixLength(rendered, tokenizeChat(loaded, [...chat, {type: "user", text: ""}]));
    } catch {
        return Math.max(0, rendered.length - promptTail);
    }
}

/** How many leading tokens `a` and `b` share. */
function commonPrefixLength(a: readonly number[], b: readonly number[]): number {
    let n = 0;
    while (n < a.length && n < b.length && a[n] === b[n])
        n++;
    return n;
}

/**
 * Tokens of a stored conversation evaluated at once: a stop waits for one chunk at most. A count, not a time, so the same
 * prompt is always read in the same batches (and, with a pruning policy, pruned at the same tokens).
 */
const prefillChunk = 128;

/** How long `dispose()` waits for the runtime to let go. */
const runtimeDisposeMs = 3000;

/** Tokens at the end of a prompt left for node-llama-cpp to evaluate itself (the assistant's opening, where its rendering may differ). */
const promptTail = 16;

type PrefillStates = {files: StateFiles, expectation: StateExpectation, outcome: StateOutcome};

/** What a state file must have been made with to stand for this context and these settings. */
function stateExpectation(inspection: ModelInspection, config: ContextConfig, compression: CompressionSettings): StateExpectation {
    const stat = fs.statSync(inspection.path);
    return {
        model: {path: inspection.path, size: stat.size, mtimeMs: stat.mtimeMs}, kvType: config.kvType, kvTypeV: config.kvTypeV,
        flashAttention: config.flashAttention, policy: compression.policy, cells: config.cells, settingsHash: hashSettings(compression)
    };
}

/** The context a generation asks for: its budget's cells, the K and V cache types and flash attention. */
function contextConfig(cells: number, compression: CompressionSettings): ContextConfig {
    return {cells, kvType: compression.kvType, kvTypeV: compression.kvTypeV, flashAttention: compression.flashAttention};
}

/** node-llama-cpp's names of the cache types. */
const ggmlTypeName = {f16: "F16", q8_0: "Q8_0", q4_0: "Q4_0"} as const;

function sameConfig(a: ContextConfig, b: ContextConfig): boolean {
    return a.cells === b.cells && a.kvType === b.kvType && a.kvTypeV === b.kvTypeV && a.flashAttention === b.flashAttention;
}

/** The stored conversation as node-llama-cpp chat history; past thinking goes back as a closed thought segment. */
export function toChatHistory(systemPrompt: string, turns: ChatTurn[]): ChatHistoryItem[] {
    const history: ChatHistoryItem[] = [];
    if (systemPrompt.trim() !== "")
        history.push({type: "system", text: systemPrompt});

    for (const turn of turns) {
        if (turn.role === "user") {
            history.push({type: "user", text: turn.text});
            continue;
        }
        const response: ChatModelResponse["response"] = [];
        if (turn.thinking !== "")
            response.push({type: "segment", segmentType: "thought", text: turn.thinking, ended: true});
        if (turn.text !== "")
            response.push(turn.text);
        history.push({type: "model", response});
    }
    return history;
}

/** Whether offloaded layers (and their KV) leave RAM on this build: a GPU build, or rpc-servers' devices. */
function offloads(build: BuildInfo): boolean {
    return build.gpu !== false || hasRpcDevices(build.rpc);
}
