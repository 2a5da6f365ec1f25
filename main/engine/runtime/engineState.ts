import type {ChatWrapper, LlamaChatSession, LlamaContext, LlamaModel} from "node-llama-cpp";
import type {CompressionSettings} from "../../../preload/contract/compression.js";
import type {EngineStatus} from "../../../preload/contract/engine.js";
import type {LoadOptions, ModelInspection, StateFiles, StateOutcome} from "../EngineApi.js";
import type {KvController} from "../pruning/KvController.js";
import type {NativeKv} from "../native/NativeKv.js";
import type {StateExpectation} from "../states/stateFile.js";

// The state the engine's modules share (the loaded model, the active context), as types only: each module is handed the
// values it works on, and calls back into the engine (`SetStatus`) rather than importing it.

/** What a context is created with; a change rebuilds it. */
/**
 * What a chat context is made for. `reads`: the per-cell values the policy turns on in the patched engine (scores,
 * retention gates, value norms), set only where turning them on or off in a context that has decoded is unsafe (a
 * GPU or RPC build: llama.cpp reserves its graphs again, which corrupted memory on Vulkan); elsewhere `null`.
 */
export type ContextConfig = Pick<CompressionSettings, "kvType" | "kvTypeV" | "flashAttention"> & {cells: number; reads?: string | null};

/**
 * The loaded model, with its chat wrapper (resolved once per model). `openingTokens`: tokens the chat wrapper writes at the
 * start of the model's turn (a forced `<think>\n`) beyond the rendered history, learnt from the last generation of each
 * kind (a new answer with thinking on or off, a continuation), so a refusal counts the prompt as usage does.
 */
export type LoadedModel = {
    model: LlamaModel;
    inspection: ModelInspection;
    chatWrapper: ChatWrapper;
    options: LoadOptions;
    openingTokens: Map<string, number>;
};

/**
 * The chat context the engine generates in: one sequence and its session, the native KV access on a patched build.
 * `controller`: the KV controller of the generation in progress, the gate every decode of the sequence waits for.
 */
export type ActiveContext = {
    context: LlamaContext;
    session: LlamaChatSession;
    kv: NativeKv | null;
    config: ContextConfig;
    controller: KvController | null;
};

/** A generation's saved states: the files it may resume from and save to, what they must match, and what became of them. */
export type RequestStates = {files: StateFiles; expectation: StateExpectation; outcome: StateOutcome};

/** Changes the engine's status (and tells its listeners). */
export type SetStatus = (patch: Partial<EngineStatus>) => void;
