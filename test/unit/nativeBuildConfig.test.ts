// How native/build.mjs asks node-llama-cpp for a build: portable (its CI mode, the prebuilt binaries' configuration)
// unless --native, and never with CMake options leaking in from the caller's environment.
import {expect, test} from "vitest";
import {sourceBuildInvocation} from "../../native/buildConfig.mjs";

test("the portable build is node-llama-cpp's CI mode: --ciMode, honoured only with CI set", () => {
    const {args, env} = sourceBuildInvocation("false", "portable", {PATH: "/usr/bin"});
    expect(args).toEqual(["source", "build", "--gpu", "false", "--noUsageExample", "--ciMode"]);
    expect(env).toEqual({PATH: "/usr/bin", CI: "true"});
});

test("the native build is node-llama-cpp's source-build default, even inside a CI job", () => {
    const {args, env} = sourceBuildInvocation("cuda", "native", {PATH: "/usr/bin", CI: "true"});
    expect(args).toEqual(["source", "build", "--gpu", "cuda", "--noUsageExample"]);
    expect(env.CI).toBe("false");
});

test("CMake options from the environment do not leak into the build (they would rename its folder)", () => {
    const {env} = sourceBuildInvocation("false", "portable", {NODE_LLAMA_CPP_CMAKE_OPTION_GGML_NATIVE: "ON", HOME: "/root"});
    expect(env).toEqual({HOME: "/root", CI: "true"});
});

test("an unknown configuration is refused", () => {
    expect(() => sourceBuildInvocation("false", "fast" as never)).toThrow("unknown build configuration: fast");
});
