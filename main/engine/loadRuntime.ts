import {getLlama} from "node-llama-cpp";
import type {BuildInfo} from "../../preload/contract.js";
import type {LlamaLoader} from "./Engine.js";

/**
 * Loads the llama.cpp runtime and says which build it is. Interim loader: it reports the build as
 * found; the patched loader in `native/` replaces it.
 */
export const loadRuntime: LlamaLoader = async () => {
    const llama = await getLlama({gpu: false, build: "never", logLevel: "error" as never});
    const build: BuildInfo = {
        kind: llama.buildType === "localBuild" ? "local" : "prebuilt",
        gpu: llama.gpu,
        patched: false,
        llamaCppRelease: llama.llamaCppRelease.release,
        seriesHash: null
    };
    return {llama, build};
};
