import {parseArgs} from "node:util";
import type {EngineBuildChoice} from "../preload/contract.js";
import {Engine} from "./engine/runtime/Engine.js";
import {loadRuntime} from "./engine/runtime/loadRuntime.js";
import type {Channel, FromEngine, ToEngine} from "./engine/protocol.js";
import {serveEngine} from "./engine/runtime/serveEngine.js";

// The engine process: node-llama-cpp, the patched llama.cpp and the KV controller, apart from the window and the
// database. Started by the app as an Electron utility process and by headless mode as a forked Node process.
const {values} = parseArgs({options: {threads: {type: "string"}, build: {type: "string"}, rpc: {type: "string"}}, strict: false});
const threads = typeof values.threads === "string" ? Number(values.threads) : undefined;
// The engine build to run (the engine-build setting); EngineProxy passes it on every start.
const builds: readonly EngineBuildChoice[] = ["auto", "cuda", "vulkan", "metal", "cpu"];
const build = builds.find((choice) => choice === values.build) ?? "auto";
// The rpc-servers the engine places offloaded layers on (the engine settings); each is checked before it is registered.
const rpcServers = typeof values.rpc === "string" ? values.rpc.split(",").filter((endpoint) => endpoint !== "") : [];

type ParentPort = {postMessage(message: unknown): void; on(event: "message", listener: (event: {data: unknown}) => void): void};
const parentPort = (process as unknown as {parentPort?: ParentPort}).parentPort;

const channel: Channel<FromEngine, ToEngine> =
    parentPort != null
        ? {
              post: (message) => parentPort.postMessage(message),
              onMessage: (listener) => parentPort.on("message", (event) => listener(event.data as ToEngine))
          }
        : {
              post: (message) => {
                  if (process.connected) process.send!(message);
              },
              onMessage: (listener) => process.on("message", (message) => listener(message as ToEngine))
          };

// Without a parent the engine has no one to answer: it ends with it.
process.on("disconnect", () => process.exit(0));

const engine = new Engine({loadLlama: loadRuntime, runtime: {build, rpcServers}, threads});
// The fault-injection tests make the engine die the ways llama.cpp does (a failed check aborts, a model kills the load);
// nothing else may.
const faults = process.env.PONDER_ENGINE_FAULTS === "1";
let abortOnLoad = false;
if (faults) {
    const load = engine.loadModel.bind(engine);
    engine.loadModel = (...args) => (abortOnLoad ? process.abort() : load(...args));
}
serveEngine(channel, engine, {
    injectFault: faults
        ? (fault) => (fault === "abortOnLoad" ? (abortOnLoad = true) : fault === "abort" ? process.abort() : process.exit(70))
        : undefined,
    onDisposed: () => setImmediate(() => process.exit(0))
});
