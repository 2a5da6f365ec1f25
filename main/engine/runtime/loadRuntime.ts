import {getLlama, getLlamaGpuTypes, type Llama} from "node-llama-cpp";
import type {BuildDevice, BuildInfo, EngineBackend, EngineBuildChoice} from "../../../preload/contract/engine.js";
import type {LlamaLoader} from "./EngineRuntime.js";
import type {RuntimeOptions} from "../EngineApi.js";
import {currentSeriesHash} from "../builds/currentSeriesHash.js";
import {backendName, engineBuildOrder} from "../builds/engineBuildOrder.js";
import {getNativeBuildInfo, loadPatchedLlama, PatchedBuildError} from "../native/loadPatchedLlama.js";
import {listEngineBuilds} from "../builds/listEngineBuilds.js";
import {ponderBindingsOf} from "../native/ponderAddon.js";
import type {NativeGpu} from "../native/types.js";

/**
 * Loads Ponder's patched llama.cpp build chosen by `options.build`: with `"auto"` the best usable build present (CUDA,
 * then Vulkan, then CPU; Metal on macOS; GPU builds only where node-llama-cpp finds their driver), with one backend
 * that build. When it is missing or fails to load, the next patched build in auto's order runs, and the build info
 * says why (`fallback`). When no patched build loads, Ponder still chats with Full KV on whatever build node-llama-cpp
 * has, and says so: never unpatched in silence.
 */
export const loadRuntime = (async (options: RuntimeOptions = {}) => {
    const requested: EngineBuildChoice = options.build ?? "auto";
    const seriesHash = await currentSeriesHash();
    const builds = listEngineBuilds({seriesHash});
    const supported = requested === "auto" ? (await getLlamaGpuTypes("supported")).map(toBackend) : null;
    const {candidates, problem} = engineBuildOrder(builds, requested, {platform: process.platform, supported});

    const failures = problem != null ? [problem] : [];
    for (const candidate of candidates) {
        const name = backendName(candidate.backend);
        const loaded = await loadOne(toGpu(candidate.backend), seriesHash);
        if ("error" in loaded) {
            failures.push(`the ${name} build could not be loaded (${loaded.error})`);
            continue;
        }
        const fallback = failures.length > 0 ? `${sentence(failures.join("; "))}: running the ${name} build instead.` : null;
        return {llama: loaded.llama, build: {...toBuildInfo(loaded.llama), requested, fallback}, warning: fallback ?? undefined};
    }

    const llama = await getLlama({gpu: "auto", build: "never", logLevel: "error" as never, progressLogs: false});
    const why = failures.length > 0 ? sentence(failures.join("; ")) : "No patched llama.cpp build is present (run npm run build:native)";
    const fallback = `${why}. Running unpatched: Full KV only, compression is off.`;
    return {llama, build: {...toBuildInfo(llama), requested, fallback}, warning: fallback};
}) satisfies LlamaLoader;

/**
 * Loads the patched build of one backend. node-llama-cpp reports why a present binary did not load (a missing driver
 * library, an incompatible binary) on the console only and then finds "no binary": its words are kept for the reason.
 */
async function loadOne(gpu: NativeGpu, seriesHash: string | null): Promise<{llama: Llama} | {error: string}> {
    const said: string[] = [];
    const original = {error: console.error, warn: console.warn};
    const keep =
        (write: (...args: unknown[]) => void) =>
        (...args: unknown[]) => {
            said.push(
                args
                    .map((arg) => (arg instanceof Error ? arg.message : String(arg)))
                    .join(" ")
                    .replace(/^\[node-llama-cpp\]\s*/, "")
                    .trim()
            );
            write(...args);
        };
    console.error = keep(original.error);
    console.warn = keep(original.warn);
    try {
        const llama = await loadPatchedLlama({gpu, logLevel: "error", expectedSeriesHash: seriesHash ?? undefined});
        if (llama.gpu !== gpu) {
            await llama.dispose();
            return {error: `node-llama-cpp loaded a ${String(llama.gpu || "CPU")} binary instead`};
        }
        return {llama};
    } catch (err) {
        // "No local build" after node-llama-cpp failed to load one: its own words say why.
        const noBinary = err instanceof PatchedBuildError && err.buildInfo == null;
        return {error: noBinary && said.length > 0 ? said.at(-1)! : (err as Error).message};
    } finally {
        console.error = original.error;
        console.warn = original.warn;
    }
}

function toBuildInfo(llama: Llama): BuildInfo {
    const info = getNativeBuildInfo(llama);
    const build: BuildInfo = {
        kind: info.kind,
        gpu: info.gpu,
        patched: info.patched,
        llamaCppRelease: info.llamaCppRelease,
        seriesHash: info.seriesHash
    };
    const devices = info.gpu !== false && info.patched ? localGpuDevices(llama) : null;
    return devices == null ? build : {...build, devices};
}

/**
 * The GPU devices of this machine the loaded build registered (patch 0010's device list, before any rpc-server is added),
 * by ggml's name and the driver's description. ggml's Vulkan backend leaves out a device of type CPU (Mesa's lavapipe)
 * unless GGML_VK_VISIBLE_DEVICES names it: the list is then empty.
 */
function localGpuDevices(llama: Llama): BuildDevice[] | null {
    const list = ponderBindingsOf(llama).ponderListDevices;
    if (list == null) return null;
    return list()
        .filter((device) => (device.type === "gpu" || device.type === "igpu") && !device.backend.startsWith("RPC"))
        .map((device) => ({name: device.name, description: device.description}));
}

function toBackend(gpu: NativeGpu): EngineBackend {
    return gpu === false || gpu === "auto" ? "cpu" : gpu;
}

function toGpu(backend: EngineBackend): Exclude<NativeGpu, "auto"> {
    return backend === "cpu" ? false : backend;
}

function sentence(text: string): string {
    return text.charAt(0).toUpperCase() + text.slice(1);
}
