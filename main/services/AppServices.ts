import path from "node:path";
import {AppError} from "../AppError.js";
import type {
    AppStatus,
    ConversationDetail,
    ConversationSummary,
    DemoSample,
    ModelDetails,
    NewConversationCompression,
    SavedStatesUsage
} from "../../preload/contract.js";
import {bytesPerMib} from "../../preload/kvUnits.js";
import {shippedModelFile, shippedModelSample} from "../demo/shippedModelSample.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {CalibrationService, type CalibrationServiceOptions} from "./CalibrationService.js";
import {conversationTexts} from "./conversationTexts.js";
import {findRetentionGates} from "../engine/retention/findRetentionGates.js";
import type {RetentionAvailability} from "../engine/retention/types.js";
import {ChatService, type ChatServiceOptions} from "./ChatService.js";
import {CompressionService} from "./CompressionService.js";
import {ConversationService} from "./ConversationService.js";
import {DownloadService} from "./DownloadService.js";
import {EngineBuildService, type EngineBuildServiceOptions} from "./EngineBuildService.js";
import {demoSampleSteps, firstMinuteCompression, shippedFirstBudgetCells} from "./firstMinuteCompression.js";
import {RpcServerService, type RpcServerServiceOptions} from "./RpcServerService.js";
import {CompletionService} from "./CompletionService.js";
import {GenerationQueue} from "./GenerationQueue.js";
import type {StateStore} from "./StateStore.js";
import {ServerService, type ServerServiceOptions} from "./ServerService.js";
import {ModelService} from "./ModelService.js";
import {SettingsService} from "./SettingsService.js";
import {TokenCountService} from "./TokenCountService.js";
import type {Clock, Emit} from "./types.js";

export type AppServicesOptions = {
    version: string;
    /** Folder downloaded models go to. */
    modelsDir: string;
    /** The demo model shipped with the app, registered and loaded on a fresh install. */
    bundledModelPath?: string;
    /** Folder of the retention calibrations' work, and their settings. Defaults to `<modelsDir>/../calibration`, no settings. */
    calibration?: Omit<CalibrationServiceOptions, "bundledModelPath" | "workDir" | "onInstalled"> & {workDir?: string};
    chat?: ChatServiceOptions;
    /** Where conversations' KV states are kept (resume without reading the history again). Defaults to none. */
    states?: StateStore;
    /** Generations that may wait for the engine while one runs; more are refused as busy. Defaults to `4`. */
    maxQueued?: number;
    server?: ServerServiceOptions;
    engineBuilds?: EngineBuildServiceOptions;
    rpcServers?: RpcServerServiceOptions;
    now?: Clock;
};

/** Every use case of the app, wired to one database and one engine. No Electron here. */
export class AppServices {
    readonly settings: SettingsService;
    readonly conversations: ConversationService;
    readonly models: ModelService;
    readonly chat: ChatService;
    readonly downloads: DownloadService;
    readonly compression: CompressionService;
    /** The engine's turns: the chat and the API server generate one at a time. */
    readonly queue: GenerationQueue;
    readonly completions: CompletionService;
    /** The local OpenAI-compatible API server. */
    readonly server: ServerService;
    /** Which engine build runs, and the builds present. */
    readonly engineBuilds: EngineBuildService;
    readonly rpcServers: RpcServerService;
    /** Counts a message's tokens against its conversation's KV budget before it is sent. */
    readonly tokens: TokenCountService;
    /** Makes a model's retention gates from its own thinking (one calibration at a time). */
    readonly calibration: CalibrationService;
    /** The loaded model's retention gates as last looked up (new conversations start under TRIM-KV when it has them). */
    private _gates: {path: string; retention: RetentionAvailability} | null = null;

    constructor(
        readonly db: AppDatabase,
        readonly engine: EngineApi,
        emit: Emit,
        private readonly _options: AppServicesOptions
    ) {
        const now = _options.now ?? Date.now;
        // A budget set while a model is loaded is checked against it (budgetCap); a stored one is capped when used.
        const loadedModel = () => engine.inspection;
        this.settings = new SettingsService(db, loadedModel);
        this.conversations = new ConversationService(db, this.settings, now, loadedModel);
        this.models = new ModelService(db, engine, this.settings, now);
        this.compression = new CompressionService(engine, this.models);
        this.queue = new GenerationQueue(_options.maxQueued ?? 4);
        this.conversations.states = _options.states ?? null;
        const states = _options.states;
        if (states != null) {
            // What a process killed while writing a state left (states are written under a temporary name, then renamed).
            try {
                states.removeTemporary();
            } catch {
                // tried again at the next start
            }
            // The disk budget follows the settings; a lower one (0: save none) trims at once.
            states.budgetBytes = this.settings.get().stateDiskBudgetMib * bytesPerMib;
            this.settings.onUpdate((settings) => {
                const bytes = settings.stateDiskBudgetMib * bytesPerMib;
                if (bytes === states.budgetBytes) return;
                states.budgetBytes = bytes;
                try {
                    states.trim();
                } catch {
                    // the next save trims again
                }
            });
        }
        this.chat = new ChatService(db, engine, this.conversations, this.compression, emit, now, this.queue, {
            ...(_options.chat ?? {}),
            states: _options.states
        });
        this.completions = new CompletionService(engine, this.queue, this.compression, this.settings, now, _options.states);
        this.server = new ServerService(db, engine, this.completions, this.queue, this.settings, emit, _options.server);
        this.downloads = new DownloadService(_options.modelsDir, this.models, emit);
        this.engineBuilds = new EngineBuildService(db, engine, this.queue, _options.engineBuilds);
        this.rpcServers = new RpcServerService(db, engine, this.queue, _options.rpcServers);
        this.tokens = new TokenCountService(db, engine, this.conversations, this.settings, this.compression);
        this.calibration = new CalibrationService(engine, this.models, emit, {
            ..._options.calibration,
            workDir: _options.calibration?.workDir ?? path.join(path.dirname(_options.modelsDir), "calibration"),
            bundledModelPath: _options.bundledModelPath,
            // the gates looked up for new conversations are looked up again
            onInstalled: () => {
                this._gates = null;
            },
            conversationTexts: (modelPath) => conversationTexts(db, modelPath)
        });
        this.chat.recoverInterrupted();
        engine.onStatus((status) => emit("engine:status", status));
    }

    /** What the saved KV states take on disk now (nothing when no store is set). */
    savedStates(): SavedStatesUsage {
        return this._options.states?.usage() ?? {bytes: 0, files: 0};
    }

    /** Deletes every saved KV state (a state being saved now is written after, and counted the next time). */
    clearSavedStates(): SavedStatesUsage {
        this._options.states?.clear();
        return this.savedStates();
    }

    status(): AppStatus {
        return {version: this._options.version, engine: this.engine.status};
    }

    /**
     * A held-out problem of its task (seeds from 2^31, never trained on) when the loaded model is one of the task
     * models Ponder ships (the many-task model a fresh install loads, the demo model, the merge model), else `null`:
     * the kind of question such a model can answer. The demo model's have 24-30 steps (`demoSampleSteps`), the
     * many-task model's are sized by family (`MULTI_SAMPLE_SCALES`), so each answers in seconds and its first budget
     * prunes it.
     */
    demoSample(): DemoSample | null {
        const loaded = this.engine.status.model;
        const bundled = this._options.bundledModelPath;
        if (loaded == null || bundled == null) return null;
        return shippedModelSample(loaded.path, bundled, Math.floor(Math.random() * 2 ** 30), demoSampleSteps);
    }

    /**
     * A new conversation: under TRIM-KV with a budget that prunes when the loaded model has retention gates and no default
     * compression was saved (`firstMinuteCompression`), else with the defaults.
     */
    async createConversation(title?: string): Promise<ConversationSummary> {
        await this._readFirstCompression();
        return this.conversations.create(title);
    }

    /** What a conversation created now starts under (`createConversation`), for the budget controller to say. */
    async newConversationCompression(): Promise<NewConversationCompression> {
        await this._readFirstCompression();
        return this.conversations.newCompression();
    }

    /** Sets the conversations' `firstCompression` for the loaded model (its retention gates read once per model). */
    private async _readFirstCompression(): Promise<void> {
        const model = this.engine.inspection;
        if (model != null && this._gates?.path !== model.path) this._gates = {path: model.path, retention: await findRetentionGates(model)};
        this.conversations.firstCompression =
            model != null && this._gates != null
                ? firstMinuteCompression(
                      this.settings.get().defaultConversationSettings.compression,
                      this._gates.retention,
                      this._shippedFirstBudget(model.path)
                  )
                : null;
    }

    /** The first budget of a model Ponder ships (`shippedFirstBudgetCells`); `null` for any other model. */
    private _shippedFirstBudget(modelPath: string): number | null {
        const bundled = this._options.bundledModelPath;
        const file = bundled != null ? shippedModelFile(modelPath, bundled) : null;
        return file != null ? (shippedFirstBudgetCells[file] ?? null) : null;
    }

    /** A model's details, with what loading it at the default budget needs against free memory. */
    async modelDetails(id: string): Promise<ModelDetails> {
        const details = await this.models.details(id);
        const fit = await this.compression.estimate(this.settings.get().defaultConversationSettings.compression, id).catch(() => null);
        return {...details, fit};
    }

    /**
     * A conversation as the app opens it. Opening one leaves the one shown before: an answer's KV state the engine holds
     * unwritten there is written in the background (ChatService.opened).
     */
    openConversation(id: string): ConversationDetail {
        const detail = this.conversations.get(id);
        this.chat.opened(id);
        return this.chat.withStatePending(detail);
    }

    /** Shows another version of a message; refused while an answer is being written in that conversation. */
    switchBranch(conversationId: string, messageId: string): ConversationDetail {
        if (this.chat.generatingIn(conversationId)) throw new AppError("BUSY", "Stop the answer being written before switching versions");
        return this.chat.withStatePending(this.conversations.switchBranch(conversationId, messageId));
    }

    /** Deletes a message and what follows it; refused while an answer is being written in that conversation. */
    deleteMessage(conversationId: string, messageId: string): ConversationDetail {
        if (this.chat.generatingIn(conversationId)) throw new AppError("BUSY", "Stop the answer being written before deleting messages");
        return this.chat.withStatePending(this.conversations.deleteMessage(conversationId, messageId));
    }

    async deleteConversation(id: string): Promise<void> {
        await this.chat.stop(id);
        this.conversations.delete(id);
    }

    /**
     * Loads the llama.cpp runtime (so the status says which build runs) and the model used last, if it is
     * still there, and starts the API server when it is enabled; failures are reported in the statuses, not thrown.
     */
    async restoreLastModel(): Promise<void> {
        // The API server starts first when enabled: it answers 503 until the model is loaded.
        await this.server.restore();
        try {
            await this.engine.start();
        } catch {
            return;
        }
        let id = this.settings.get().defaultModelId;
        if (
            (id == null || this.db.models.get(id) == null) &&
            this.db.models.list().length === 0 &&
            this._options.bundledModelPath != null
        ) {
            // A fresh install chats at once, offline, with the demo model it ships.
            try {
                id = (await this.models.add(this._options.bundledModelPath)).id;
            } catch {
                return;
            }
        }
        // A model whose loading stopped the engine waits for a person to load it: no crash loop at start-up.
        if (id == null || this.db.models.get(id) == null || this.db.models.get(id)!.crashed_at != null) return;
        try {
            await this.models.load(id);
        } catch {
            // The engine status already carries the reason for the renderer.
        }
    }

    async dispose(): Promise<void> {
        await this.downloads.dispose();
        await this.server.dispose();
        // Stops the answer being written and writes the KV state the engine holds unwritten, a few seconds at most.
        await this.chat.dispose();
        await this.engine.dispose();
        this.db.dispose();
    }
}
