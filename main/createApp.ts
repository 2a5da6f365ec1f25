import path from "node:path";
import {AppDatabase} from "./db/AppDatabase.js";
import {Engine, type LlamaLoader} from "./engine/Engine.js";
import {loadRuntime} from "./engine/loadRuntime.js";
import {AppServices, type AppServicesOptions} from "./services/AppServices.js";
import type {Emit} from "./services/types.js";

export type CreateAppOptions = {
    /** Folder for the database (the app's user-data folder). */
    dataDir: string,
    version: string,
    emit: Emit,
    loadLlama?: LlamaLoader,
    /** The demo model shipped with the app. */
    bundledModelPath?: string,
    /** Threads per context; `0` lets llama.cpp decide. */
    threads?: number,
    chat?: AppServicesOptions["chat"],
    server?: AppServicesOptions["server"]
};

/** The composition root shared by the Electron app and the headless server. */
export function createApp(options: CreateAppOptions): AppServices {
    const db = new AppDatabase(path.join(options.dataDir, "ponder.sqlite"));
    const engine = new Engine({loadLlama: options.loadLlama ?? loadRuntime, threads: options.threads});
    return new AppServices(db, engine, options.emit, {
        version: options.version,
        modelsDir: path.join(options.dataDir, "models"),
        bundledModelPath: options.bundledModelPath,
        chat: options.chat,
        server: options.server
    });
}
