import path from "node:path";
import {createApp} from "./createApp.js";
import {FIRST_MODEL_FILE} from "./demo/shippedModelSample.js";
import {forkEngine} from "./engine/host/forkEngine.js";
import {DataDirLock, DataDirLockedError} from "./DataDirLock.js";
import {checkHeadlessModel, headlessUsage, parseHeadlessArgs} from "./headlessArgs.js";
import {createDispatch} from "./ipc/dispatch.js";
import {createHandlers} from "./ipc/handlers.js";
import {LoopbackBridge} from "./ipc/LoopbackBridge.js";

// Headless mode: the main-process services without Electron, the renderer served to a browser over
// loopback. Used by the end-to-end tests and by anyone running Ponder on a machine without a display.
const parsed = parseHeadlessArgs(process.argv.slice(2), {renderer: path.resolve(import.meta.dirname, "../renderer")});
if ("help" in parsed) {
    process.stdout.write(headlessUsage);
    process.exit(0);
}
if ("error" in parsed) {
    process.stderr.write(`${parsed.error}\n\n${headlessUsage}`);
    process.exit(2);
}
const args = parsed.args;
// A model that is missing or not GGUF is named in one line before anything starts.
const modelProblem = args.model != null ? await checkHeadlessModel(args.model) : null;
if (modelProblem != null) {
    console.error(modelProblem);
    process.exit(1);
}

// One process per data directory: a second one would mark the first one's live answer as interrupted.
let lock: DataDirLock;
try {
    lock = DataDirLock.acquire(args.dataDir);
} catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    console.error(err.message);
    process.exit(1);
}

const serve = args.serve
    ? {enabled: true, ...(args.serveHost != null ? {host: args.serveHost} : {}), ...(args.servePort != null ? {port: args.servePort} : {})}
    : undefined;

let bridge: LoopbackBridge | null = null;
const app = createApp({
    dataDir: args.dataDir,
    version: process.env.npm_package_version ?? "0.1.0",
    bundledModelPath: path.resolve(import.meta.dirname, "../../resources/models", FIRST_MODEL_FILE),
    emit: (channel, payload) => bridge?.emit(channel, payload),
    // llama.cpp runs in a process of its own: an abort or a crash there restarts the engine, not this server.
    engine: {
        spawn: forkEngine({
            entry: path.join(import.meta.dirname, "engineProcess.js"),
            args: args.threads != null ? [`--threads=${args.threads}`] : []
        })
    },
    chat: {seed: args.seed},
    server: {override: serve},
    ...(args.calibration != null ? {calibration: {settings: args.calibration}} : {})
});
const dispatch = createDispatch(
    createHandlers(app, {
        openExternal: async () => {},
        pickModelFile: async () => null
    }),
    (message, err) => console.error(message, err)
);
bridge = await LoopbackBridge.start({dispatch, staticDir: args.renderer, port: args.port, token: args.token});

if (args.model != null) {
    await app.server.restore();
    try {
        const model = await app.models.add(args.model);
        await app.models.load(model.id);
    } catch (err) {
        // one line, as the checks above: the model passed the header check but could not be added or loaded
        console.error(`--model: ${(err as Error).message}`);
        await bridge.dispose();
        await app.dispose();
        lock.dispose();
        process.exit(1);
    }
} else await app.restoreLastModel();

// One machine-readable line for whoever started us, then a human one.
const server = app.server.status();
console.log(JSON.stringify({ponderHeadless: {url: bridge.url, port: bridge.port, pid: process.pid, api: server.url}}));
console.error(`Ponder is running headless at ${bridge.url}`);
if (server.url != null)
    console.error(`The OpenAI-compatible API listens at ${server.url}${server.hasKey ? " (the API key is required)" : ""}`);
else if (server.error != null) console.error(`The API server did not start: ${server.error}`);

let stopping = false;
async function shutdown(): Promise<void> {
    if (stopping) return;
    stopping = true;
    await bridge?.dispose();
    await app.dispose();
    lock.dispose();
    process.exit(0);
}
process.on("SIGINT", () => void shutdown());
process.on("SIGTERM", () => void shutdown());
