import {
    LlamaChat, LlamaChatSession, resolveChatWrapper, type ChatHistoryItem, type ChatModelResponse, type ChatWrapper, type Llama,
    type LlamaChatResponseChunk, type LLamaChatGenerateResponseOptions, type LlamaContext, type LlamaModel
} from "node-llama-cpp";
import os from "node:os";
import {withLock} from "lifecycle-utils";
import type {BuildInfo, CompressionSettings, EngineStatus} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {compressionSupport} from "./compressionSupport.js";
import type {EngineApi, LoadOptions, RuntimeOptions} from "./EngineApi.js";
import {inspectModel} from "./inspectModel.js";
import {KvController} from "./KvController.js";
import {cacheTypeProblem} from "./kvMemory.js";
import {NativeKv} from "./native/NativeKv.js";
import type {ChatTurn, GenerateRequest, GenerationResult, ModelInspection} from "./types.js";

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
    ownsRuntime?: boolean
};

/** What a context is created with; a change rebuilds it. */
export type ContextConfig = {cells: number, kvType: CompressionSettings["kvType"], flashAttention: boolean};

/** Positions node-llama-cpp may reach while pruning keeps the live cells within the budget. */
const prunedPositionLimit = 1 << 22;


type Loaded = {model: LlamaModel, inspection: ModelInspection, chatWrapper: ChatWrapper, options: LoadOptions};
type Active = {context: LlamaContext, session: LlamaChatSession, kv: NativeKv | null, config: ContextConfig};

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
    private _status: EngineStatus = {state: "idle", build: null, model: null, progress: null, message: null};
    private _generating = false;
    private readonly _listeners = new Set<(status: EngineStatus) => void>();

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
                const {llama, build, warning} = await this._options.loadLlama(this._runtimeOptions);
                this._llama = llama;
                this._build = build;
                this._setStatus({build, message: warning ?? null});
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
        return build.gpu !== false ? (await llama.getVramState()).free : os.freemem();
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
                modelPath: inspection.path, gpuLayers: options.gpuLayers ?? "auto", onLoadProgress: (progress) => {
                // node-llama-cpp may report progress after the load resolved: a ready engine stays without progress.
                if (this._status.state === "loading")
                    this._setStatus({progress});
            }
            });
            // Resolving the chat wrapper renders the template several times: once per model, not per context.
            const chatWrapper = resolveChatWrapper(model);
            this._loaded = {model, inspection, chatWrapper, options};
        } catch (err) {
            await model?.dispose();
            throw err;
        }
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

        this._setStatus({state: "generating"});
        let controller: KvController | null = null;
        const internalAbort = new AbortController();
        const forwardAbort = () => internalAbort.abort();
        request.signal.addEventListener("abort", forwardAbort);
        let stoppedBy: "budget" | "prune-error" | null = null;
        try {
            const active = await this._ensureContext({cells, kvType: compression.kvType, flashAttention: compression.flashAttention}, compression.policy !== "full");
            const {session} = active;
            if (active.kv != null) {
                const sequence = session.sequence;
                controller = new KvController({
                    kv: active.kv,
                    sequenceId: 0, // the context has one sequence
                    compression,
                    cells,
                    tokensSeen: () => sequence.nextTokenIndex,
                    now: () => performance.now()
                });
                await controller.start();
            }

            const history = toChatHistory(request.systemPrompt, request.history.slice(0, -1));
            // The context the answer is generated in: a new user message and an empty answer, or the unfinished answer.
            // Thinking off: the answer opens with an empty, closed thought, where the template has thought segments.
            const skipThought = last.role === "user" && request.thinking?.enabled === false && loaded.chatWrapper.settings.segments?.thought != null;
            const full: ChatHistoryItem[] = last.role === "user"
                ? [...history, {type: "user", text: last.text}, {type: "model", response: skipThought ? [{type: "segment", segmentType: "thought", text: "", ended: true}] : []}]
                : [...history, {type: "model", response: partialResponse(last)}];
            // Tokens evaluated for this answer: the new message (and a history rebuilt into a new context).
            const inputBefore = session.sequence.tokenMeter.usedInputTokens;
            if (controller == null || compression.policy === "full") {
                const needed = loaded.chatWrapper.generateContextState({chatHistory: full}).contextText.tokenize(loaded.model.tokenizer).length;
                if (needed > cells - 16)
                    throw new AppError("BAD_REQUEST", fullKvTooLong(needed, cells));
            }
            // The new message is read in chunks a stop can come between; with a pruning policy each is pruned as it goes,
            // so a question longer than the budget still fits. The last tokens (the assistant's opening) are left to
            // node-llama-cpp.
            await this._prefill(active, full, controller, cells, request.onRebuild, promptTail, internalAbort.signal);
            session.setChatHistory(history);
            const started = performance.now();
            let generated = 0;
            let sinceSample = 0;
            const sampleEvery = Math.max(4, Math.min(32, compression.pruneEvery));
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
                    if (kvController != null) {
                        kvController.onTokens(chunk.tokens.length);
                        if (kvController.error != null && stoppedBy == null) {
                            stoppedBy = "prune-error";
                            internalAbort.abort();
                        }
                    }
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

            await controller?.idle();
            const seconds = (performance.now() - started) / 1000;
            const finalSample = controller != null ? await controller.sample(seconds > 0 ? generated / seconds : 0) : null;
            if (finalSample != null)
                request.onSample?.(finalSample);
            const promptTokens = session.sequence.tokenMeter.usedInputTokens - inputBefore;
            if (stoppedBy === "prune-error")
                throw new AppError("INTERNAL", `Pruning failed, so the answer stopped: ${controller?.error?.message}`);
            if (stoppedBy === "budget")
                return {stopReason: "budget", promptTokens};
            return {stopReason: result.stopReason, promptTokens};
        } catch (err) {
            // A stop pressed before the first token surfaces as an AbortError: it is still a stop.
            if (request.signal.aborted)
                return {stopReason: "abort", promptTokens: 0};
            if (err instanceof AppError)
                throw err;
            const message = (err as Error).message;
            if (/slot|kv cache|failed to decode|NoKvSlot/i.test(message))
                throw new AppError("BAD_REQUEST", `The conversation does not fit in the KV budget of ${cells} cells: raise the budget or start a new conversation (${message})`, {cause: err});
            throw new AppError("INTERNAL", `Generation failed: ${message}`, {cause: err});
        } finally {
            request.signal.removeEventListener("abort", forwardAbort);
            await controller?.dispose().catch(() => {});
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

    async dispose(): Promise<void> {
        await withLock([this, "engine"], () => this._unload());
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
     * Evaluates the stored conversation into the context in chunks, with progress, when much of it is not
     * there yet (a new context after a budget change, another conversation): with a pruning policy each
     * chunk is followed by a prune round, so a history longer than the budget still fits. node-llama-cpp
     * then finds the prefix in place and evaluates only the new message.
     */
    private async _prefill(active: Active, history: ChatHistoryItem[], controller: KvController | null, cells: number,
        onProgress: ((progress: number) => void) | undefined, holdBack = 0, signal?: AbortSignal): Promise<void> {
        if (history.length === 0)
            return;
        const loaded = this._loaded!;
        const sequence = active.session.sequence;
        const rendered = loaded.chatWrapper.generateContextState({chatHistory: history}).contextText.tokenize(loaded.model.tokenizer);
        const tokens = rendered.slice(0, Math.max(0, rendered.length - holdBack));
        const existing = sequence.contextTokens;
        let common = 0;
        while (common < existing.length && common < tokens.length && existing[common] === tokens[common])
            common++;
        const pruning = controller != null && controller.policyId !== "full";
        // The kept prefix must end on a live cell: llama.cpp wants each new position to follow the newest one.
        if (pruning && common > 0) {
            const {positions} = await active.kv!.scores(0);
            let lastLive = -1;
            for (const position of positions) {
                if (position < common && position > lastLive)
                    lastLive = position;
            }
            common = lastLive + 1;
        } else if (!pruning && common > 0 && active.kv != null) {
            // Full KV after a pruned answer in the same context: keep only the prefix that has every cell.
            const live = new Set((await active.kv.scores(0)).positions);
            let whole = 0;
            while (whole < common && live.has(whole))
                whole++;
            common = whole;
        }
        if (common === tokens.length && common === sequence.nextTokenIndex)
            return;

        if (common < sequence.nextTokenIndex)
            await sequence.eraseContextTokenRanges([{start: common, end: sequence.nextTokenIndex}]);
        const missing = tokens.length - common;
        if (!pruning && tokens.length > cells - 16)
            throw new AppError("BAD_REQUEST", fullKvTooLong(tokens.length, cells));
        const report = missing >= 256 ? onProgress : undefined;
        const chunkTarget = Math.max(16, Math.floor(cells * 0.7));
        let done = 0;
        // Chunks sized so each takes about `prefillChunkMs`: a stop waits for one chunk at most, on any model and machine.
        let chunkTokens = 16;
        // Tokens left before the next prune round: as much as fits (512 at most), read in one or more chunks.
        let untilPrune = 0;
        report?.(0);
        while (done < missing) {
            signal?.throwIfAborted();
            if (untilPrune === 0) {
                const live = pruning ? (await active.kv!.stats()).cellsUsed : common + done;
                untilPrune = Math.max(8, Math.min(512, cells - live - 16));
            }
            const chunk = tokens.slice(common + done, common + done + Math.min(untilPrune, chunkTokens));
            const started = performance.now();
            await sequence.evaluateWithoutGeneratingNewTokens(chunk);
            const elapsed = Math.max(1, performance.now() - started);
            chunkTokens = Math.max(8, Math.min(512, Math.round(chunk.length * prefillChunkMs / elapsed)));
            done += chunk.length;
            untilPrune -= chunk.length;
            // Between windows, room for the next one; after the last, the tokens still to come (the held-back tail
            // and the first prune cadence) must fit too, or the first decodes find no free cell.
            if (pruning && (untilPrune === 0 || done >= missing)) {
                untilPrune = 0;
                await controller.pruneNow(done < missing ? chunkTarget : Math.max(8, controller.maxKeep - holdBack));
            }
            report?.(done / missing);
        }
    }

    /** The chat context for `config`, recreated when the budget, KV type or flash attention changed. */
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
        await this._disposeContext();

        const kvType = config.kvType === "f16" ? "F16" : config.kvType === "q8_0" ? "Q8_0" : "Q4_0";
        let context: LlamaContext;
        try {
            context = await loaded.model.createContext({
                contextSize: config.cells,
                sequences: 1,
                flashAttention: config.flashAttention,
                threads: this._options.threads ?? 0,
                experimentalKvCacheKeyType: kvType,
                experimentalKvCacheValueType: kvType
            });
        } catch (err) {
            throw new AppError("BAD_REQUEST", `Could not allocate a KV cache of ${config.cells} cells (${config.kvType}): ${(err as Error).message}`, {cause: err});
        }
        const kv = this._build?.patched === true ? new NativeKv(context) : null;
        if (pruning)
            kv?.setPositionLimit(prunedPositionLimit);
        const session = new LlamaChatSession({contextSequence: context.getSequence(), chatWrapper: loaded.chatWrapper, autoDisposeSequence: true});
        this._active = {context, session, kv, config};
        return this._active;
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
            this._setStatus({state: "idle", model: null});
        }
    }

    private _setStatus(patch: Partial<EngineStatus>): void {
        this._status = {...this._status, ...patch};
        for (const listener of this._listeners)
            listener(this._status);
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

/** An unfinished answer as a model response: its thought is still open when no answer text followed it. */
function partialResponse(turn: Extract<ChatTurn, {role: "assistant"}>): ChatModelResponse["response"] {
    const response: ChatModelResponse["response"] = [];
    if (turn.thinking !== "")
        response.push({type: "segment", segmentType: "thought", text: turn.thinking, ended: turn.text !== ""});
    if (turn.text !== "")
        response.push(turn.text);
    return response;
}

function fullKvTooLong(tokens: number, cells: number): string {
    return `This conversation is ${tokens} tokens long, more than the KV budget of ${cells} cells holds with Full KV: raise the budget or choose a compression policy`;
}

/** How long one chunk of prompt evaluation should take: the longest a stop waits during a prefill. */
const prefillChunkMs = 250;

/** How long `dispose()` waits for the runtime to let go. */
const runtimeDisposeMs = 3000;

/** Tokens at the end of a prompt left for node-llama-cpp to evaluate itself (the assistant's opening, where its rendering may differ). */
const promptTail = 16;

function sameConfig(a: ContextConfig, b: ContextConfig): boolean {
    return a.cells === b.cells && a.kvType === b.kvType && a.flashAttention === b.flashAttention;
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
