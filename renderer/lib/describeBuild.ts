import type {BuildInfo} from "../../preload/contract.js";

export type BuildDescription = {
    /** What runs: `"CPU (patched)"`, `"CUDA (patched)"`, `"Vulkan (unpatched)"`. */
    label: string,
    /** `true` when the engine is not Ponder's patched build, or not the build chosen. */
    warning: boolean,
    /** Why the build running is not the one chosen (it is missing or did not load); `null` when it is. */
    note: string | null
};

const backendNames = {cuda: "CUDA", metal: "Metal", vulkan: "Vulkan"} as const;

/** The backend of a build: `"CPU"`, `"CUDA"`, `"Metal"`, `"Vulkan"`. */
export function backendOf(build: BuildInfo): string {
    return build.gpu === false ? "CPU" : backendNames[build.gpu];
}

/** What the status bar says about the llama.cpp binary running: its backend, whether it is patched, and any fallback. */
export function describeBuild(build: BuildInfo | null): BuildDescription {
    if (build == null || build.kind === "none")
        return {label: "no engine build", warning: true, note: null};
    const note = build.fallback ?? null;
    if (build.patched)
        return {label: `${backendOf(build)} (patched)`, warning: note != null, note};
    return {label: `${backendOf(build)} (unpatched${build.kind === "prebuilt" ? " prebuilt" : ""})`, warning: true, note};
}
