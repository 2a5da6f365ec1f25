import type {BuildInfo, EngineBackend, EngineBuildChoice, EngineBuilds} from "../../preload/contract.js";
import {backendOf} from "./describeBuild.js";

export type EngineBuildOption = {
    value: EngineBuildChoice;
    label: string;
    /** A backend whose builds present cannot run (stale, incomplete, another platform's): shown, not chosen. */
    disabled: boolean;
    /** Why it cannot be chosen; `null` when it can. */
    reason: string | null;
};

const names: Record<EngineBackend, string> = {cuda: "CUDA", vulkan: "Vulkan", metal: "Metal", cpu: "CPU"};

/** `"CUDA"`, `"Vulkan"`, `"Metal"`, `"CPU"`. */
export function backendLabel(backend: EngineBackend): string {
    return names[backend];
}

/**
 * The choices of the engine-build select: auto (with the backends it tries, and the one it runs now), then each backend
 * with a build present, those with no usable build disabled with their reason in the label (a select's options show
 * nothing else).
 */
export function engineBuildOptions(builds: EngineBuilds, running: BuildInfo | null): EngineBuildOption[] {
    // What runs comes first: a narrow select cuts the end of its label, and the order tried matters less.
    const now =
        running != null && running.kind !== "none" && (running.requested ?? "auto") === "auto" ? ` (runs ${backendOf(running)})` : "";
    const options: EngineBuildOption[] = [
        {
            value: "auto",
            label: `Auto${now}: ${builds.autoOrder.map((backend) => names[backend]).join(", then ")}`,
            disabled: false,
            reason: null
        }
    ];
    for (const backend of new Set(builds.builds.map((build) => build.backend))) {
        const present = builds.builds.filter((build) => build.backend === backend);
        const usable = present.find((build) => build.usable);
        const reason = usable != null ? null : (present[0]!.reason ?? "It cannot run");
        options.push({
            value: backend,
            label:
                usable != null
                    ? `${names[backend]} (patched, ${usable.config ?? "unknown"} build)`
                    : `${names[backend]}: unavailable, ${lowerFirst(reason!)}`,
            disabled: usable == null,
            reason
        });
    }
    // A choice stored earlier whose build has gone since: still shown, so the select says what is chosen.
    if (!options.some((option) => option.value === builds.choice))
        options.push({
            value: builds.choice,
            label: `${names[builds.choice as EngineBackend]}: no build present`,
            disabled: true,
            reason: "No build present"
        });
    return options;
}

function lowerFirst(text: string): string {
    return text.charAt(0).toLowerCase() + text.slice(1);
}
