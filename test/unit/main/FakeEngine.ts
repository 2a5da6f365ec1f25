import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {inspectModel} from "../../../main/engine/runtime/inspectModel.js";
import type {EngineStatus} from "../../../preload/contract.js";
import type {
    EngineApi,
    LoadOptions,
    CalibrateRequest,
    CalibrationJobProgress,
    CalibrationResult,
    CountTokensRequest,
    GenerateRequest,
    GenerationResult,
    ModelInspection,
    PromptTokenCount,
    StateOutcome,
    StateSave
} from "../../../main/engine/EngineApi.js";

/** An engine double that streams a scripted thought and answer, one token per chunk, one chunk per tick. */
export class FakeEngine {
    inspection: ModelInspection | null = {
        path: "/m.gguf",
        name: "fake",
        sizeBytes: 1,
        architecture: "llama",
        contextLength: 4096,
        layers: 2,
        headCount: 2,
        headCountKv: 1,
        embeddingLength: 8,
        hasChatTemplate: true
    };
    status: EngineStatus = {state: "ready", build: null, model: null, progress: null, message: null};
    requests: GenerateRequest[] = [];
    thought = ["Let", " me", " think"];
    answer = ["The", " answer", " is", " 4"];
    failWith: Error | null = null;
    /** Full KV "fills its budget" after this many chunks (the engine's `budget` stop). */
    budgetAfter: number | null = null;
    /** The models loaded, with the options each was loaded with. */
    loads: Array<{path: string; options: LoadOptions | undefined}> = [];
    /** Free VRAM a GPU build reports (set `status.build` with a `gpu` to use it). */
    freeVramBytes = 0;
    /** What a finished answer reports of its states (loaded, saved), when the request offered any. */
    stateOutcome: StateOutcome | null = null;
    /**
     * Plays Full KV's deferred state: an answer asked to save keeps its state "in the context" (`pending`), written (a file
     * of `stateBytes` bytes) by `saveState`, or by the next request unless that one saves in the same folder (the same
     * conversation continues, which supersedes it).
     */
    deferStates = false;
    stateBytes = 1000;
    /** Milliseconds `saveState` takes to write; `Infinity` never ends (an engine stuck writing). */
    saveMs = 0;
    pending: string | null = null;
    /** Every `saveState` call's path argument, and what each settled state became. */
    saveCalls: Array<string | undefined> = [];
    settled: StateSave[] = [];
    /** The whole prompt's length and the tokens evaluated that a finished answer reports. Defaults to none and `5`. */
    promptLength: number | null = null;
    promptTokens = 5;
    /** The progress a calibration reports, one step every `calibrationStepMs`, before it returns `calibrationResult`. */
    calibrationSteps: CalibrationJobProgress[] = [
        {stage: "thinking", done: 0, total: 2, elapsed: 0, remaining: null, resumed: 0, tokensSeen: 0},
        {stage: "thinking", done: 1, total: 2, elapsed: 1, remaining: 30, resumed: 0, tokensSeen: 400},
        {stage: "training", done: 4, total: 8, elapsed: 2, remaining: 12, resumed: 0, tokensSeen: 800},
        {stage: "validating", done: 1, total: 4, elapsed: 3, remaining: 6, resumed: 0, tokensSeen: 800}
    ];
    calibrationStepMs = 5;
    calibrationResult: CalibrationResult = {
        installed: true,
        out: "/m.retention.gguf",
        backup: null,
        refusal: null,
        workKept: null,
        promptSet: "demo",
        texts: {mean: 700, longest: 1200, cut: 0},
        prompts: 2,
        tokensSeen: 800,
        samples: 600,
        seconds: 42,
        readThreshold: 0.5,
        horizonWeight: 1,
        validation: {
            points: [
                {share: 0.25, gates: 0.97, lethe: 0.86, answers: {gates: 0.9, lethe: 0.4}},
                {share: 0.5, gates: 0.99, lethe: 0.95, answers: {gates: 1, lethe: 0.6}}
            ],
            prompts: 2,
            skipped: 0,
            tokens: 300,
            answerTokens: 12,
            passed: true
        },
        trainLoss: [0.5]
    };
    /** The calibrations asked for. */
    calibrations: CalibrateRequest[] = [];
    private readonly _stateListeners = new Set<(save: StateSave) => void>();

    /** Plays a calibration: `calibrationSteps`, then `calibrationResult`; `null` once the signal aborts; `failWith` fails it. */
    async calibrateRetention(request: CalibrateRequest): Promise<CalibrationResult | null> {
        this.calibrations.push(request);
        for (const step of this.calibrationSteps) {
            if (request.signal.aborted) return null;
            request.onProgress?.(step);
            await new Promise((resolve) => setTimeout(resolve, this.calibrationStepMs));
        }
        if (request.signal.aborted) return null;
        if (this.failWith != null) throw this.failWith;
        return this.calibrationResult;
    }

    async loadModel(modelPath: string, modelInfo: EngineStatus["model"], options?: LoadOptions): Promise<ModelInspection> {
        this.loads.push({path: modelPath, options});
        this.status = {...this.status, state: "ready", model: modelInfo};
        return this.inspection!;
    }

    onStatus(_listener?: (status: EngineStatus) => void): () => void {
        return () => {};
    }

    async saveState(path?: string): Promise<StateSave | null> {
        this.saveCalls.push(path);
        const pending = this.pending;
        if (pending == null || (path != null && path !== pending)) return null;
        if (this.saveMs > 0) await new Promise((resolve) => (Number.isFinite(this.saveMs) ? setTimeout(resolve, this.saveMs) : undefined));
        return this._write();
    }

    onStateSettled(listener: (save: StateSave) => void): () => void {
        this._stateListeners.add(listener);
        return () => this._stateListeners.delete(listener);
    }

    private _settle(save: StateSave): StateSave {
        this.settled.push(save);
        for (const listener of this._stateListeners) listener(save);
        return save;
    }

    private _write(): StateSave {
        const file = this.pending!;
        this.pending = null;
        try {
            fs.writeFileSync(file, Buffer.alloc(this.stateBytes));
        } catch (err) {
            return this._settle({path: file, saved: null, note: `The KV state could not be saved: ${(err as Error).message}`});
        }
        return this._settle({
            path: file,
            saved: {path: file, bytes: this.stateBytes, tokens: 100, liveCells: 100, liveBytes: 800, fullBytes: 800},
            note: null
        });
    }

    async generate(request: GenerateRequest): Promise<GenerationResult> {
        this.requests.push(request);
        if (this.pending != null) {
            const save = request.states?.save;
            if (save != null && path.dirname(save) === path.dirname(this.pending))
                this._settle({path: this.pending, saved: null, note: null, superseded: true});
            else this._write();
            this.pending = null;
        }
        const script = [
            ...this.thought.map((text) => ({segment: "thought" as const, text, tokens: 1})),
            ...this.answer.map((text) => ({segment: "answer" as const, text, tokens: 1}))
        ];
        // A continuation goes on after the chunks the unfinished answer already holds.
        const last = request.history.at(-1);
        const done = request.continueLast === true && last?.role === "assistant" ? chunksIn(script, last.thinking, last.text) : 0;
        const chunks = script.slice(done);
        for (const [index, chunk] of chunks.entries()) {
            if (index >= request.maxTokens) return {stopReason: "maxTokens", promptTokens: 5};
            if (this.budgetAfter != null && index >= this.budgetAfter) return {stopReason: "budget", promptTokens: 5};
            await new Promise((resolve) => setTimeout(resolve, 1));
            if (request.signal.aborted) return {stopReason: "abort", promptTokens: 5};
            if (this.failWith != null && index === 2) throw this.failWith;
            request.onChunk(chunk);
        }
        let states: StateOutcome | undefined = request.states != null && this.stateOutcome != null ? this.stateOutcome : undefined;
        if (this.deferStates && request.states?.save != null) {
            this.pending = request.states.save;
            states = {restored: null, note: null, saved: null, pending: request.states.save};
        }
        return {
            stopReason: "eogToken",
            promptTokens: this.promptTokens,
            ...(this.promptLength != null ? {promptLength: this.promptLength} : {}),
            ...(states != null ? {states} : {})
        };
    }

    /** The prompts counted (`countTokens`). */
    counts: CountTokensRequest[] = [];

    /** One token per word, and 4 per turn for its markers; `null` without a model, as the engine. */
    async countTokens(request: CountTokensRequest): Promise<PromptTokenCount | null> {
        if (this.inspection == null) return null;
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
        const build = this.status.build;
        // As the engine: a GPU build's VRAM, or the connected rpc-servers' free memory, takes the offloaded layers.
        return build != null && (build.gpu !== false || build.rpc?.servers.some((server) => server.connected) === true)
            ? this.freeVramBytes
            : os.freemem();
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

function chunksIn(script: Array<{segment: "thought" | "answer"; text: string}>, thinking: string, text: string): number {
    let thought = "";
    let answer = "";
    for (const [index, chunk] of script.entries()) {
        if (thought === thinking && answer === text) return index;
        if (chunk.segment === "thought") thought += chunk.text;
        else answer += chunk.text;
    }
    return script.length;
}
