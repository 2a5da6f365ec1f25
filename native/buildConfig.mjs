// How native/build.mjs runs `node-llama-cpp source build` for each build configuration.
//
// "portable" (the default; release builds too) is node-llama-cpp's CI mode, the configuration its own prebuilt binaries
// are built in: GGML_NATIVE=OFF, every CPU variant of the architecture as a dynamically loaded backend
// (GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON; ggml loads the best one the CPU supports at run time), CUDA for a
// fixed list of architectures; with one change, OpenMP kept on (the CI mode turns it off). ggml's own thread pool,
// without OpenMP, spins at every barrier: on a machine whose cores are busy with other work, a spinning thread whose
// partner is descheduled burns its time slice, and generation crawled (native/README.md, "Build configuration").
// node-llama-cpp only honours `--ciMode` when `CI` is set. The OpenMP option makes node-llama-cpp name the folder
// `<platform>-<arch>[-<gpu>]-<hash>`; build.mjs then moves it to the name getLlama looks for (`linux-x64`). Every
// configuration also turns on ggml's RPC backend and builds llama.cpp's rpc-server beside it (rpcCmakeOptions).
// "native" (`--native`) is node-llama-cpp's source-build default: GGML_NATIVE=ON (-march=native), OpenMP, one CPU
// backend linked in; for this machine only, never for an installer (an older CPU dies on an illegal instruction), and
// slower than the stock binary on some CPUs (0.53 to 0.86x on an Intel Xeon with AVX-512 and AMX).

/** @typedef {"portable" | "native"} BuildConfig */

export const buildConfigs = /** @type {const} */ (["portable", "native"]);

/** The configuration a build without `--portable` or `--native` gets. */
export const defaultBuildConfig = "portable";

/** CMake options the portable configuration adds to node-llama-cpp's CI mode. */
export const portableCmakeOptions = /** @type {const} */ ({GGML_OPENMP: "ON"});

/**
 * CMake options every configuration adds: ggml's RPC backend (node-llama-cpp leaves it off) and, through
 * native/patches/0009, llama.cpp's rpc-server built beside the library from the same source (README.md, "RPC servers").
 */
export const rpcCmakeOptions = /** @type {const} */ ({GGML_RPC: "ON", PONDER_RPC_SERVER: "ON"});

/** The rpc-server executable's name in a build's Release/ folder. */
export function rpcServerFileName(platform = process.platform) {
    return platform === "win32" ? "ggml-rpc-server.exe" : "ggml-rpc-server";
}

/**
 * Arguments and environment of `node-llama-cpp source build` for `gpu` and `config`. NODE_LLAMA_CPP_CMAKE_OPTION_*
 * variables of the caller's environment are dropped: they would change the build behind the stamp's back.
 * With `ccacheRoot` (the checkout, when ccache is installed) llama.cpp compiles through ccache (ggml's GGML_CCACHE, which
 * node-llama-cpp turns off unless told), with paths taken relative to the checkout, so that another checkout of the same
 * sources (a CI clone) reuses the objects; the caller's own CCACHE_* settings win.
 * @param {string} gpu
 * @param {BuildConfig} config
 * @param {Record<string, string | undefined>} [env]
 * @param {string | null} [ccacheRoot]
 * @returns {{args: string[], env: Record<string, string | undefined>}}
 */
export function sourceBuildInvocation(gpu, config, env = process.env, ccacheRoot = null) {
    if (!buildConfigs.includes(config)) throw new Error(`unknown build configuration: ${config}`);
    const cleanEnv = Object.fromEntries(Object.entries(env).filter(([key]) => !key.startsWith("NODE_LLAMA_CPP_CMAKE_OPTION_")));
    const args = ["source", "build", "--gpu", gpu, "--noUsageExample"];
    const cmakeOptions = (options) =>
        Object.fromEntries(Object.entries(options).map(([key, value]) => [`NODE_LLAMA_CPP_CMAKE_OPTION_${key}`, value]));
    const ccacheSettings = ccacheRoot == null ? {} : {CCACHE_BASEDIR: ccacheRoot, CCACHE_NOHASHDIR: "true"};
    const common = {...rpcCmakeOptions, ...(ccacheRoot == null ? {} : {GGML_CCACHE: "ON"})};
    if (config === "portable")
        return {
            args: [...args, "--ciMode"],
            env: {...ccacheSettings, ...cleanEnv, ...cmakeOptions({...portableCmakeOptions, ...common}), CI: "true"}
        };
    return {args, env: {...ccacheSettings, ...cleanEnv, ...cmakeOptions(common), CI: "false"}};
}

/**
 * The folder getLlama looks for, for a build node-llama-cpp made (from its `_nlcBuildMetadata.json` build options): its
 * getBuildFolderNameForBuildOptions without custom CMake options, `<platform>-<arch>[-<gpu>]`.
 * @param {{platform: string, arch: string, gpu: string | false}} buildOptions
 */
export function plainFolderName(buildOptions) {
    return [buildOptions.platform, buildOptions.arch, ...(buildOptions.gpu === false ? [] : [String(buildOptions.gpu)])].join("-");
}
