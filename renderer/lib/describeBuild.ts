import type {BuildInfo} from "../../preload/contract.js";

export type BuildDescription = {
    /** What runs: `"CPU (patched)"`, `"CUDA (patched)"`, `"Vulkan (unpatched)"`. */
    label: string;
    /** The device a GPU build runs on, by its driver's name (`"llvmpipe (LLVM 15.0.6, 256 bits)"`); `null` when none is known. */
    device: string | null;
    /** `true` when the engine is not Ponder's patched build, or not the build chosen, or a GPU build found no device. */
    warning: boolean;
    /** Why the build running is not the one chosen (it is missing or did not load), or that it found no device; `null` when neither. */
    note: string | null;
};

const backendNames = {cuda: "CUDA", metal: "Metal", vulkan: "Vulkan"} as const;

/** The backend of a build: `"CPU"`, `"CUDA"`, `"Metal"`, `"Vulkan"`. */
export function backendOf(build: BuildInfo): string {
    return build.gpu === false ? "CPU" : backendNames[build.gpu];
}

/**
 * What the status bar says about the llama.cpp binary running: its backend, whether it is patched, the device it runs on,
 * and any fallback.
 */
export function describeBuild(build: BuildInfo | null): BuildDescription {
    if (build == null || build.kind === "none") return {label: "no engine build", device: null, warning: true, note: null};
    const devices = build.gpu === false ? undefined : build.devices;
    const device = devices != null && devices.length > 0 ? devices.map((each) => each.description).join(", ") : null;
    const noDevice =
        devices != null && devices.length === 0
            ? `The ${backendOf(build)} build found no ${backendOf(build)} device on this machine: every layer runs on the CPU.`
            : null;
    const note = build.fallback ?? noDevice;
    if (build.patched) return {label: `${backendOf(build)} (patched)`, device, warning: note != null, note};
    return {label: `${backendOf(build)} (unpatched${build.kind === "prebuilt" ? " prebuilt" : ""})`, device, warning: true, note};
}
