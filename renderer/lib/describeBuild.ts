import type {BuildInfo} from "../../preload/contract.js";

export type BuildDescription = {label: string, /** `true` when the engine is not Ponder's patched build. */ warning: boolean};

const gpuNames = {cuda: "CUDA", metal: "Metal", vulkan: "Vulkan"} as const;

/** `"patched local build · CPU"`, `"prebuilt (unpatched)"`, ...: what the status bar says about the llama.cpp binary. */
export function describeBuild(build: BuildInfo | null): BuildDescription {
    if (build == null || build.kind === "none")
        return {label: "no engine build", warning: true};
    const backend = build.gpu === false ? "CPU" : gpuNames[build.gpu];
    if (build.kind === "local")
        return build.patched
            ? {label: `patched local build · ${backend}`, warning: false}
            : {label: `local build (unpatched) · ${backend}`, warning: true};
    return build.patched
        ? {label: `prebuilt (patched) · ${backend}`, warning: false}
        : {label: "prebuilt (unpatched)", warning: true};
}
