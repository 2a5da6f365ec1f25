// How native/build.mjs runs `node-llama-cpp source build` for each build configuration.
//
// "portable" (`--portable`, release builds) is node-llama-cpp's CI mode, the configuration its own prebuilt binaries are built in:
// GGML_NATIVE=OFF, every CPU variant of the architecture as a dynamically loaded backend (GGML_BACKEND_DL=ON,
// GGML_CPU_ALL_VARIANTS=ON; ggml loads the best one the CPU supports at run time), no OpenMP, CUDA for a fixed list of
// architectures. node-llama-cpp only honours `--ciMode` when `CI` is set, and the mode adds no custom CMake options, so
// the build folder keeps the name getLlama looks for (`linux-x64`, not `linux-x64-<hash>`).
// "native" (the default) is node-llama-cpp's source-build default: GGML_NATIVE=ON (-march=native), OpenMP, one CPU
// backend linked in; for this machine only, never for an installer (an older CPU dies on an illegal instruction).

/** @typedef {"portable" | "native"} BuildConfig */

export const buildConfigs = /** @type {const} */ (["portable", "native"]);

/**
 * Arguments and environment of `node-llama-cpp source build` for `gpu` and `config`. NODE_LLAMA_CPP_CMAKE_OPTION_*
 * variables of the caller's environment are dropped: they would change the build and rename its folder behind the
 * stamp's back.
 * @param {string} gpu
 * @param {BuildConfig} config
 * @param {Record<string, string | undefined>} [env]
 * @returns {{args: string[], env: Record<string, string | undefined>}}
 */
export function sourceBuildInvocation(gpu, config, env = process.env) {
    if (!buildConfigs.includes(config))
        throw new Error(`unknown build configuration: ${config}`);
    const cleanEnv = Object.fromEntries(Object.entries(env).filter(([key]) => !key.startsWith("NODE_LLAMA_CPP_CMAKE_OPTION_")));
    const args = ["source", "build", "--gpu", gpu, "--noUsageExample"];
    if (config === "portable")
        return {args: [...args, "--ciMode"], env: {...cleanEnv, CI: "true"}};
    return {args, env: {...cleanEnv, CI: "false"}};
}
