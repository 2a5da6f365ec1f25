import {getLlama} from "node-llama-cpp";
import type {LlamaLoader} from "./Engine.js";
import {getNativeBuildInfo, loadPatchedLlama, PatchedBuildError} from "./native/loadPatchedLlama.js";

/**
 * Loads Ponder's patched llama.cpp build. When it is missing or stale, Ponder still chats with Full KV on
 * whatever build node-llama-cpp has, and says so in the status bar: never unpatched in silence.
 */
export const loadRuntime: LlamaLoader = async () => {
    try {
        const llama = await loadPatchedLlama({gpu: "auto", logLevel: "error"});
        return {llama, build: toBuildInfo(getNativeBuildInfo(llama))};
    } catch (err) {
        if (!(err instanceof PatchedBuildError))
            throw err;
        const llama = await getLlama({gpu: "auto", build: "never", logLevel: "error" as never, progressLogs: false});
        return {
            llama,
            build: toBuildInfo(getNativeBuildInfo(llama)),
            warning: `${err.message}. Running unpatched: Full KV only, compression is off.`
        };
    }
};

function toBuildInfo(info: ReturnType<typeof getNativeBuildInfo>) {
    return {kind: info.kind, gpu: info.gpu, patched: info.patched, llamaCppRelease: info.llamaCppRelease, seriesHash: info.seriesHash};
}
