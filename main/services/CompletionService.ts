import {randomInt} from "node:crypto";
import type {CompressionSettings, KvSample, PolicyId} from "../../preload/contract.js";
import {policyEntry} from "../../preload/policyCatalogue.js";
import {AppError} from "../AppError.js";
import {assertBudgetWithinCap} from "../kv/budgetCap.js";
import {cacheTypeProblem} from "../kv/kvMemory.js";
import type {EngineApi, StateFiles, StateSave} from "../engine/EngineApi.js";
import {assertBudgetAboveMin} from "../kv/resolveKv.js";
import type {CompletionRequest, CompletionResult} from "../server/types.js";
import type {CompressionService} from "./CompressionService.js";
import type {GenerationQueue} from "./GenerationQueue.js";
import {GenerationRunner} from "./GenerationRunner.js";
import type {SettingsService} from "./SettingsService.js";
import type {StateStore} from "./StateStore.js";
import type {Clock} from "./types.js";

/** API states kept on disk at most, newest first (more go at the next request). */
const maxApiStates = 8;

/**
 * Generations for the API server: the same engine as the chat, in the same queue, with the app's compression
 * settings under the request's policy and budget. Reads no conversation and stores no message. Under Full KV a request
 * leaves its KV state for later ones (`states`, in a folder of its own): a request whose messages continue an earlier
 * one's starts from the longest prefix still in the context or in one of the newest `maxApiStates` states on disk.
 */
export class CompletionService {
    /** The engine's turns, shared with the chat. */
    private readonly _runner: GenerationRunner;

    constructor(
        private readonly _engine: EngineApi,
        private readonly _queue: GenerationQueue,
        private readonly _compression: Pick<CompressionService, "resolve">,
        private readonly _settings: Pick<SettingsService, "get">,
        private readonly _now: Clock,
        private readonly _states?: StateStore
    ) {
        this._runner = new GenerationRunner(_engine, _queue, _compression);
        _engine.onStateSettled((save) => this._stateSettled(save));
    }

    async complete(request: CompletionRequest): Promise<CompletionResult> {
        if (request.compareFull === true) return await this._compareFull(request);
        if (this._engine.inspection == null)
            throw new AppError("MODEL_NOT_LOADED", "No model is loaded in Ponder: load one in the app first");
        const compression = requestCompression(this._settings.get().defaultConversationSettings.compression, request);
        const cacheProblem = cacheTypeProblem(this._engine.inspection, compression);
        if (cacheProblem != null) throw new AppError("BAD_REQUEST", cacheProblem);
        // Refused above the model's context, never capped: the client asked for that budget (the server's default is capped).
        assertBudgetWithinCap(this._engine.inspection, compression);
        // TRIM-KV without gates trained for the loaded model: refused with the reason (ponder.policy), never run as another policy.
        const kv = await this._compression.resolve(compression);
        assertBudgetAboveMin(kv);
        if (!kv.fits)
            throw new AppError(
                "BUDGET_DOES_NOT_FIT",
                `A KV budget of ${kv.cells} cells does not fit in this machine's free memory: ask for a smaller budget`
            );

        const queued = this._now();
        let started = queued;
        const progress = {
            thinking: "",
            text: "",
            thinkingTokens: 0,
            answerTokens: 0,
            firstTokenAt: null as number | null,
            lastTokenAt: started
        };
        let sample: KvSample | null = null;
        const {result} = await this._runner.run({
            signal: request.signal,
            kv: {resolved: kv},
            request: () => {
                const states = this._requestStates(compression.policy);
                started = this._now();
                progress.lastTokenAt = started;
                request.onStart?.();
                return {
                    history: request.history,
                    systemPrompt: request.systemPrompt,
                    temperature: request.temperature,
                    maxTokens: request.maxTokens,
                    seed: request.seed,
                    topP: request.topP,
                    topK: request.topK,
                    minP: request.minP,
                    repeatPenalty: request.repeatPenalty,
                    stop: request.stop,
                    signal: request.signal,
                    states,
                    onSample: (reading) => {
                        sample = reading;
                        request.onSample?.(reading);
                    },
                    onChunk: (chunk) => {
                        const now = this._now();
                        progress.firstTokenAt ??= now;
                        progress.lastTokenAt = now;
                        if (chunk.segment === "thought") {
                            progress.thinking += chunk.text;
                            progress.thinkingTokens += chunk.tokens;
                        } else {
                            progress.text += chunk.text;
                            progress.answerTokens += chunk.tokens;
                        }
                        request.onChunk(chunk);
                    }
                };
            }
        });
        return {
            stopReason: result.stopReason,
            promptTokensEvaluated: result.promptTokens,
            promptLength: result.promptLength ?? null,
            outputTokens: result.outputTokens ?? null,
            thinking: progress.thinking,
            text: progress.text,
            thinkingTokens: progress.thinkingTokens,
            answerTokens: progress.answerTokens,
            policy: compression.policy,
            kvType: compression.kvType,
            kvTypeV: compression.kvTypeV,
            budgetCells: kv.cells,
            sample,
            queuedMs: started - queued,
            firstTokenMs: progress.firstTokenAt == null ? null : progress.firstTokenAt - started,
            generationMs: progress.lastTokenAt - started
        };
    }

    /**
     * The request as asked, then under Full KV with the same seed (drawn here when it has none) and cache types, unheard by
     * the client (no chunks, no samples): whether the texts match and each run's memory.
     */
    private async _compareFull(request: CompletionRequest): Promise<CompletionResult> {
        if (policyEntry(request.policy).keepsEveryToken)
            throw new AppError("BAD_REQUEST", "ponder.compare_full compares a pruning policy with Full KV: set ponder.policy to one");
        const seed = request.seed ?? randomInt(2 ** 31);
        const pruned = await this.complete({...request, compareFull: false, seed});
        if (pruned.stopReason === "abort") return pruned;
        const full = await this.complete({
            ...request,
            compareFull: false,
            seed,
            policy: "full",
            budget: {kind: "auto"},
            kvType: pruned.kvType,
            kvTypeV: pruned.kvTypeV,
            onStart: undefined,
            onChunk: () => {},
            onSample: undefined
        });
        return {...pruned, compareFull: {full, sameText: full.text === pruned.text, sameThinking: full.thinking === pruned.thinking}};
    }

    /**
     * The states a request may start from, and where it leaves its own: Full KV's only. A pruning policy reads every prompt
     * afresh, so its answer depends on the request alone (a pruned state would carry rounds made for another request's
     * input). States already on disk are offered even when the disk budget is 0 (none is then written).
     */
    private _requestStates(policy: PolicyId): StateFiles | undefined {
        const store = this._states;
        if (store == null || !policyEntry(policy).keepsEveryToken) return undefined;
        try {
            store.trimApi(maxApiStates);
            return {load: store.apiStates(), save: store.saving ? store.prepareApi() : undefined};
        } catch {
            // A states folder that cannot be read or made: the request reads its prompt as without states.
            return undefined;
        }
    }

    /** An API state written (after its request, when another needed the engine or the app quit) counts against the disk budget. */
    private _stateSettled(save: StateSave): void {
        const store = this._states;
        if (store == null || save.saved == null || !store.isApiState(save.path)) return;
        try {
            store.trim(save.path);
        } catch {
            // the next write trims again
        }
    }
}

/** The app's compression defaults under a request's policy, budget, cache types and flash attention. */
export function requestCompression(
    defaults: CompressionSettings,
    request: Pick<CompletionRequest, "policy" | "budget" | "kvType" | "kvTypeV" | "flashAttention">
): CompressionSettings {
    const kvType = request.kvType ?? defaults.kvType;
    const kvTypeV = request.kvTypeV ?? defaults.kvTypeV;
    const flashAttention = request.flashAttention ?? (defaults.flashAttention || kvTypeV !== "f16");
    return {...defaults, policy: request.policy, budget: request.budget, kvType, kvTypeV, flashAttention};
}
