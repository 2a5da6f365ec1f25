import type {EngineBackend, EngineBuild, EngineBuildChoice} from "../../../preload/contract/engine.js";

/** The backends auto tries, best first: Metal, then CPU, on macOS; CUDA, then Vulkan, then CPU elsewhere. */
export function autoBackendOrder(platform: NodeJS.Platform): EngineBackend[] {
    return platform === "darwin" ? ["metal", "cpu"] : ["cuda", "vulkan", "cpu"];
}

export type EngineBuildOrderOptions = {
    platform: NodeJS.Platform;
    /**
     * The GPU backends this machine has drivers for (node-llama-cpp's detection); auto passes over builds of others
     * without trying them. `null` tries every build present. Defaults to `null`.
     */
    supported?: readonly EngineBackend[] | null;
};

export type EngineBuildPlan = {
    /** The usable builds to try, in order: the chosen one first, then auto's order. */
    candidates: EngineBuild[];
    /** Why the chosen backend is not the first candidate (missing, unusable); `null` when it is, or with auto. */
    problem: string | null;
};

/**
 * Which builds to load, in which order, for an engine-build choice: with `"auto"`, the usable builds in
 * {@link autoBackendOrder} (GPU builds without a driver left out); with one backend, that backend's build, then the others
 * in auto's order as fallbacks, which the loader reports as such. Pure: the listing and the detection come in.
 */
export function engineBuildOrder(
    builds: readonly EngineBuild[],
    choice: EngineBuildChoice,
    options: EngineBuildOrderOptions
): EngineBuildPlan {
    const usable = (backend: EngineBackend) => builds.find((build) => build.backend === backend && build.usable);
    const supported = options.supported ?? null;
    const auto = autoBackendOrder(options.platform).flatMap((backend) => {
        const build = usable(backend);
        if (build == null || (backend !== "cpu" && supported != null && !supported.includes(backend))) return [];
        return [build];
    });
    if (choice === "auto") return {candidates: auto, problem: null};

    const chosen = usable(choice);
    const rest = auto.filter((build) => build.backend !== choice);
    if (chosen != null) return {candidates: [chosen, ...rest], problem: null};
    const present = builds.find((build) => build.backend === choice);
    return {
        candidates: rest,
        problem:
            present != null
                ? `The ${backendName(choice)} build cannot be used: ${lowerFirst(present.reason ?? "unusable")}`
                : `No ${backendName(choice)} build is present`
    };
}

/** `"CUDA"`, `"Vulkan"`, `"Metal"`, `"CPU"`. */
export function backendName(backend: EngineBackend): string {
    return {cuda: "CUDA", vulkan: "Vulkan", metal: "Metal", cpu: "CPU"}[backend];
}

function lowerFirst(text: string): string {
    return text.charAt(0).toLowerCase() + text.slice(1);
}
