import path from "node:path";
import {AppDatabase} from "./db/AppDatabase.js";
import type {EngineApi} from "./engine/EngineApi.js";
import {EngineProxy, type SpawnEngine} from "./engine/host/EngineProxy.js";
import {AppServices, type AppServicesOptions} from "./services/AppServices.js";
import {readRuntimeOptions} from "./services/RpcServerService.js";
import type {Emit} from "./services/types.js";
import {StateStore} from "./services/StateStore.js";

export type CreateAppOptions = {
    /** Folder for the database (the app's user-data folder). */
    dataDir: string;
    version: string;
    emit: Emit;
    /**
     * Where the engine runs: a process of its own (`spawn`: the app and headless mode, so llama.cpp never runs beside
     * the database and the window), or an engine object made here (`local`: tests of the services on a real engine).
     */
    engine: {spawn: SpawnEngine} | {local: () => EngineApi};
    /** The demo model shipped with the app. */
    bundledModelPath?: string;
    chat?: AppServicesOptions["chat"];
    server?: AppServicesOptions["server"];
    /** Settings of the retention calibrations (`<dataDir>/calibration` holds their work). Defaults to calibrateRetention's. */
    calibration?: AppServicesOptions["calibration"];
};

/** The composition root shared by the Electron app and the headless server. */
export function createApp(options: CreateAppOptions): AppServices {
    const db = new AppDatabase(path.join(options.dataDir, "ponder.sqlite"));
    let services: AppServices | null = null;
    const engine: EngineApi =
        "spawn" in options.engine
            ? new EngineProxy({
                  spawn: options.engine.spawn,
                  // The engine build and the rpc-servers chosen in the settings; changing either restarts the engine
                  // (EngineBuildService, RpcServerService).
                  runtime: readRuntimeOptions(db),
                  onModelCrashed: (model) => services?.models.markCrashed(model.id)
              })
            : options.engine.local();
    services = new AppServices(db, engine, options.emit, {
        version: options.version,
        modelsDir: path.join(options.dataDir, "models"),
        bundledModelPath: options.bundledModelPath,
        chat: options.chat,
        states: new StateStore(path.join(options.dataDir, "states")),
        server: options.server,
        calibration: {workDir: path.join(options.dataDir, "calibration"), ...options.calibration}
    });
    return services;
}
