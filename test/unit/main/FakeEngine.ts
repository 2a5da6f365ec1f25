import os from "node:os";
import {inspectModel} from "../../../main/engine/inspectModel.js";
import type {EngineStatus} from "../../../preload/contract.js";
import type {EngineApi, LoadOptions} from "../../../main/engine/EngineApi.js";
import type {CountTokensRequest, GenerateRequest, GenerationResult, ModelInspection, PromptTokenCount, StateOutcome} from "../../../main/engine/types.js";

/** An engine double that streams a scripted thought and answer, one token per chunk, one chunk per tick. */
export class FakeEngine {
    inspection: ModelInspection | null = {
        path: "/m.gguf", name: "fake", sizeBytes: 1, architecture: "llama", contextLength: 4096,
        layers: 2, headCount: 2, headCountKv: 1, embeddingLength: 8, hasChatTemplate: true
    };
    status: EngineStatus = {state: "ready", build: null, model: null, progress: null, message: null};
    requests: GenerateRequest[] = [];
    thought = ["Let", " me", " think"];
    answer = ["The", " answer", " is", " 4"];
    failWith: Error | null = null;
    /** Full KV "fills its budget" after this many chunks (the engine's `budget` stop). */
    budgetAfter: number | null = null;
    /** The models loaded, with the options each was loaded with. */
    loads: Array<{path: string, options: LoadOptions | undefined}> = [];
    /** Free VRAM a GPU build reports (set `status.build` with a `gpu` to use it). */
    freeVramBytes = 0;
    /** What a finished answer reports of its states (loaded, saved), when the request offered any. */
    stateOutcome: StateOutcome | null = null;

    async loadModel(modelPath: string, modelInfo: EngineStatus["model"], options?: LoadOptions): Promise<ModelInspection> {
        this.loads.push({path: modelPath, options});
        this.status = {...this.status, state: "ready", model: modelInfo};
        return this.inspection!;
    }

    onStatus(_listener?: (status: EngineStatus) => void): () => void {
        return () => {};
    }

    async generate(request: GenerateRequest): Promise<GenerationResult> {
        this.requests.push(request);
        const script = [
            ...this.thought.map((text) => ({segment: "thought" as const, text, tokens: 1})),
            ...this.answer.map((text) => ({segment: "answer" as const, text, tokens: 1}))
        ];
        // A continuation goes on after the chunks the unfinished answer already holds.
        const last = request.history.at(-1);
        const done = request.continueLast === true && last?.role === "assistant" ? chunksIn(script, last.thinking, last.text) : 0;
        const chunks = script.slice(done);
        for (const [index, chunk] of chunks.entries()) {
            if (index >= request.maxTokens)
                return {stopReason: "maxTokens", promptTokens: 5};
            if (this.budgetAfter != null && index >= this.budgetAfter)
                return {stopReason: "budget", promptTokens: 5};
            await new Promise((resolve) => setTimeout(resolve, 1));
            if (request.signal.aborted)
                return {stopReason: "abort", promptTokens: 5};
            if (this.failWith != null && index === 2)
                throw this.failWith;
            request.onChunk(chunk);
        }
        return {stopReason: "eogToken", promptTokens: 5, ...(request.states != null && this.stateOutcome != null ? {states: this.stateOutcome} : {})};
    }

    /** The prompts counted (`countTokens`). */
    counts: CountTokensRequest[] = [];

    /** One token per word, and 4 per turn for its markers; `null` without a model, as the engine. */
    async countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null> {
        if (this.inspection == null)
            return null;
        this.counts.push(request);
        const words = (text: string) => text.split(/\s+/).filter((word) => word !== "").length;
        const turns = request.history.map((turn) => words(turn.text) + (turn.role === "assistant" ? words(turn.thinking) : 0) + 4);
        const messageTokens = turns.at(-1) ?? 0;
        return {messageTokens, promptTokens: words(request.systemPrompt) + turns.reduce((sum, tokens) => sum + tokens, 0)};
    }

    async start() {
        return this.status.build ?? {kind: "none" as const, gpu: false as const, patched: false, llamaCppRelease: "none", seriesHash: null};
    }

    async freeMemory(): Promise<number> {
        return this.status.build != null && this.status.build.gpu !== false ? this.freeVramBytes : os.freemem();
    }

    /** Files are read for real: the header check and node-llama-cpp's reader. */
    inspect(modelPath: string): Promise<ModelInspection> {
        return inspectModel(modelPath);
    }

    /** The runtimes the engine was restarted with (`restart`). */
    restarts: Array<{build?: string}> = [];

    async restart(options: {build?: string}) {
        this.restarts.push(options);
        return this.start();
    }

    async dispose(): Promise<void> {}

    asEngine(): EngineApi {
        return this as unknown as EngineApi;
    }
}

function chunksIn(script: Array<{segment: "thought" | "answer", text: string}>, thinking: string, text: string): number {
    let thought = "";
    let answer = "";
    for (const [index, chunk] of script.entries()) {
        if (thought === thinking && answer === text)
            return index;
        if (chunk.segment === "thought")
            thought += chunk.text;
        else
            answer += chunk.text;
    }
    return script.length;
}
