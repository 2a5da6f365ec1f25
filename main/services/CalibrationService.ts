import path from "node:path";
import type {CalibrationConversations, CalibrationProvenance, CalibrationStatus} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import {choosePromptSet} from "../engine/retention/choosePromptSet.js";
import {compressionSupport} from "../kv/compressionSupport.js";
import type {EngineApi, CalibrationJobProgress, CalibrationResult, CalibrationSettings} from "../engine/EngineApi.js";
import {modelFingerprint} from "../engine/retention/modelFingerprint.js";
import {minimumConversations, type ConversationTexts} from "./conversationTexts.js";
import type {ModelService} from "./ModelService.js";
import type {Emit} from "./types.js";

export type CalibrationServiceOptions = {
    /** Folder of the calibrations' work (`<folder>/<model fingerprint>/`), kept so a restart goes on from it. */
    workDir: string;
    /** The demo model Ponder ships: a copy of it calibrates on its task's training problems. Defaults to none. */
    bundledModelPath?: string;
    /** Settings of every calibration (prompts, tokens...), over calibrateRetention's defaults. Defaults to none. */
    settings?: Omit<Partial<CalibrationSettings>, "workDir" | "promptSet">;
    /** Milliseconds between progress events of one stage (its first and last step go at once). Defaults to `250`. */
    progressMs?: number;
    /** Called when a calibration installed a model's gates (at `modelPath`'s side). Defaults to none. */
    onInstalled?: (modelPath: string) => void;
    /** The model's stored conversations, for a calibration that reads them. Defaults to none (nothing stored). */
    conversationTexts?: (modelPath: string) => ConversationTexts;
};

/** Where a calibration's texts come from: the model writes them (`"thinking"`), or its stored conversations are read. */
export type CalibrationSource = "thinking" | "conversations";

/**
 * Retention calibrations from the app (`calibrateRetention`, main/engine/calibration): one at a time, of a model Ponder
 * can calibrate, run by the engine (which makes answers wait meanwhile) with its progress as `models:calibration`
 * events, cancelled on request.
 */
export class CalibrationService {
    private _status: CalibrationStatus | null = null;
    private _abort: AbortController | null = null;
    private _lastEmit = {stage: "", at: -Infinity};
    /** Per model path, how many draws of its own questions were refused since the app started. */
    private readonly _draws = new Map<string, number>();
    /** The job's last estimate of the time it still needs, and when it was made (the steps within a prompt make none). */
    private _estimate: {seconds: number; at: number} | null = null;

    constructor(
        private readonly _engine: EngineApi,
        private readonly _models: ModelService,
        private readonly _emit: Emit,
        private readonly _options: CalibrationServiceOptions
    ) {}

    /** The calibration running, or the last one's end; `null` when none ran. */
    get status(): CalibrationStatus | null {
        return this._status;
    }

    /**
     * Starts calibrating model `id` (loading it first when another is loaded) and answers at once; the job's progress
     * and end are events. Refused while a calibration runs (BUSY) and for a model whose architecture Ponder cannot
     * prune or read the gate input of (CANNOT_CALIBRATE).
     */
    /** How much of the model's own conversations a calibration could read: conversations, exchanges and tokens. */
    conversationsOf(id: string): CalibrationConversations {
        const model = this._models.get(id);
        const {conversations, exchanges, tokens} = this._options.conversationTexts?.(model.path) ?? {
            conversations: 0,
            exchanges: 0,
            tokens: 0
        };
        return {conversations, exchanges, tokens, minimum: minimumConversations};
    }

    async start(id: string, source: CalibrationSource = "thinking"): Promise<CalibrationStatus> {
        if (this._abort != null)
            throw new AppError(
                "BUSY",
                `A calibration of ${this._models.get(this._status!.modelId).name} is already running: cancel it or wait for it to end`
            );
        const model = this._models.get(id);
        const support = compressionSupport(model.architecture);
        if (!support.supported)
            throw new AppError(
                "CANNOT_CALIBRATE",
                `${model.name} cannot be calibrated: ${support.note ?? `its architecture (${model.architecture ?? "unknown"}) has no gate input Ponder can read`}`
            );
        const written = source === "conversations" ? (this._options.conversationTexts?.(model.path) ?? null) : null;
        if (source === "conversations" && (written == null || written.conversations < minimumConversations))
            throw new AppError(
                "BAD_REQUEST",
                `${model.name} has ${written?.conversations ?? 0} conversation${written?.conversations === 1 ? "" : "s"} of its own to read, ` +
                    `at least ${minimumConversations} are needed (some to calibrate on, one held out): chat with it more, or calibrate by thinking`
            );
        const abort = new AbortController();
        this._abort = abort;
        this._lastEmit = {stage: "", at: -Infinity};
        this._estimate = null;
        this._set({
            modelId: id,
            state: "running",
            stage: "starting",
            step: 0,
            of: 1,
            etaSeconds: null,
            message: `Starting the calibration of ${model.name}`,
            resumed: 0,
            result: null
        });
        try {
            if (this._engine.inspection?.path !== model.path) await this._models.load(id);
            const [promptSet, fingerprint] = await Promise.all([
                written != null ? ("conversations" as const) : choosePromptSet(model.path, this._options.bundledModelPath ?? null),
                modelFingerprint(model.path)
            ]);
            const running = this._engine.calibrateRetention({
                ...this._options.settings,
                // after a refusal of its own questions, the next calibration draws them again with the next seed
                ...(promptSet === "own" && this._draws.has(model.path)
                    ? {seed: ((this._options.settings?.seed ?? 0) + this._draws.get(model.path)!) % 50}
                    : {}),
                promptSet,
                ...(written != null ? {texts: written.texts} : {}),
                modelPath: model.path,
                workDir: path.join(this._options.workDir, fingerprint),
                signal: abort.signal,
                onProgress: (progress) => this._progress(id, progress)
            });
            void running.then(
                (result) => this._end(id, result),
                (err: unknown) => this._fail(id, err)
            );
        } catch (err) {
            this._abort = null;
            this._fail(id, err);
            throw err;
        }
        return this._status!;
    }

    /** Cancels the running calibration (its work folder stays); nothing happens when none runs. */
    cancel(): void {
        this._abort?.abort(new Error("The calibration was cancelled"));
    }

    private _progress(modelId: string, progress: CalibrationJobProgress): void {
        const now = performance.now();
        if (progress.remaining != null) this._estimate = {seconds: progress.remaining, at: now};
        const stage = progress.stage;
        if (stage === this._lastEmit.stage && progress.done < progress.total && now - this._lastEmit.at < (this._options.progressMs ?? 250))
            return;
        this._lastEmit = {stage, at: now};
        const step = Math.min(progress.total, Math.floor(progress.done));
        this._set({
            modelId,
            state: "running",
            stage,
            step,
            of: progress.total,
            etaSeconds: this._estimate == null ? null : Math.max(0, Math.round(this._estimate.seconds - (now - this._estimate.at) / 1000)),
            message: stageMessage(stage, step, progress.total),
            resumed: progress.resumed,
            result: null
        });
    }

    private _end(modelId: string, result: CalibrationResult | null): void {
        const last = this._status!;
        this._abort = null;
        if (result == null) {
            this._set({
                ...last,
                state: "cancelled",
                etaSeconds: null,
                message: "Cancelled: the prompts thought through are kept, and calibrating again goes on from them"
            });
            return;
        }
        const modelPath = this._models.get(modelId).path;
        if (result.installed) this._options.onInstalled?.(modelPath);
        if (!result.installed && result.promptSet === "own") this._draws.set(modelPath, (this._draws.get(modelPath) ?? 0) + 1);
        const provenance: CalibrationProvenance = {
            promptSet: result.promptSet,
            prompts: result.prompts,
            tokens: result.tokensSeen,
            samples: result.samples,
            seconds: Math.round(result.seconds),
            date: new Date().toISOString(),
            texts: result.texts,
            validation: {
                prompts: result.validation.prompts,
                tokens: result.validation.tokens,
                points: result.validation.points.map(({share, gates, lethe, answers}) => ({share, gates, lethe, answers}))
            }
        };
        this._set({
            modelId,
            state: result.installed ? "installed" : "refused",
            stage: "writing",
            step: 1,
            of: 1,
            etaSeconds: 0,
            message: result.refusal ?? "The calibrated gates are installed: TRIM-KV can run on this model",
            resumed: last.resumed,
            result: {...provenance, installed: result.installed}
        });
    }

    private _fail(modelId: string, err: unknown): void {
        this._abort = null;
        const last = this._status;
        this._set({
            modelId,
            state: "failed",
            stage: last?.stage ?? "starting",
            step: last?.step ?? 0,
            of: last?.of ?? 1,
            etaSeconds: null,
            message: `The calibration failed: ${(err as Error).message}`,
            resumed: last?.resumed ?? 0,
            result: null
        });
    }

    private _set(status: CalibrationStatus): void {
        this._status = status;
        this._emit("models:calibration", status);
    }
}

/** The stage in words: "Thinking 3/8", "Training the gates", "Validating against Lethe 2/16", "Installing the gates". */
function stageMessage(stage: CalibrationJobProgress["stage"], step: number, of: number): string {
    switch (stage) {
        case "questions":
            return `Writing its own questions ${step}/${of}`;
        case "thinking":
            return `Thinking ${Math.min(of, step + 1)}/${of}`;
        case "reading":
            return `Reading its conversations ${Math.min(of, step + 1)}/${of}`;
        case "training":
            return `Training the gates (${Math.round((step / Math.max(1, of)) * 100)}%)`;
        case "validating":
            return `Validating against Lethe ${step}/${of}`;
        case "writing":
            return "Installing the gates";
    }
}
