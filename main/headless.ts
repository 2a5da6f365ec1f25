import os from "node:os";
import path from "node:path";
import {parseArgs} from "node:util";
import {createApp} from "./createApp.js";
import {forkEngine} from "./engine/process/forkEngine.js";
import {DataDirLock, DataDirLockedError} from "./DataDirLock.js";
import {createDispatch} from "./ipc/dispatch.js";
import {createHandlers} from "./ipc/handlers.js";
import {LoopbackBridge} from "./ipc/LoopbackBridge.js";

// Headless mode: the main-process services without Electron, the renderer served to a browser over
// loopback. Used by the end-to-end tests and by anyone running Ponder on a machine without a display.
const {values} = parseArgs({
    options: {
        "data-dir": {type: "string", default: path.join(os.homedir(), ".config", "Ponder")},
        renderer: {type: "string", default: path.resolve(import.meta.dirname, "../renderer")},
        port: {type: "string", default: "0"},
        token: {type: "string"},
        model: {type: "string"},
        seed: {type: "string"},
        threads: {type: "string"},
        // The OpenAI-compatible API server, for this run (the app's own setting is left as it is).
        serve: {type: "boolean", default: false},
        "serve-host": {type: "string"},
        "serve-port": {type: "string"}
    }
});

// One process per data directory: a second one would mark the first one's live answer as interrupted.
let lock: DataDirLock;
try {
    lock = DataDirLock.acquire(values["data-dir"]);
} catch (err) {
    if (!(err instanceof DataDirLockedError))
        throw err;
    console.error(err.message);
    process.exit(1);
}

const serve = values.serve
    ? {enabled: true, ...(values["serve-host"] != null ? {host: values["serve-host"]} : {}), ...(values["serve-port"] != null ? {port: Number(values["serve-port"])} : {})}
    : undefined;

let bridge: LoopbackBridge | null = null;
const app = createApp({
    dataDir: values["data-dir"],
    version: process.env.npm_package_version ?? "0.1.0",
    bundledModelPath: path.resolve(import.meta.dirname, "../../resources/models/ponder-demo.gguf"),
    emit: (channel, payload) => bridge?.emit(channel, payload),
    // llama.cpp runs in a process of its own: an abort or a crash there restarts the engine, not this server.
    engine: {spawn: forkEngine({
        entry: path.join(import.meta.dirname, "engineProcess.js"),
        args: values.threads != null ? [`--threads=${values.threads}`] : []
    })},
    chat: {seed: values.seed != null ? Number(values.seed) : undefined},
    server: {override: serve}
});
const dispatch = createDispatch(createHandlers(app, {
    openExternal: async () => {},
    pickModelFile: async () => null
}), (message, err) => console.error(message, err));
bridge = await LoopbackBridge.start({dispatch, staticDir: values.renderer, port: Number(values.port), token: values.token});

if (values.model != null) {
    await app.server.restore();
    const model = await app.models.add(values.model);
    await app.models.load(model.id);
} else
    await app.restoreLastModel();

// One machine-readable line for whoever started us, then a human one.
const server = app.server.status();
console.log(JSON.stringify({ponderHeadless: {url: bridge.url, port: bridge.port, pid: process.pid, api: server.url}}));
console.error(`Ponder is running headless at ${bridge.url}`);
if (server.url != null)
    console.error(`The OpenAI-compatible API listens at ${server.url}${server.hasKey ? " (the API key is required)" : ""}`);
else if (server.error != null)
    console.error(`The API server did not start: ${server.error}`);

let stopping = false;
async function shutdown(): Promise<void> {
    if (stopping)
        return;
    stopping = true;
    await bridge?.dispose();
    await app.dispose();
    lock.dispose();
    process.exit(0);
}
process.on("SIGINT", () => void shutdown());
process.on("SIGTERM", () => void shutdown());
