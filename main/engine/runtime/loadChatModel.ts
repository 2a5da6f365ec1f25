import {resolveChatWrapper, type Llama, type LlamaModel} from "node-llama-cpp";
import os from "node:os";
import type {BuildInfo} from "../../../preload/contract/engine.js";
import type {LoadOptions, ModelInspection} from "../EngineApi.js";
import type {LoadedModel} from "./engineState.js";
import {gpuOffload} from "../../kv/gpuOffload.js";
import {hasRpcDevices} from "../rpc/rpcEndpoint.js";

/**
 * Loads the model `inspection` describes with its chat wrapper; a model that fails to load is disposed. `onProgress` hears
 * node-llama-cpp's load progress, which may come after the load resolved.
 */
export async function loadChatModel(
    llama: Llama,
    build: BuildInfo | null,
    inspection: ModelInspection,
    options: LoadOptions,
    onProgress: (progress: number) => void
): Promise<LoadedModel> {
    let model: LlamaModel | null = null;
    try {
        model = await llama.loadModel({
            modelPath: inspection.path,
            gpuLayers: await gpuLayers(llama, build, inspection, options),
            onLoadProgress: onProgress
        });
        // Resolving the chat wrapper renders the template several times: once per model, not per context.
        const chatWrapper = resolveChatWrapper(model);
        return {model, inspection, chatWrapper, options, openingTokens: new Map()};
    } catch (err) {
        await model?.dispose();
        throw err;
    }
}

/**
 * The GPU layers setting as node-llama-cpp takes it. A CPU build with no rpc-server has no device to offload to: every
 * layer runs on the CPU whatever the setting (node-llama-cpp would refuse `"max"` or a layer count there as "Not enough
 * VRAM", so a model set up on a GPU machine would not load). On a CPU build with rpc-servers, the remote devices are
 * where layers go, but node-llama-cpp's `"auto"` fit offloads nothing without a local GPU: `"auto"` is then the most
 * layers whose weights fit the servers' free memory (the context's own fit is checked when it is created).
 */
async function gpuLayers(
    llama: Llama,
    build: BuildInfo | null,
    inspection: ModelInspection,
    options: LoadOptions
): Promise<LoadOptions["gpuLayers"]> {
    const layers = options.gpuLayers ?? "auto";
    if (build == null || build.gpu !== false) return layers;
    if (!hasRpcDevices(build.rpc)) return layers === "auto" ? layers : 0;
    if (layers !== "auto") return layers;
    const free = (await llama.getVramState()).free;
    return gpuOffload(inspection, {
        gpuLayers: "auto",
        kvBytes: 0,
        computeBytes: 0,
        modelLoaded: false,
        freeVramBytes: free,
        freeRamBytes: os.freemem()
    }).gpuLayers;
}
