// How native/build.mjs asks node-llama-cpp for a build: portable by default (its CI mode, the prebuilt binaries'
// configuration, with OpenMP kept on) unless --native, and never with CMake options leaking in from the caller's
// environment. Every configuration has ggml's RPC backend and llama.cpp's rpc-server.
import {expect, test} from "vitest";
import {defaultBuildConfig, plainFolderName, rpcServerFileName, sourceBuildInvocation} from "../../native/buildConfig.mjs";

const rpcOptions = {NODE_LLAMA_CPP_CMAKE_OPTION_GGML_RPC: "ON", NODE_LLAMA_CPP_CMAKE_OPTION_PONDER_RPC_SERVER: "ON"};

test("the portable build is the default", () => {
    expect(defaultBuildConfig).toBe("portable");
});

test("the portable build is node-llama-cpp's CI mode (--ciMode, honoured only with CI set) with OpenMP on", () => {
    const {args, env} = sourceBuildInvocation("false", "portable", {PATH: "/usr/bin"});
    expect(args).toEqual(["source", "build", "--gpu", "false", "--noUsageExample", "--ciMode"]);
    expect(env).toEqual({PATH: "/usr/bin", CI: "true", ...rpcOptions, NODE_LLAMA_CPP_CMAKE_OPTION_GGML_OPENMP: "ON"});
});

test("every configuration builds the RPC backend and llama.cpp's rpc-server (native/patches/0009)", () => {
    for (const config of ["portable", "native"] as const) expect(sourceBuildInvocation("false", config, {}).env).toMatchObject(rpcOptions);
    expect(rpcServerFileName("linux")).toBe("ggml-rpc-server");
    expect(rpcServerFileName("win32")).toBe("ggml-rpc-server.exe");
});

test("the native build is node-llama-cpp's source-build default, even inside a CI job", () => {
    const {args, env} = sourceBuildInvocation("cuda", "native", {PATH: "/usr/bin", CI: "true"});
    expect(args).toEqual(["source", "build", "--gpu", "cuda", "--noUsageExample"]);
    expect(env.CI).toBe("false");
    expect(
        Object.keys(env)
            .filter((key) => key.startsWith("NODE_LLAMA_CPP_CMAKE_OPTION_"))
            .sort()
    ).toEqual(Object.keys(rpcOptions).sort());
});

test("CMake options from the environment do not leak into the build", () => {
    const {env} = sourceBuildInvocation("false", "portable", {NODE_LLAMA_CPP_CMAKE_OPTION_GGML_NATIVE: "ON", HOME: "/root"});
    expect(env).toEqual({HOME: "/root", CI: "true", ...rpcOptions, NODE_LLAMA_CPP_CMAKE_OPTION_GGML_OPENMP: "ON"});
    expect(sourceBuildInvocation("false", "native", {NODE_LLAMA_CPP_CMAKE_OPTION_GGML_OPENMP: "OFF"}).env).toEqual({
        CI: "false",
        ...rpcOptions
    });
});

test("with ccache, llama.cpp compiles through it with paths relative to the checkout; the caller's CCACHE_* settings win", () => {
    for (const config of ["portable", "native"] as const) {
        const {env} = sourceBuildInvocation("false", config, {PATH: "/usr/bin"}, "/src/ponder");
        expect(env).toMatchObject({NODE_LLAMA_CPP_CMAKE_OPTION_GGML_CCACHE: "ON", CCACHE_BASEDIR: "/src/ponder", CCACHE_NOHASHDIR: "true"});
    }
    expect(sourceBuildInvocation("false", "portable", {CCACHE_BASEDIR: "/elsewhere"}, "/src/ponder").env.CCACHE_BASEDIR).toBe("/elsewhere");
    // without ccache: no option and no settings (the portable and native environments above are exact)
    const {env} = sourceBuildInvocation("false", "portable", {PATH: "/usr/bin"});
    expect(Object.keys(env).filter((key) => key.includes("CCACHE"))).toEqual([]);
});

test("a build with custom options moves to the folder getLlama looks for", () => {
    expect(plainFolderName({platform: "linux", arch: "x64", gpu: false})).toBe("linux-x64");
    expect(plainFolderName({platform: "linux", arch: "x64", gpu: "cuda"})).toBe("linux-x64-cuda");
    expect(plainFolderName({platform: "mac", arch: "arm64", gpu: "metal"})).toBe("mac-arm64-metal");
    expect(plainFolderName({platform: "win", arch: "x64", gpu: "vulkan"})).toBe("win-x64-vulkan");
});

test("an unknown configuration is refused", () => {
    expect(() => sourceBuildInvocation("false", "fast" as never)).toThrow("unknown build configuration: fast");
});
