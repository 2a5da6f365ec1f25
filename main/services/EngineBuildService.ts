import {z} from "zod";
import type {EngineBuild, EngineBuildChoice, EngineBuilds} from "../../preload/contract.js";
import {AppError} from "../AppError.js";
import type {AppDatabase} from "../db/AppDatabase.js";
import type {EngineApi} from "../engine/EngineApi.js";
import {currentSeriesHash} from "../engine/builds/currentSeriesHash.js";
import {autoBackendOrder, engineBuildOrder} from "../engine/builds/engineBuildOrder.js";
import {listEngineBuilds} from "../engine/builds/listEngineBuilds.js";
import type {GenerationQueue} from "./GenerationQueue.js";
import {readEnabledRpcServers} from "./rpcServerSettings.js";

const storageKey = "engine";

export const engineBuildChoiceSchema = z.enum(["auto", "cuda", "vulkan", "metal", "cpu"], {
    error: "The engine build must be one of auto, cuda, vulkan, metal or cpu"
}) satisfies z.ZodType<EngineBuildChoice>;

/** The stored engine-build choice; `"auto"` when none is stored or the stored one is damaged. */
export function readEngineBuildChoice(db: AppDatabase): EngineBuildChoice {
    const stored = db.settings.get(storageKey) as {build?: unknown} | undefined;
    const parsed = engineBuildChoiceSchema.safeParse(stored?.build);
    return parsed.success ? parsed.data : "auto";
}

export type EngineBuildServiceOptions = {
    /** Lists the engine builds present. Defaults to node-llama-cpp's local builds, checked against this version's patch series. */
    list?: () => Promise<EngineBuild[]>;
    /** Defaults to `process.platform`. */
    platform?: NodeJS.Platform;
};

/**
 * The engine-build setting: which patched llama.cpp build the engine runs (auto, or one backend), stored in the
 * settings table, with the builds present for the settings to offer. Changing it restarts the engine on that build.
 */
export class EngineBuildService {
    private readonly _list: () => Promise<EngineBuild[]>;
    private readonly _platform: NodeJS.Platform;

    constructor(
        private readonly _db: AppDatabase,
        private readonly _engine: EngineApi,
        private readonly _queue: GenerationQueue,
        options: EngineBuildServiceOptions = {}
    ) {
        this._list = options.list ?? (async () => listEngineBuilds({seriesHash: await currentSeriesHash()}));
        this._platform = options.platform ?? process.platform;
    }

    choice(): EngineBuildChoice {
        return readEngineBuildChoice(this._db);
    }

    async get(): Promise<EngineBuilds> {
        return {choice: this.choice(), builds: await this._list(), autoOrder: autoBackendOrder(this._platform)};
    }

    /**
     * Stores `choice` and restarts the engine with it (the model loaded again). A backend without a usable build is refused,
     * as is a change while an answer is being written; no answer starts until the engine is back.
     */
    async set(choice: EngineBuildChoice): Promise<EngineBuilds> {
        const builds = await this._list();
        const {problem} = engineBuildOrder(builds, choice, {platform: this._platform});
        if (problem != null) throw new AppError("BAD_REQUEST", `${problem}: it cannot be chosen`);
        if (this._queue.running) throw new AppError("BUSY", "Stop the current answer before changing the engine build");
        const release = await this._queue.acquire();
        try {
            this._db.settings.set(storageKey, {build: choice});
            await this._engine.restart({build: choice, rpcServers: readEnabledRpcServers(this._db)});
        } finally {
            release();
        }
        return {choice, builds, autoOrder: autoBackendOrder(this._platform)};
    }
}
