import fs from "node:fs";
import {createRequire} from "node:module";
import path from "node:path";
import type {EngineBackend, EngineBuild} from "../../../preload/contract/engine.js";
import {autoBackendOrder, backendName} from "./engineBuildOrder.js";

/** The stamp native/build.mjs writes into each build folder it makes. */
const stampFileName = "ponder-native.json";

const backends: readonly EngineBackend[] = ["cuda", "vulkan", "metal", "cpu"];

export type ListEngineBuildsOptions = {
    /**
     * node-llama-cpp's local builds folder, where getLlama looks. Defaults to the installed package's `llama/localBuilds`,
     * in a packaged app the copy outside the asar archive (`app.asar.unpacked`), as node-llama-cpp itself resolves it.
     */
    root?: string;
    /** The patch series this code needs (native/seriesHash.mjs): a build stamped with another one is stale. `null` skips the check. */
    seriesHash: string | null;
    /** Defaults to `process.platform`. */
    platform?: NodeJS.Platform;
    /** Defaults to `process.arch`. */
    arch?: string;
};

/**
 * The engine builds present: every folder of node-llama-cpp's local builds with its GPU backend, usable when it has a
 * complete binary (`Release/llama-addon.node` and `buildDone.status`), a `ponder-native.json` stamp of the current patch
 * series, and the name getLlama loads for its backend on this platform; otherwise with the reason it cannot run. Reads
 * files only: no binary is loaded. Sorted in the order auto tries them, then by folder.
 */
export function listEngineBuilds(options: ListEngineBuildsOptions): EngineBuild[] {
    const root = options.root ?? defaultLocalBuildsRoot();
    const platform = options.platform ?? process.platform;
    const arch = options.arch ?? process.arch;
    let folders: fs.Dirent[];
    try {
        folders = fs.readdirSync(root, {withFileTypes: true}).filter((entry) => entry.isDirectory());
    } catch {
        return [];
    }
    const builds = folders.flatMap((entry) => {
        const build = inspectFolder(path.join(root, entry.name), entry.name, options.seriesHash, platform, arch);
        return build == null ? [] : [build];
    });
    const order = [...autoBackendOrder(platform), ...backends.filter((backend) => !autoBackendOrder(platform).includes(backend))];
    return builds.sort(
        (a, b) =>
            order.indexOf(a.backend) - order.indexOf(b.backend) || Number(b.usable) - Number(a.usable) || a.folder.localeCompare(b.folder)
    );
}

/** node-llama-cpp's folder name for a build (getBuildFolderNameForBuildOptions, without custom CMake options). */
function buildFolderName(backend: EngineBackend, platform: NodeJS.Platform = process.platform, arch: string = process.arch): string {
    const name = `${nodeLlamaCppPlatform(platform)}-${arch}`;
    return backend === "cpu" ? name : `${name}-${backend}`;
}

/** node-llama-cpp's `llama/localBuilds`, read where its files are (outside the asar archive in a packaged app). */
export function defaultLocalBuildsRoot(): string {
    const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
    const root = path.join(path.dirname(entry), "..", "llama", "localBuilds");
    const unpacked = root.replace(`.asar${path.sep}`, `.asar.unpacked${path.sep}`);
    return unpacked !== root && fs.existsSync(unpacked) ? unpacked : root;
}

function inspectFolder(
    dir: string,
    folder: string,
    seriesHash: string | null,
    platform: NodeJS.Platform,
    arch: string
): EngineBuild | null {
    const stamp = readJson(path.join(dir, stampFileName));
    const metadata = readJson(path.join(dir, "Release", "_nlcBuildMetadata.json"));
    const stampValue = stamp.kind === "read" ? (stamp.value as Record<string, unknown>) : null;
    const buildOptions = metadata.kind === "read" ? (metadata.value as {buildOptions?: {gpu?: unknown}}).buildOptions : undefined;
    const backend = toBackend(stampValue?.gpu) ?? toBackend(buildOptions?.gpu) ?? backendFromFolder(folder);
    if (backend == null) return null;

    const build: EngineBuild = {
        backend,
        folder,
        usable: false,
        reason: null,
        config: typeof stampValue?.config === "string" ? stampValue.config : null,
        builtAt: typeof stampValue?.builtAt === "string" ? stampValue.builtAt : null
    };
    const expected = buildFolderName(backend, platform, arch);
    if (backend === "metal" && platform !== "darwin") build.reason = "Metal runs on macOS only";
    else if (folder !== expected)
        build.reason = `Built for another platform or with other build options: on this machine the ${backendName(backend)} build is ${expected}`;
    else if (!fs.existsSync(path.join(dir, "Release", "llama-addon.node")))
        build.reason = "Incomplete: it has no binary (Release/llama-addon.node)";
    else if (!fs.existsSync(path.join(dir, "buildDone.status")))
        build.reason = "Incomplete: its build did not finish (no buildDone.status)";
    else if (stamp.kind === "missing")
        build.reason = `Not Ponder's patched build: it has no ${stampFileName} stamp (unpatched; rebuild with npm run build:native)`;
    else if (stamp.kind === "unreadable" || typeof stampValue?.seriesHash !== "string")
        build.reason = `Its ${stampFileName} stamp cannot be read`;
    else if (seriesHash != null && stampValue.seriesHash !== seriesHash)
        build.reason = `Stale: built from patch series ${stampValue.seriesHash}, this version needs ${seriesHash} (rebuild with npm run build:native)`;
    build.usable = build.reason == null;
    return build;
}

type JsonRead = {kind: "read"; value: unknown} | {kind: "missing"} | {kind: "unreadable"};

function readJson(file: string): JsonRead {
    let text: string;
    try {
        text = fs.readFileSync(file, "utf8");
    } catch {
        return {kind: "missing"};
    }
    try {
        const value: unknown = JSON.parse(text);
        return typeof value === "object" && value != null ? {kind: "read", value} : {kind: "unreadable"};
    } catch {
        return {kind: "unreadable"};
    }
}

function toBackend(gpu: unknown): EngineBackend | null {
    if (gpu === false) return "cpu";
    return gpu === "cuda" || gpu === "vulkan" || gpu === "metal" ? gpu : null;
}

/** The backend a folder name says (`linux-x64`, `linux-x64-cuda`, `mac-arm64-metal`, with a CMake-options hash after it). */
function backendFromFolder(folder: string): EngineBackend | null {
    const parts = folder.split("-");
    if (parts.length < 2 || !["linux", "mac", "win"].includes(parts[0]!)) return null;
    return toBackend(parts[2]) ?? "cpu";
}

function nodeLlamaCppPlatform(platform: NodeJS.Platform): string {
    return platform === "darwin" ? "mac" : platform === "win32" ? "win" : platform;
}
