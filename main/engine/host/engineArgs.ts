import type {RuntimeOptions} from "../EngineApi.js";

/** The engine process's command-line arguments for `runtime` (main/engineProcess.ts reads them). */
export function engineArgs(runtime: RuntimeOptions): string[] {
    return [
        ...(runtime.build != null ? [`--build=${runtime.build}`] : []),
        ...(runtime.rpcServers != null && runtime.rpcServers.length > 0 ? [`--rpc=${runtime.rpcServers.join(",")}`] : [])
    ];
}
