// The packaging configuration (electron-builder.yml): valid for the electron-builder we pin, Electron fuses set for the
// packaged binary, and the native engine and better-sqlite3 kept outside the asar archive.
import fs from "node:fs";
import path from "node:path";
import {createRequire} from "node:module";
import Ajv from "ajv";
import {expect, test} from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const require = createRequire(import.meta.url);
// electron-builder's own YAML reader
const yaml = require("js-yaml") as {load(text: string): unknown};
const config = yaml.load(fs.readFileSync(path.join(root, "electron-builder.yml"), "utf8")) as Record<string, unknown>;

test("electron-builder.yml is valid for the pinned electron-builder's own schema", () => {
    const schema = JSON.parse(fs.readFileSync(require.resolve("app-builder-lib/scheme.json"), "utf8")) as object;
    const ajv = new Ajv({allErrors: true, strict: false});
    const validate = ajv.compile(schema);
    expect(validate(config), JSON.stringify(validate.errors, null, 2)).toBe(true);
});

test("the packaged binary's fuses close Node entry points and load the app only from its verified asar", () => {
    expect(config.electronFuses).toEqual({
        runAsNode: false,
        enableCookieEncryption: true,
        enableNodeOptionsEnvironmentVariable: false,
        enableNodeCliInspectArguments: false,
        enableEmbeddedAsarIntegrityValidation: true,
        onlyLoadAppFromAsar: true,
        grantFileProtocolExtraPrivileges: false
    });
    // onlyLoadAppFromAsar and the integrity check need an asar archive
    expect(config.asar).not.toBe(false);
});

test("native code stays outside the asar archive", () => {
    expect(config.asarUnpack).toEqual(expect.arrayContaining(["**/node_modules/node-llama-cpp/**", "**/node_modules/better-sqlite3/**"]));
});

test("the package carries the patched engine's binaries, not node-llama-cpp's source, build tree or unpatched prebuilt binaries", () => {
    const {minimatch} = require("minimatch") as {minimatch(file: string, pattern: string, options: {dot: boolean}): boolean};
    const patterns = (config.files as string[]).filter((pattern) => pattern.startsWith("!"));
    const excluded = (file: string) => patterns.some((pattern) => minimatch(file, pattern.slice(1), {dot: true}));
    const build = "node_modules/node-llama-cpp/llama/localBuilds/linux-x64";
    for (const kept of [
        `${build}/Release/llama-addon.node`,
        `${build}/Release/libggml-cpu-haswell.so`,
        `${build}/buildDone.status`,
        `${build}/ponder-native.json`,
        "node_modules/node-llama-cpp/llama/lastBuild.json",
        "node_modules/node-llama-cpp/dist/index.js",
        "node_modules/better-sqlite3/build/Release/better_sqlite3.node"
    ])
        expect(excluded(kept), kept).toBe(false);
    for (const dropped of [
        "node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so",
        "node_modules/node-llama-cpp/llama/llama.cpp/src/llama.cpp",
        "node_modules/node-llama-cpp/llama/gitRelease.bundle",
        `${build}/CMakeFiles/llama-addon.dir/addon/addon.cpp.o`,
        `${build}/bin/libggml-base.so`,
        `${build}/build.ninja`,
        `${build}/.ninja_log`
    ])
        expect(excluded(dropped), dropped).toBe(true);
});
