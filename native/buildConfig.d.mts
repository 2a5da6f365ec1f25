export type BuildConfig = "portable" | "native";
export declare const buildConfigs: readonly BuildConfig[];
export declare function sourceBuildInvocation(
    gpu: string, config: BuildConfig, env?: Record<string, string | undefined>
): {args: string[], env: Record<string, string | undefined>};
