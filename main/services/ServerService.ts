import {randomBytes} from "node:crypto";
import path from "node:path";
import {z} from "zod";
import type {ServerRequestLog, ServerSettings, ServerStatus} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import {assertBudgetWithinCap, budgetChanged, capBudget} from "../kv/budgetCap.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {hashKey, isLoopback} from "../net/accessControl.js";
import {ApiServer, type ApiServerOptions} from "../server/ApiServer.js";
import type {CompletionService} from "./CompletionService.js";
import {QueueAbortError, type GenerationQueue} from "./GenerationQueue.js";
import {compressionSettingsFields} from "./schemas.js";
import type {SettingsService} from "./SettingsService.js";
import type {Emit} from "./types.js";

const storageKey = "server";
/** Requests the log keeps; older ones drop off. */
const logSize = 100;

export const serverSettingsSchema = z
    .object({
        enabled: z.boolean(),
        host: z
            .string()
            .min(1)
            .max(253)
            .regex(/^[A-Za-z0-9.:-]+$/, "The address must be a host name or an IP address"),
        port: z.number().int().min(0).max(65_535),
        policy: compressionSettingsFields.shape.policy,
        budget: compressionSettingsFields.shape.budget,
        corsOrigins: z.array(z.url({protocol: /^https?$/}).transform((url) => new URL(url).origin)).max(32),
        maxQueued: z.number().int().min(0).max(64)
    })
    .strict() satisfies z.ZodType<ServerSettings, unknown>;

const defaultServerSettings: ServerSettings = {
    enabled: false,
    host: "127.0.0.1",
    port: 8080,
    policy: "lethe",
    budget: {kind: "cells", cells: 4096},
    corsOrigins: [],
    maxQueued: 4
};

type Stored = ServerSettings & {keyHash: string | null};

export type ServerServiceOptions = {
    /** Overrides of the stored settings for this run only (headless `--serve`); never saved. */
    override?: Partial<ServerSettings>;
    /** How long clients have to send a request's headers and its whole body. Defaults to ApiServer's. */
    timeouts?: Pick<ApiServerOptions, "headersTimeoutMs" | "requestTimeoutMs">;
};

/**
 * The local OpenAI-compatible API server's settings and lifecycle, and the log of its requests. The HTTP side
 * (main/server/) sees only the model served and generations; the key is stored as a hash and shown once.
 */
export class ServerService {
    private _server: ApiServer | null = null;
    /** Where the running server was asked to listen (its port may be `0`). */
    private _listening: {host: string; port: number} | null = null;
    private _error: string | null = null;
    private readonly _log: ServerRequestLog[] = [];
    private _override: Partial<ServerSettings>;
    private readonly _timeouts: ServerServiceOptions["timeouts"];
    private _applying: Promise<unknown> = Promise.resolve();

    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _completions: CompletionService,
        private readonly _queue: GenerationQueue,
        private readonly _settings: SettingsService,
        private readonly _emit: Emit,
        options: ServerServiceOptions = {}
    ) {
        this._override = options.override ?? {};
        this._timeouts = options.timeouts;
        _engine.onStatus(() => this._emit("server:status", this.status()));
    }

    status(): ServerStatus {
        const stored = this._stored();
        return {
            settings: this.settings(),
            hasKey: stored.keyHash != null,
            running: this._server != null,
            url: this._server?.url ?? null,
            model: this._modelId(),
            error: this._error
        };
    }

    get(): {status: ServerStatus; log: ServerRequestLog[]} {
        return {status: this.status(), log: [...this._log]};
    }

    settings(): ServerSettings {
        const {keyHash: _, ...settings} = this._stored();
        return {...settings, ...this._override};
    }

    /** Listens when enabled (at start-up); a failure is reported in the status, not thrown. */
    async restore(): Promise<void> {
        await this._apply().catch(() => {});
    }

    async update(patch: Partial<ServerSettings>): Promise<ServerStatus> {
        const stored = this._stored();
        const current = this.settings();
        const next = serverSettingsSchema.parse({...current, ...patch});
        // Requests' default budget, checked against the loaded model with the cache type requests use (the app's default).
        const {kvType, kvTypeV} = this._settings.get().defaultConversationSettings.compression;
        if (budgetChanged({budget: current.budget, kvType, kvTypeV}, {budget: next.budget, kvType, kvTypeV}))
            assertBudgetWithinCap(this._engine.inspection, {budget: next.budget, kvType, kvTypeV});
        // What the patch changes wins over this run's override from now on.
        this._override = Object.fromEntries(Object.entries(this._override).filter(([key]) => !(key in patch)));
        if (next.enabled && !isLoopback(next.host) && stored.keyHash == null)
            throw new AppError(
                "BAD_REQUEST",
                `An API key is required to listen on ${next.host}: generate a key first, or listen on 127.0.0.1`
            );
        this._save({...next, keyHash: stored.keyHash});
        await this._apply();
        return this.status();
    }

    /** A new random key replacing any; returned here only, stored as its hash. */
    async generateKey(): Promise<{key: string; status: ServerStatus}> {
        const key = `pk-${randomBytes(24).toString("base64url")}`;
        this._save({...this._stored(), keyHash: hashKey(key).toString("hex")});
        await this._apply();
        return {key, status: this.status()};
    }

    async clearKey(): Promise<ServerStatus> {
        const stored = this._stored();
        const settings = this.settings();
        if (settings.enabled && !isLoopback(settings.host))
            throw new AppError(
                "BAD_REQUEST",
                `The server listens on ${settings.host}, which requires a key: listen on 127.0.0.1 before removing it`
            );
        this._save({...stored, keyHash: null});
        await this._apply();
        return this.status();
    }

    async dispose(): Promise<void> {
        await this._applying.catch(() => {});
        await this._server?.dispose();
        this._server = null;
        this._listening = null;
    }

    /** Starts, stops or restarts the listener to match the settings; one change at a time. */
    private _apply(): Promise<void> {
        const run = this._applying.catch(() => {}).then(() => this._applyNow());
        this._applying = run;
        return run;
    }

    private async _applyNow(): Promise<void> {
        const settings = this.settings();
        const stored = this._stored();
        this._queue.maxWaiting = settings.maxQueued;
        const keyHash = stored.keyHash != null ? Buffer.from(stored.keyHash, "hex") : null;
        // A change of key or origins applies to the running listener: clients keep their address.
        if (settings.enabled && this._server != null && this._listening?.host === settings.host && this._listening.port === settings.port) {
            this._server.configure({keyHash, corsOrigins: settings.corsOrigins});
            this._emit("server:status", this.status());
            return;
        }
        await this._server?.dispose();
        this._server = null;
        this._listening = null;
        this._error = null;
        try {
            if (settings.enabled) {
                this._server = await ApiServer.start({
                    host: settings.host,
                    port: settings.port,
                    keyHash,
                    corsOrigins: settings.corsOrigins,
                    ...this._timeouts,
                    onLog: (entry) => this._record(entry),
                    backend: {
                        model: () => {
                            const id = this._modelId();
                            return id == null ? null : {id, createdAt: this._engine.status.model?.addedAt ?? 0};
                        },
                        defaults: () => {
                            const current = this.settings();
                            const conversation = this._settings.get().defaultConversationSettings;
                            // A default set for another model is capped to this one's context; a request's own budget is refused above it.
                            const model = this._engine.inspection;
                            const {kvType, kvTypeV} = conversation.compression;
                            const budget = model != null ? capBudget(model, {budget: current.budget, kvType, kvTypeV}) : current.budget;
                            const {temperature, maxTokens} = conversation;
                            return {policy: current.policy, budget, temperature, maxTokens};
                        },
                        // A request whose client left while it waited for its turn ran nothing: the server logs it as aborted.
                        complete: (request) =>
                            this._completions.complete(request).catch((err: unknown) => {
                                if (err instanceof QueueAbortError) return null;
                                throw err;
                            })
                    }
                });
                this._listening = {host: settings.host, port: settings.port};
            }
        } catch (err) {
            this._error = (err as Error).message;
            throw err;
        } finally {
            this._emit("server:status", this.status());
        }
    }

    private _record(entry: ServerRequestLog): void {
        const index = this._log.findIndex((existing) => existing.id === entry.id);
        if (index >= 0) this._log[index] = entry;
        else {
            this._log.unshift(entry);
            this._log.splice(logSize);
        }
        this._emit("server:request", entry);
    }

    /** The id clients name the loaded model by: its file name without `.gguf`. */
    private _modelId(): string | null {
        const model = this._engine.status.model;
        if (model == null || this._engine.inspection == null) return null;
        return path.basename(model.path).replace(/\.gguf$/i, "");
    }

    private _stored(): Stored {
        const {keyHash: rawKey, ...raw} = (this._db.settings.get(storageKey) ?? {}) as Partial<Stored>;
        const parsed = serverSettingsSchema.safeParse({...defaultServerSettings, ...raw});
        const keyHash = typeof rawKey === "string" && /^[0-9a-f]{64}$/.test(rawKey) ? rawKey : null;
        return {...(parsed.success ? parsed.data : defaultServerSettings), keyHash};
    }

    private _save(stored: Stored): void {
        this._db.settings.set(storageKey, stored);
    }
}
