// The engine: its builds, its state, where the model's layers run and why it reads a prompt; the RPC servers it uses.

import type {ModelInfo} from "./models.js";

export type EngineState = "idle" | "loading" | "ready" | "generating" | "error";

/** A llama.cpp backend an engine build runs on. */
export type EngineBackend = "cuda" | "vulkan" | "metal" | "cpu";

/** Which engine build runs: the best one present (`"auto"`: CUDA, then Vulkan, then CPU; Metal, then CPU, on macOS) or one backend. */
export type EngineBuildChoice = "auto" | EngineBackend;

export type BuildInfo = {
    /** `"local"` for the patched build made by `native/build.mjs`, `"prebuilt"` for an unpatched binary. */
    kind: "local" | "prebuilt" | "none";
    /** GPU backend of the loaded build: `false` for CPU only. */
    gpu: "cuda" | "metal" | "vulkan" | false;
    /** Whether Ponder's native patch series is present in the loaded build. */
    patched: boolean;
    llamaCppRelease: string;
    /** Patch-series hash the build was made from, when local. */
    seriesHash: string | null;
    /**
     * The devices the GPU backend of a patched GPU build found on this machine: ggml's name (`"Vulkan0"`) and the
     * driver's (`"llvmpipe (LLVM 15.0.6, 256 bits)"`). Empty when it found none: every layer then runs on the CPU.
     * Absent for a CPU build and for an unpatched one.
     */
    devices?: BuildDevice[];
    /** The build the engine was asked for (the engine-build setting). Defaults to `"auto"`. */
    requested?: EngineBuildChoice;
    /**
     * Why the build running is not the one asked for: the chosen build is missing or failed to load, or auto's first
     * choice failed, and another build runs instead. `null` (or absent) when it is the one asked for.
     */
    fallback?: string | null;
    /** llama.cpp's RPC backend in this engine process: its protocol and the rpc-servers it was started with. */
    rpc?: RpcRuntime;
};

/** A device of this machine that a GPU build runs layers on. */
export type BuildDevice = {name: string; description: string};

/** A device of an rpc-server the engine registered (ggml names them RPC0, RPC1, … in registration order). */
export type RpcDevice = {name: string; description: string; freeBytes: number; totalBytes: number};

/** An rpc-server the engine was asked to use: connected (its devices take offloaded layers) or not, with the reason. */
export type RpcServerState = {endpoint: string; connected: boolean; error: string | null; devices: RpcDevice[]};

export type RpcRuntime = {
    /** The RPC protocol version the build speaks ("7.0.0"); `null` when the build has no RPC backend. */
    protocol: string | null;
    servers: RpcServerState[];
};

/** An rpc-server in the engine settings, with what the last check of it found. */
export type RpcServerEntry = {
    endpoint: string;
    /** Used by the engine: every model loads with its layers split across the enabled servers (GPU layers setting). */
    enabled: boolean;
    /** Said next to an address that is not this machine's (rpc-server has no authentication); `null` for loopback. */
    warning: string | null;
    check: RpcServerCheck | null;
};

export type RpcServerCheck = {
    /** When it was checked (ISO 8601). */
    at: string;
    ok: boolean;
    /** Its protocol version, when it answered HELLO. */
    protocol: string | null;
    /** Why it cannot be used, for a person; `null` when ok. */
    error: string | null;
    /** Its devices' memory, when ok (or, while the engine holds it, as the engine sees it). */
    devices: {freeBytes: number; totalBytes: number}[];
    /** The engine holds its connection: an rpc-server serves one client at a time. */
    inUse: boolean;
};

/** The RPC servers of the engine settings. */
export type RpcServers = {servers: RpcServerEntry[]; protocol: string | null};

/** A patched llama.cpp build found among node-llama-cpp's local builds (`localBuilds/<folder>`). */
export type EngineBuild = {
    backend: EngineBackend;
    /** Its folder under `localBuilds`. */
    folder: string;
    /** Whether the engine can run it: complete, stamped with this app's patch series, named for this platform. */
    usable: boolean;
    /** Why it cannot run, for a person; `null` when usable. */
    reason: string | null;
    /** The build configuration of its stamp (`"native"`, `"portable"`); `null` without a stamp. */
    config: string | null;
    /** When it was built (ISO 8601, from its stamp); `null` without a stamp. */
    builtAt: string | null;
};

/** The engine builds present and the one chosen, as the engine settings show them. */
export type EngineBuilds = {
    choice: EngineBuildChoice;
    /** Every build folder found, usable or not, in the order auto tries them. */
    builds: EngineBuild[];
    /** The backends auto tries on this platform, best first. */
    autoOrder: EngineBackend[];
};

export type EngineStatus = {
    state: EngineState;
    build: BuildInfo | null;
    model: ModelInfo | null;
    /** Progress of a long operation (model loading) from 0 to 1. */
    progress: number | null;
    message: string | null;
    /** Where the loaded model's layers run, once it has a context (patched builds); absent or `null` otherwise. */
    placement?: LayerPlacement | null;
};

/** The device of each repeating layer and of the output layer, by ggml's device name, and where each device is. */
export type LayerPlacement = {
    layers: string[];
    output: string;
    /** Each device named above: `where` is an rpc-server's "host:port", or `null` for this machine. */
    devices: {name: string; where: string | null}[];
};

/**
 * Why the engine reads a prompt into the context before an answer: `message`, mostly the new message (earlier turns
 * already in place, or none); `conversation`, the earlier turns, which the context did not hold (another conversation
 * opened, a model loaded, a pruned prompt read afresh); `settings`, the earlier turns into a context made anew because
 * the budget, a cache type or flash attention changed.
 */
export type ReadReason = "message" | "conversation" | "settings";

export type AppStatus = {
    version: string;
    engine: EngineStatus;
};
