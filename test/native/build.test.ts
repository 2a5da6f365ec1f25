// The loader takes Ponder's patched local build, says so, and refuses anything else with a clear, typed error.
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
    expect((error as PatchedBuildError).message).toMatch(/^Ponder's patched llama\.cpp build is missing or stale: run npm run build:native/);
});

test("a missing build is refused, with no fallback to the prebuilt binaries", async () => {
    const error = await loadPatchedLlama({gpu: "vulkan"}).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(PatchedBuildError);
    expect((error as PatchedBuildError).code).toBe("PATCHED_BUILD_MISSING");
});
