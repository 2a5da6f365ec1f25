export type BuildConfig = "portable" | "native";
export declare const buildConfigs: readonly BuildConfig[];
export declare const defaultBuildConfig: BuildConfig;
export declare const portableCmakeOptions: Readonly<Record<string, string>>;
export declare const rpcCmakeOptions: Readonly<Record<string, string>>;
export declare function rpcServerFileName(platform?: string): string;
export declare function sourceBuildInvocation(
    gpu: string,
    config: BuildConfig,
    env?: Record<string, string | undefined>,
    ccacheRoot?: string | null
): {args: string[]; env: Record<string, string | undefined>};
export declare function plainFolderName(buildOptions: {platform: string; arch: string; gpu: string | false}): string;
