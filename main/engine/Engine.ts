import {LlamaChatSession, type ChatHistoryItem, type ChatModelResponse, type Llama, type LlamaContext, type LlamaModel} from "node-llama-cpp";
import type {BuildInfo, EngineStatus} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {inspectModel} from "./inspectModel.js";
import type {ChatTurn, GenerateRequest, GenerationResult, ModelInspection} from "./types.js";

export type LlamaLoader = () => Promise<{llama: Llama, build: BuildInfo}>;

export type EngineOptions = {
    /** Loads the llama.cpp runtime; the app's loader refuses an unpatched build. */
    loadLlama: LlamaLoader,
    /** KV cells of the chat context, capped by the model's training context. Defaults to `8192`. */
    contextSize?: number,
    /** Use flash attention where the model supports it. Defaults to `false`. */
    flashAttention?: boolean
};

type Loaded = {model: LlamaModel, context: LlamaContext, session: LlamaChatSession, inspection: ModelInspection};

/**
 * Owns the llama.cpp runtime, the loaded model and its chat context. One generation at a time.
 * The only module (with its helpers) that imports node-llama-cpp.
 */
export class Engine {
    private _llama: Llama | null = null;
    private _build: BuildInfo | null = null;
    private _loaded: Loaded | null = null;
    private _status: EngineStatus = {state: "idle", build: null, model: null, progress: null, message: null};
    private _generating = false;
    private readonly _listeners = new Set<(status: EngineStatus) => void>();

    constructor(private readonly _options: EngineOptions) {}

    get status(): EngineStatus {
        return this._status;
    }

    get inspection(): ModelInspection | null {
        return this._loaded?.inspection ?? null;
    }

    /** The loaded context, for the memory read-outs of later layers. */
    get context(): LlamaContext | null {
        return this._loaded?.context ?? null;
    }

    onStatus(listener: (status: EngineStatus) => void): () => void {
        this._listeners.add(listener);
        return () => this._listeners.delete(listener);
    }

    /** Loads the runtime (once) and reports which llama.cpp build it is. */
    async runtime(): Promise<{llama: Llama, build: BuildInfo}> {
        if (this._llama == null || this._build == null) {
            try {
                const {llama, build} = await this._options.loadLlama();
                this._llama = llama;
                this._build = build;
            } catch (err) {
                this._setStatus({state: "error", message: (err as Error).message});
                throw err;
            }
            this._setStatus({build: this._build});
        }
        return {llama: this._llama, build: this._build};
    }

    /** Validates and loads a GGUF model, replacing the loaded one. */
    async loadModel(modelPath: string, modelInfo: EngineStatus["model"]): Promise<ModelInspection> {
        if (this._generating)
            throw new AppError("BUSY", "Stop the current answer before loading another model");

        const inspection = await inspectModel(modelPath);
        const {llama} = await this.runtime();
        await this._unload();
        this._setStatus({state: "loading", progress: 0, model: modelInfo, message: `Loading ${inspection.name}`});

        let model: LlamaModel | null = null;
        try {
            model = await llama.loadModel({
                modelPath: inspection.path,
                onLoadProgress: (progress) => this._setStatus({progress})
            });
            const contextSize = Math.min(this._options.contextSize ?? 8192, inspection.contextLength ?? 8192);
            const context = await model.createContext({
                contextSize,
                sequences: 1,
                flashAttention: this._options.flashAttention ?? false,
                ignoreMemorySafetyChecks: false
            });
            const session = new LlamaChatSession({contextSequence: context.getSequence(), autoDisposeSequence: true});
            this._loaded = {model, context, session, inspection};
        } catch (err) {
            await model?.dispose();
            this._setStatus({state: "error", progress: null, model: null, message: `Could not load ${inspection.name}: ${(err as Error).message}`});
            throw new AppError("MODEL_INVALID", `Could not load ${inspection.name}: ${(err as Error).message}`, {cause: err});
        }

        this._setStatus({state: "ready", progress: null, model: modelInfo, message: null});
        return inspection;
    }

    /** Streams an answer to the last user turn of `history`; the thinking and the answer arrive as separate segments. */
    async generate(request: GenerateRequest): Promise<GenerationResult> {
        const loaded = this._loaded;
        if (loaded == null)
            throw new AppError("MODEL_NOT_LOADED", "No model is loaded: open a model first");
        if (this._generating)
            throw new AppError("BUSY", "An answer is already being generated");

        const last = request.history.at(-1);
        if (last == null || last.role !== "user")
            throw new AppError("BAD_REQUEST", "The conversation must end with a user message");

        this._generating = true;
        this._setStatus({state: "generating"});
        try {
            const {session} = loaded;
            session.setChatHistory(toChatHistory(request.systemPrompt, request.history.slice(0, -1)));
            const inputBefore = session.sequence.tokenMeter.usedInputTokens;
            const result = await session.promptWithMeta(last.text, {
                signal: request.signal,
                stopOnAbortSignal: true,
                maxTokens: request.maxTokens,
                temperature: request.temperature,
                seed: request.seed,
                onResponseChunk(chunk) {
                    const segment = chunk.type === "segment" && chunk.segmentType === "thought" ? "thought" : "answer";
                    if (chunk.text !== "" || chunk.tokens.length > 0)
                        request.onChunk({segment, text: chunk.text, tokens: chunk.tokens.length});
                }
            });
            return {stopReason: result.stopReason, promptTokens: session.sequence.tokenMeter.usedInputTokens - inputBefore};
        } catch (err) {
            // A stop pressed before the first token surfaces as an AbortError: it is still a stop.
            if (request.signal.aborted)
                return {stopReason: "abort", promptTokens: 0};
            if (err instanceof AppError)
                throw err;
            throw new AppError("INTERNAL", `Generation failed: ${(err as Error).message}`, {cause: err});
        } finally {
            this._generating = false;
            this._setStatus({state: "ready"});
        }
    }

    async dispose(): Promise<void> {
        await this._unload();
        await this._llama?.dispose();
        this._llama = null;
    }

    private async _unload(): Promise<void> {
        const loaded = this._loaded;
        this._loaded = null;
        if (loaded != null) {
            loaded.session.dispose({disposeSequence: true});
            await loaded.context.dispose();
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
