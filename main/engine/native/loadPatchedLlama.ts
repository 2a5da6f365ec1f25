import {getLlama, NoBinaryFoundError, type Llama, type LlamaLogLevel, type LlamaOptions} from "node-llama-cpp";
import {PONDER_PATCH_VERSION, ponderBindingsOf} from "./ponderAddon.js";
import type {NativeBuildInfo, NativeGpu} from "./types.js";

export const PATCHED_BUILD_MESSAGE = "Ponder's patched llama.cpp build is missing or stale: run npm run build:native";

export type PatchedBuildErrorCode = "PATCHED_BUILD_MISSING" | "PATCHED_BUILD_STALE";

/** The patched engine cannot be loaded: no local build, or one without Ponder's native API at the needed version. */
export class PatchedBuildError extends Error {
    public readonly code: PatchedBuildErrorCode;
    public readonly buildInfo: NativeBuildInfo | null;

    public constructor(code: PatchedBuildErrorCode, detail: string, buildInfo: NativeBuildInfo | null = null, options?: ErrorOptions) {
        super(`${PATCHED_BUILD_MESSAGE} (${detail})`, options);
        this.name = "PatchedBuildError";
        this.code = code;
        this.buildInfo = buildInfo;
    }
}

export type LoadPatchedLlamaOptions = {
    /** GPU backend of the local build to load; `"auto"` takes the best one present. Defaults to `"auto"`. */
    gpu?: NativeGpu;
    /** node-llama-cpp's log level. Defaults to `"warn"`. */
    logLevel?: LlamaLogLevel | `${LlamaLogLevel}`;
    /** When set, a build made from another patch series counts as stale (see native/seriesHash.mjs). Defaults to `undefined`. */
    expectedSeriesHash?: string;
    /** Other getLlama options (threads, logger...). `build`, `usePrebuiltBinaries` and `gpu` are fixed here. */
    llamaOptions?: Omit<LlamaOptions, "build" | "usePrebuiltBinaries" | "gpu" | "logLevel">;
};

/**
 * Loads Ponder's patched llama.cpp build, made by `native/build.mjs` in node-llama-cpp's local builds, and never anything
 * else: no build from source on the fly, no silent fallback to node-llama-cpp's unpatched prebuilt binaries.
 * Throws a {@link PatchedBuildError} when the build is missing or lacks Ponder's native API.
 */
export async function loadPatchedLlama(options: LoadPatchedLlamaOptions = {}): Promise<Llama> {
    const {gpu = "auto", logLevel = "warn", expectedSeriesHash, llamaOptions = {}} = options;

    let llama: Llama;
    try {
        llama = await getLlama({
            ...llamaOptions,
            gpu,
            logLevel: logLevel as LlamaLogLevel,
            build: "never",
            usePrebuiltBinaries: false,
            progressLogs: false
        });
    } catch (err) {
        if (err instanceof NoBinaryFoundError)
            throw new PatchedBuildError("PATCHED_BUILD_MISSING", `no local build for gpu ${String(gpu)}`, null, {cause: err});
        throw err;
    }

    const buildInfo = getNativeBuildInfo(llama);
    let problem: [PatchedBuildErrorCode, string] | null = null;
    if (buildInfo.kind !== "local") problem = ["PATCHED_BUILD_MISSING", `loaded a ${buildInfo.kind} binary instead of a local build`];
    else if (buildInfo.patchVersion == null) problem = ["PATCHED_BUILD_MISSING", "the local build is unpatched"];
    else if (buildInfo.patchVersion < PONDER_PATCH_VERSION)
        problem = [
            "PATCHED_BUILD_STALE",
            `the build has native API version ${buildInfo.patchVersion}, this code needs ${PONDER_PATCH_VERSION} or later`
        ];
    else if (expectedSeriesHash != null && buildInfo.seriesHash !== expectedSeriesHash)
        problem = ["PATCHED_BUILD_STALE", `the build is of patch series ${buildInfo.seriesHash}, the source has ${expectedSeriesHash}`];

    if (problem != null) {
        await llama.dispose();
        throw new PatchedBuildError(problem[0], problem[1], buildInfo);
    }

    return llama;
}

/** What `llama` is: local or prebuilt, its GPU, and whether (and from which patch series) it is patched. */
export function getNativeBuildInfo(llama: Llama): NativeBuildInfo {
    const bindings = ponderBindingsOf(llama);
    const patchVersion = typeof bindings.ponderPatchVersion === "number" ? bindings.ponderPatchVersion : null;
    return {
        kind: llama.buildType === "localBuild" ? "local" : "prebuilt",
        gpu: llama.gpu,
        patched: patchVersion != null && patchVersion >= PONDER_PATCH_VERSION,
        llamaCppRelease: llama.llamaCppRelease.release,
        seriesHash:
            patchVersion != null && typeof bindings.ponderSeriesHash === "string" && bindings.ponderSeriesHash !== ""
                ? bindings.ponderSeriesHash
                : null,
        patchVersion
    };
}
