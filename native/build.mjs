#!/usr/bin/env node
// Builds Ponder's patched llama.cpp engine: node-llama-cpp's llama.cpp source, plus native/patches/series, compiled into
// node-llama-cpp's local build folder (node_modules/node-llama-cpp/llama/localBuilds/<platform>-<arch>[-<gpu>]/), where
// getLlama({build: "never", usePrebuiltBinaries: false}) finds it.
//
//   node native/build.mjs [--gpu auto|false|cuda|metal|vulkan] [--portable | --native] [--if-stale] [--force] [--unpatched]
//
// --portable  (the default) build as node-llama-cpp builds its own prebuilt binaries (its CI mode): GGML_NATIVE=OFF,
//             every CPU variant as a dynamically loaded backend (GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON; ggml
//             picks the best one the CPU supports at run time), CUDA for a list of architectures, and OpenMP on. Runs
//             on any CPU of its architecture, at the stock binary's speed: what release builds use.
// --native    node-llama-cpp's source-build default for this machine (GGML_NATIVE=ON, OpenMP): half the build time,
//             never to be shipped (see native/README.md).
// --if-stale  skip everything when a build of the same series hash (series + patches + node-llama-cpp version + gpu)
//             exists; used by `postinstall`, since `npm install` can wipe node-llama-cpp's local builds.
// --force     rebuild even when --if-stale would skip.
// --source-only  clone and patch the source, do not compile (for working on the patches; see native/README.md).
// --unpatched  build node-llama-cpp's llama.cpp without the series, in the same configuration, into
//             native/.build/unpatched/<platform>-<arch>[-<gpu>]-<config>/ (never where the app looks), for the native bench
//             to measure build configuration and patches apart (`npx tsx native/bench.ts --compare-build <that folder>`).
//             The patched build is left as it is.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {createRequire} from "node:module";
import {createHash} from "node:crypto";
import {computeSeriesHash, nativeDir, readSeries} from "./seriesHash.mjs";
import {defaultBuildConfig, plainFolderName, rpcServerFileName, sourceBuildInvocation} from "./buildConfig.mjs";

const stampFileName = "ponder-native.json";
const gpuOptions = ["auto", "false", "cuda", "metal", "vulkan"];
const patchedAddonMarkers = ["PonderKv.cpp", "PonderKv.h", "PonderRpc.cpp", "PonderSeries.h"]; // files the series adds to the addon

const log = (message) => console.log(`[ponder-native] ${message}`);

class BuildError extends Error {}

function parseArgs(argv) {
    const args = {gpu: "auto", ifStale: false, force: false, sourceOnly: false, config: defaultBuildConfig, unpatched: false};
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        if (arg === "--if-stale") args.ifStale = true;
        else if (arg === "--force") args.force = true;
        else if (arg === "--source-only") args.sourceOnly = true;
        else if (arg === "--portable") args.config = "portable";
        else if (arg === "--native") args.config = "native";
        else if (arg === "--unpatched") args.unpatched = true;
        else if (arg === "--gpu" || arg.startsWith("--gpu=")) {
            const value = arg === "--gpu" ? argv[++i] : arg.slice("--gpu=".length);
            if (value == null || !gpuOptions.includes(value))
                throw new BuildError(`--gpu expects one of ${gpuOptions.join(", ")}, got ${value ?? "nothing"}`);
            args.gpu = value;
        } else if (arg === "--help" || arg === "-h") {
            console.log(
                "usage: node native/build.mjs [--gpu auto|false|cuda|metal|vulkan] [--portable | --native] [--if-stale] [--force] [--source-only] [--unpatched]"
            );
            process.exit(0);
        } else throw new BuildError(`unknown argument: ${arg} (see --help)`);
    }
    if (args.unpatched && (args.ifStale || args.sourceOnly))
        throw new BuildError("--unpatched always compiles: it takes neither --if-stale nor --source-only");
    return args;
}

function findNodeLlamaCpp() {
    const require = createRequire(path.join(nativeDir, "..", "package.json"));
    let dir;
    try {
        dir = path.dirname(require.resolve("node-llama-cpp"));
    } catch {
        throw new BuildError("node-llama-cpp is not installed: run npm install first");
    }
    while (!fs.existsSync(path.join(dir, "package.json")) || readJson(path.join(dir, "package.json")).name !== "node-llama-cpp") {
        const parent = path.dirname(dir);
        if (parent === dir) throw new BuildError("cannot find node-llama-cpp's package.json");
        dir = parent;
    }
    const packageJson = readJson(path.join(dir, "package.json"));
    const llamaDir = path.join(dir, "llama");
    return {
        dir,
        version: packageJson.version,
        cli: path.join(dir, packageJson.bin["node-llama-cpp"]),
        llamaDir,
        llamaCppDir: path.join(llamaDir, "llama.cpp"),
        addonDir: path.join(llamaDir, "addon"),
        localBuildsDir: path.join(llamaDir, "localBuilds"),
        lastBuildPath: path.join(llamaDir, "lastBuild.json")
    };
}

function readJson(file) {
    return JSON.parse(fs.readFileSync(file, "utf8"));
}

function run(command, args, {cwd, env, capture = false} = {}) {
    const result = spawnSync(command, args, {
        cwd,
        env: env ?? process.env,
        stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit",
        encoding: "utf8"
    });
    if (result.error != null) throw new BuildError(`cannot run ${command}: ${result.error.message}`);
    return result;
}

/** The checkout, for sourceBuildInvocation's ccache settings, when ccache is installed; null otherwise. */
function ccacheRoot() {
    const found = spawnSync("ccache", ["--version"], {stdio: "ignore"});
    return found.error != null || found.status !== 0 ? null : path.join(nativeDir, "..");
}

function runNodeLlamaCpp(nlc, args, env = process.env) {
    // `npx --no node-llama-cpp ...`, without npx's shell and lookup: the package's own CLI with this Node
    log(`$ node-llama-cpp ${args.join(" ")}`);
    const result = run(process.execPath, [nlc.cli, ...args], {cwd: path.join(nativeDir, ".."), env});
    if (result.status !== 0) throw new BuildError(`node-llama-cpp ${args.join(" ")} failed (exit code ${result.status})`);
}

// `git apply` in `cwd`; GIT_CEILING_DIRECTORIES keeps git from taking an enclosing repository (ours) for the target's
function gitApply(cwd, patchPath, extraArgs) {
    const env = {...process.env, GIT_CEILING_DIRECTORIES: path.dirname(cwd)};
    return run("git", ["apply", "--whitespace=nowarn", ...extraArgs, patchPath], {cwd, env, capture: true});
}

function listFiles(dir, base = dir) {
    const files = [];
    for (const entry of fs.readdirSync(dir, {withFileTypes: true})) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) files.push(...listFiles(full, base));
        else files.push(path.relative(base, full));
    }
    return files.sort();
}

/**
 * node-llama-cpp's addon folder is not re-cloned like llama.cpp, so keep a pristine copy of it (native/.build/) and restore
 * it before applying the addon patches: re-running the build then never patches twice.
 */
function restorePristineAddon(nlc, series) {
    const backupDir = path.join(nativeDir, ".build", `addon-pristine-${nlc.version}`);
    const isPatched = patchedAddonMarkers.some((file) => fs.existsSync(path.join(nlc.addonDir, file)));

    if (!fs.existsSync(backupDir)) {
        if (isPatched) {
            // patched by an earlier build whose backup is gone: undo the addon patches, newest first
            log("addon is patched but has no pristine copy: reverting the addon patches");
            for (const entry of series.filter((entry) => entry.target === "addon").reverse()) {
                const result = gitApply(nlc.addonDir, entry.path, ["--reverse"]);
                if (result.status !== 0)
                    throw new BuildError(
                        `node-llama-cpp's addon folder (${nlc.addonDir}) is modified and cannot be restored: ` +
                            "reinstall node-llama-cpp (rm -rf node_modules/node-llama-cpp && npm install).\n" +
                            result.stderr
                    );
            }
            for (const file of patchedAddonMarkers) fs.rmSync(path.join(nlc.addonDir, file), {force: true});
        }
        fs.mkdirSync(path.dirname(backupDir), {recursive: true});
        fs.cpSync(nlc.addonDir, backupDir + ".tmp", {recursive: true});
        fs.renameSync(backupDir + ".tmp", backupDir);
        log(`saved a pristine copy of the addon in ${path.relative(process.cwd(), backupDir)}`);
        return;
    }

    const pristineFiles = new Set(listFiles(backupDir));
    for (const file of listFiles(nlc.addonDir)) {
        if (!pristineFiles.has(file)) fs.rmSync(path.join(nlc.addonDir, file));
    }
    for (const file of pristineFiles) {
        const target = path.join(nlc.addonDir, file);
        fs.mkdirSync(path.dirname(target), {recursive: true});
        fs.copyFileSync(path.join(backupDir, file), target);
    }
    log("restored node-llama-cpp's addon from its pristine copy");
}

function applySeries(nlc, series) {
    const targetDirs = {"llama.cpp": nlc.llamaCppDir, addon: nlc.addonDir};
    for (const [index, entry] of series.entries()) {
        const cwd = targetDirs[entry.target];
        const label = `patch ${index + 1}/${series.length} ${entry.file} -> ${entry.target}`;
        const check = gitApply(cwd, entry.path, ["--check"]);
        if (check.status !== 0) {
            // a patch that applies in reverse is already in the source (merged upstream): it can leave the series
            if (gitApply(cwd, entry.path, ["--reverse", "--check"]).status === 0) {
                log(`${label}: already present in the source, skipped (drop it from the series)`);
                continue;
            }
            throw new BuildError(`${label} does not apply:\n${check.stderr.trim()}`);
        }
        const result = gitApply(cwd, entry.path, []);
        if (result.status !== 0) throw new BuildError(`${label} failed:\n${result.stderr.trim()}`);
        log(`${label}: applied`);
    }
}

function writeSeriesHeader(nlc, seriesHash) {
    fs.writeFileSync(
        path.join(nlc.addonDir, "PonderSeries.h"),
        "// generated by native/build.mjs\n#pragma once\n" + `#define PONDER_SERIES_HASH "${seriesHash}"\n`
    );
}

/** The stamp's hash: patch series (series, patches, node-llama-cpp version), the GPU backend and the build configuration. */
function buildHashFor(seriesHash, gpu, config) {
    return createHash("sha256").update(`${seriesHash}\0gpu=${gpu}\0config=${config}`).digest("hex").slice(0, 16);
}

function binaryPathOf(nlc, folderName) {
    return path.join(nlc.localBuildsDir, folderName, "Release", "llama-addon.node");
}

function isBuildComplete(nlc, folderName) {
    return fs.existsSync(binaryPathOf(nlc, folderName)) && fs.existsSync(path.join(nlc.localBuildsDir, folderName, "buildDone.status"));
}

/**
 * A complete local build of this patch series for `gpu`, or null. With `--gpu auto`, a build for any GPU counts: it is
 * what an explicit `--gpu` asked for before, and auto would pick the best build present anyway.
 */
function findCurrentBuild(nlc, seriesHash, gpu, config) {
    if (!fs.existsSync(nlc.localBuildsDir)) return null;
    for (const folderName of fs.readdirSync(nlc.localBuildsDir)) {
        const stampPath = path.join(nlc.localBuildsDir, folderName, stampFileName);
        if (!fs.existsSync(stampPath)) continue;
        try {
            const stamp = readJson(stampPath);
            const wanted = gpu === "auto" ? stamp.buildHash : buildHashFor(seriesHash, gpu, config);
            if (
                stamp.seriesHash === seriesHash &&
                stamp.config === config &&
                stamp.buildHash === buildHashFor(seriesHash, String(stamp.gpu), config) &&
                stamp.buildHash === wanted &&
                isBuildComplete(nlc, folderName)
            )
                return {folderName, stamp};
        } catch {
            // unreadable stamp: treat as stale
        }
    }
    return null;
}

function withLock(fn) {
    const lockPath = path.join(nativeDir, ".build", "build.lock");
    fs.mkdirSync(path.dirname(lockPath), {recursive: true});
    try {
        fs.writeFileSync(lockPath, String(process.pid), {flag: "wx"});
    } catch {
        const pid = Number(fs.readFileSync(lockPath, "utf8"));
        let alive = false;
        try {
            process.kill(pid, 0);
            alive = true;
        } catch {
            // not running
        }
        if (alive) throw new BuildError(`another native build is running (pid ${pid}); wait for it, or remove ${lockPath} if it is gone`);
        fs.writeFileSync(lockPath, String(process.pid));
    }
    try {
        return fn();
    } finally {
        fs.rmSync(lockPath, {force: true});
    }
}

function main() {
    const startTime = Date.now();
    const args = parseArgs(process.argv.slice(2));
    const nlc = findNodeLlamaCpp();
    const series = readSeries();
    const seriesHash = computeSeriesHash(nlc.version);

    const config = args.config;
    log(`node-llama-cpp ${nlc.version}, ${series.length} patches, series ${seriesHash}, gpu ${args.gpu}, ${config} build`);

    if (args.unpatched) {
        withLock(() => buildUnpatched(nlc, series, args, config, startTime));
        return;
    }

    if (args.ifStale && !args.force && !args.sourceOnly) {
        const current = findCurrentBuild(nlc, seriesHash, args.gpu, config);
        if (current != null) {
            log(
                `up to date: ${path.relative(process.cwd(), binaryPathOf(nlc, current.folderName))} (gpu ${current.stamp.gpu}); nothing to do`
            );
            return;
        }
        log("no current build: building");
    }

    withLock(() => {
        log("step 1/4: cloning llama.cpp from node-llama-cpp's bundled git release (offline)");
        runNodeLlamaCpp(nlc, ["source", "download", "--skipBuild", "--noUsageExample"]);
        if (!fs.existsSync(path.join(nlc.llamaCppDir, ".git"))) throw new BuildError(`llama.cpp was not cloned into ${nlc.llamaCppDir}`);

        log("step 2/4: applying the patch series");
        restorePristineAddon(nlc, series);
        applySeries(nlc, series);
        writeSeriesHeader(nlc, seriesHash);
        if (args.sourceOnly) {
            log(
                `source ready in ${path.relative(process.cwd(), nlc.llamaCppDir)} and ${path.relative(process.cwd(), nlc.addonDir)} (not compiled)`
            );
            return;
        }

        log(
            `step 3/4: compiling (gpu ${args.gpu}, ${config}); a portable CPU build (ggml-cpu once per CPU variant) takes about 8 minutes on 2 idle cores, a native one about 4`
        );
        const invocation = sourceBuildInvocation(args.gpu, config, process.env, ccacheRoot());
        runNodeLlamaCpp(nlc, invocation.args, invocation.env);

        log("step 4/4: checking the build and writing its stamp");
        const {folderName: built, metadata} = builtFolder(nlc, readJson(nlc.lastBuildPath).folderName, "the build");
        const folderName = moveToPlainFolder(nlc, built, metadata);
        const gpu = metadata.buildOptions?.gpu ?? false;
        const rpcServer = path.join(nlc.localBuildsDir, folderName, "Release", rpcServerFileName());
        if (!fs.existsSync(rpcServer))
            throw new BuildError(`the build did not produce llama.cpp's rpc-server (${rpcServer}): is native/patches/0009 in the series?`);
        const stamp = {
            buildHash: buildHashFor(seriesHash, String(gpu), config),
            seriesHash,
            config,
            requestedGpu: args.gpu,
            gpu,
            nodeLlamaCppVersion: nlc.version,
            llamaCppRelease: metadata.buildOptions?.llamaCpp?.release ?? null,
            patches: series.map((entry) => `${entry.file} ${entry.target}`),
            rpcServer: rpcServerFileName(),
            builtAt: new Date().toISOString()
        };
        fs.writeFileSync(path.join(nlc.localBuildsDir, folderName, stampFileName), JSON.stringify(stamp, null, 4) + "\n");

        const minutes = ((Date.now() - startTime) / 60_000).toFixed(1);
        log(
            `done in ${minutes} min: ${path.relative(process.cwd(), binaryPathOf(nlc, folderName))} (gpu ${stamp.gpu}, series ${seriesHash})`
        );
    });
}

/** A build's folder in node-llama-cpp's local builds, checked complete, with the build metadata node-llama-cpp wrote. */
function builtFolder(nlc, folderName, what) {
    if (typeof folderName !== "string" || !isBuildComplete(nlc, folderName))
        throw new BuildError(`${what} did not produce ${binaryPathOf(nlc, folderName ?? "<unknown>")}`);
    return {folderName, metadata: readJson(path.join(nlc.localBuildsDir, folderName, "Release", "_nlcBuildMetadata.json"))};
}

/**
 * A build made with custom CMake options (the portable configuration's OpenMP) lands in `<plain name>-<hash>`: moved to
 * the plain name getLlama looks for, replacing what was there, and recorded as node-llama-cpp's last build.
 */
function moveToPlainFolder(nlc, folderName, metadata) {
    const plain = plainFolderName(metadata.buildOptions);
    if (plain === folderName) return folderName;
    fs.rmSync(path.join(nlc.localBuildsDir, plain), {recursive: true, force: true});
    fs.renameSync(path.join(nlc.localBuildsDir, folderName), path.join(nlc.localBuildsDir, plain));
    fs.writeFileSync(nlc.lastBuildPath, JSON.stringify({folderName: plain}, null, 4) + "\n");
    log(`moved ${folderName} to ${plain}, where getLlama looks`);
    return plain;
}

/**
 * llama.cpp and the addon as node-llama-cpp ships them, compiled in `config` under a custom CMake option (so into a folder
 * of its own, not over the patched build), then moved out of node-llama-cpp's local builds with a stamp that says so.
 * The next patched build re-clones and re-patches the source, as it always does.
 */
function buildUnpatched(nlc, series, args, config, startTime) {
    log("step 1/3: cloning llama.cpp from node-llama-cpp's bundled git release (offline), addon as shipped");
    runNodeLlamaCpp(nlc, ["source", "download", "--skipBuild", "--noUsageExample"]);
    restorePristineAddon(nlc, series);
    fs.rmSync(path.join(nlc.addonDir, "PonderSeries.h"), {force: true});

    log(`step 2/3: compiling without the patches (gpu ${args.gpu}, ${config})`);
    const lastBuild = fs.existsSync(nlc.lastBuildPath) ? fs.readFileSync(nlc.lastBuildPath) : null;
    const invocation = sourceBuildInvocation(args.gpu, config, process.env, ccacheRoot());
    let folderName;
    try {
        runNodeLlamaCpp(nlc, invocation.args, {...invocation.env, NODE_LLAMA_CPP_CMAKE_OPTION_PONDER_UNPATCHED: "ON"});
        folderName = readJson(nlc.lastBuildPath).folderName;
    } finally {
        // the app's getLlama must keep finding the patched build
        if (lastBuild != null) fs.writeFileSync(nlc.lastBuildPath, lastBuild);
    }
    const {metadata} = builtFolder(nlc, folderName, "the unpatched build");

    log("step 3/3: moving it out of node-llama-cpp's local builds");
    const gpu = metadata.buildOptions?.gpu ?? false;
    const target = path.join(nativeDir, ".build", "unpatched", `${plainFolderName(metadata.buildOptions)}-${config}`);
    fs.rmSync(target, {recursive: true, force: true});
    fs.mkdirSync(path.dirname(target), {recursive: true});
    fs.cpSync(path.join(nlc.localBuildsDir, folderName), target, {recursive: true});
    fs.rmSync(path.join(nlc.localBuildsDir, folderName), {recursive: true, force: true});
    fs.writeFileSync(
        path.join(target, "ponder-unpatched.json"),
        JSON.stringify(
            {
                unpatched: true,
                config,
                requestedGpu: args.gpu,
                gpu,
                nodeLlamaCppVersion: nlc.version,
                llamaCppRelease: metadata.buildOptions?.llamaCpp?.release ?? null,
                builtAt: new Date().toISOString()
            },
            null,
            4
        ) + "\n"
    );
    const minutes = ((Date.now() - startTime) / 60_000).toFixed(1);
    log(
        `done in ${minutes} min: ${path.relative(process.cwd(), target)} (unpatched, gpu ${gpu}, ${config}); ` +
            `bench it with npx tsx native/bench.ts --compare-build ${path.relative(process.cwd(), target)}`
    );
}

try {
    main();
} catch (err) {
    if (err instanceof BuildError) console.error(`[ponder-native] error: ${err.message}`);
    else console.error("[ponder-native] unexpected error:", err);
    process.exit(1);
}
