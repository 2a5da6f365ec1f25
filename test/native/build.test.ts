// The loader takes Ponder's patched local build, says so, and refuses anything else with a clear, typed error.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import {createRequire} from "node:module";
import {expect, test} from "vitest";
import {getNativeBuildInfo, loadPatchedLlama, PatchedBuildError} from "../../main/engine/native/loadPatchedLlama.js";
import {PONDER_PATCH_VERSION} from "../../main/engine/native/ponderAddon.js";
import {computeSeriesHash} from "../../native/seriesHash.mjs";
import {getTestLlama} from "./nativeTestUtils.js";

function nodeLlamaCppVersion(): string {
    const require = createRequire(import.meta.url);
    const entry = require.resolve("node-llama-cpp");
    const packageJson = entry.slice(0, entry.lastIndexOf("node-llama-cpp") + "node-llama-cpp".length) + "/package.json";
    return (require(packageJson) as {version: string}).version;
}

test("the loaded engine is the local patched build of the current patch series", async () => {
    const info = getNativeBuildInfo(await getTestLlama());
    expect(info).toMatchObject({kind: "local", gpu: false, patched: true, patchVersion: PONDER_PATCH_VERSION, llamaCppRelease: "v0.5.0"});
    // a build of another series is stale: rebuild with `npm run build:native`
    expect(info.seriesHash).toBe(computeSeriesHash(nodeLlamaCppVersion()));
});

test("a build of another patch series is refused as stale", async () => {
    const error = await loadPatchedLlama({gpu: false, expectedSeriesHash: "0000000000000000"}).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(PatchedBuildError);
    expect((error as PatchedBuildError).code).toBe("PATCHED_BUILD_STALE");
    expect((error as PatchedBuildError).message).toMatch(
        /^Ponder's patched llama\.cpp build is missing or stale: run npm run build:native/
    );
});

test("a missing build is refused, with no fallback to the prebuilt binaries", async () => {
    const error = await loadPatchedLlama({gpu: "vulkan"}).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(PatchedBuildError);
    expect((error as PatchedBuildError).code).toBe("PATCHED_BUILD_MISSING");
});

test("the build's CMake configuration is the one its stamp records: portable (all CPU variants, loaded at run time) or native", async () => {
    await getTestLlama();
    const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
    const llamaDir = path.join(entry.slice(0, entry.lastIndexOf("node-llama-cpp") + "node-llama-cpp".length), "llama");
    const folder = (JSON.parse(fs.readFileSync(path.join(llamaDir, "lastBuild.json"), "utf8")) as {folderName: string}).folderName;
    const release = path.join(llamaDir, "localBuilds", folder, "Release");
    const stamp = JSON.parse(fs.readFileSync(path.join(llamaDir, "localBuilds", folder, "ponder-native.json"), "utf8")) as {config: string};
    const cmakeCache = fs.readFileSync(path.join(llamaDir, "localBuilds", folder, "CMakeCache.txt"), "utf8");
    const libraryPattern = process.platform === "win32" ? /^ggml-cpu-.+\.dll$/ : /^libggml-cpu-.+\.(so|dylib)$/;
    const variants = fs.readdirSync(release).filter((file) => libraryPattern.test(file));
    expect(["portable", "native"]).toContain(stamp.config);
    if (stamp.config === "native") {
        expect(cmakeCache).toMatch(/^GGML_NATIVE:\w+=ON$/m);
        expect(variants).toEqual([]);
        return;
    }
    expect(cmakeCache).toMatch(/^GGML_NATIVE:\w+=OFF$/m);
    expect(cmakeCache).toMatch(/^GGML_BACKEND_DL:\w+=ON$/m);
    expect(cmakeCache).toMatch(/^GGML_CPU_ALL_VARIANTS:\w+=ON$/m);
    // x64: sse42 up to sapphirerapids/zen4; arm64: several armv8/armv9 levels
    expect(variants.length).toBeGreaterThan(3);
    if (process.platform === "linux") {
        // the addon links ggml-base, not a CPU backend: ggml picks the variant when it loads the backends
        const needed = spawnSync("readelf", ["-d", path.join(release, "llama-addon.node")], {encoding: "utf8"}).stdout;
        expect(needed).toMatch(/NEEDED.*libggml-base/);
        expect(needed).not.toMatch(/NEEDED.*libggml-cpu/);
    }
});
