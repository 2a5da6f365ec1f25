#!/usr/bin/env node
// Packs the CUDA check (native/gpu/README.md): llama.cpp's source as node-llama-cpp ships it with Ponder's llama.cpp
// patches applied (what native/build.mjs leaves in node_modules/node-llama-cpp/llama/llama.cpp), without what the
// harness does not build (docs, models, tools, examples, tests, other backends), the demo model and its retention
// sidecar, the random-weight 1.5B shape when it has been made, the harness (with the policies' choices it includes),
// run.sh and the CPU reference, into one tar.gz under 64 MiB.
//
//   node native/gpu/pack.mjs [--out FILE] [--shape-model FILE]     (npm run gpu:pack)
//
// --out          the archive. Defaults to `native/.build/ponder-gpu.tar.gz`.
// --shape-model  the 1.5B-shape GGUF to pack, with its `.retention.gguf` beside it. Defaults to
//                `native/.build/gpu/bench-1.5b-shape.q4_0.gguf` when it exists (README.md, "The 1.5B shape"); without one
//                the archive holds the demo model only, and says so.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import {createRequire} from "node:module";
import {nativeDir, readSeries} from "../seriesHash.mjs";

const repoRoot = path.join(nativeDir, "..");
const gpuDir = path.join(nativeDir, "gpu");
const archiveLimit = 64 * 1024 * 1024;
/** The archive's top folder. */
export const packFolder = "ponder-gpu";

/** Top-level entries of llama.cpp the harness build does not read (LLAMA_BUILD_COMMON, TESTS, TOOLS, EXAMPLES off). */
const skippedTop = new Set([
    ".github",
    ".devops",
    "docs",
    "models",
    "tools",
    "examples",
    "tests",
    "benches",
    "pocs",
    "app",
    "conversion",
    "scripts",
    "gguf-py",
    "media",
    "grammars",
    "requirements",
    "ci",
    "skills",
    "common",
    "prompts",
    ".gemini"
]);
/** ggml backends other than the CPU and CUDA (each is only added when its GGML_<NAME> option is on). */
const skippedBackends = new Set([
    "ggml-cann",
    "ggml-et",
    "ggml-hexagon",
    "ggml-hip",
    "ggml-metal",
    "ggml-musa",
    "ggml-opencl",
    "ggml-openvino",
    "ggml-sycl",
    "ggml-virtgpu",
    "ggml-vulkan",
    "ggml-webgpu",
    "ggml-zdnn",
    "ggml-zendnn",
    "ggml-rpc"
]);

/** Files of native/gpu/ that travel, and where they go in the archive's folder. */
const harnessFiles = [
    ["run.sh", "run.sh"],
    ["README.md", "README.md"],
    ["harness/CMakeLists.txt", "harness/CMakeLists.txt"],
    ["harness/harness.cpp", "harness/harness.cpp"],
    ["harness/choices.h", "harness/choices.h"],
    ["cpu-reference.tsv", "cpu-reference.tsv"]
];

class PackError extends Error {}

/** Whether a path of llama.cpp's source (relative, `/`-separated) goes into the archive. */
export function keepSourcePath(rel) {
    const parts = rel.split("/");
    if (parts.length > 1 && skippedTop.has(parts[0])) return false;
    if (parts.length === 1 && /\.(py|nix|toml|sh|md)$/.test(parts[0]) && parts[0] !== "README.md") return false;
    if (parts[0] === "ggml" && parts[1] === "src" && parts.length > 3 && skippedBackends.has(parts[2])) return false;
    return true;
}

function run(command, args, cwd) {
    const result = spawnSync(command, args, {
        cwd,
        encoding: "utf8",
        maxBuffer: 256 * 1024 * 1024,
        env: {...process.env, GIT_CEILING_DIRECTORIES: path.dirname(cwd)}
    });
    if (result.error != null) throw new PackError(`cannot run ${command}: ${result.error.message}`);
    return result;
}

function llamaCppDir() {
    const require = createRequire(path.join(repoRoot, "package.json"));
    let dir = path.dirname(require.resolve("node-llama-cpp"));
    while (!fs.existsSync(path.join(dir, "llama", "llama.cpp")) && path.dirname(dir) !== dir) dir = path.dirname(dir);
    const source = path.join(dir, "llama", "llama.cpp");
    if (!fs.existsSync(path.join(source, "CMakeLists.txt")))
        throw new PackError(`llama.cpp's source is not in ${source}: run npm run build:native -- --source-only`);
    return source;
}

/**
 * Refuses a source without every llama.cpp patch of the series: on a scratch copy of the files they touch, the patches
 * must come off in reverse order (later patches change what earlier ones added, so one patch alone cannot be checked).
 */
function checkPatched(source) {
    const patches = readSeries().filter((entry) => entry.target === "llama.cpp");
    const scratch = fs.mkdtempSync(path.join(nativeDir, ".build", "gpu-check-"));
    try {
        for (const patch of patches) {
            for (const match of fs.readFileSync(patch.path, "utf8").matchAll(/^\+\+\+ b\/(.+)$/gm)) {
                const from = path.join(source, match[1]);
                if (fs.existsSync(from)) copy(from, path.join(scratch, match[1]));
            }
        }
        for (const patch of [...patches].reverse()) {
            const result = run("git", ["apply", "--reverse", "--whitespace=nowarn", patch.path], scratch);
            if (result.status !== 0)
                throw new PackError(
                    `${source} lacks ${patch.file} (a build with --unpatched, or a fresh clone): ` +
                        "run npm run build:native -- --source-only first"
                );
        }
    } finally {
        fs.rmSync(scratch, {recursive: true, force: true});
    }
    return patches.map((patch) => patch.file);
}

function parseArgs(argv) {
    const args = {
        out: path.join(nativeDir, ".build", "ponder-gpu.tar.gz"),
        shapeModel: path.join(nativeDir, ".build", "gpu", "bench-1.5b-shape.q4_0.gguf"),
        shapeGiven: false
    };
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === "--out") args.out = path.resolve(argv[++i]);
        else if (argv[i] === "--shape-model") {
            args.shapeModel = path.resolve(argv[++i]);
            args.shapeGiven = true;
        } else throw new PackError(`unknown argument: ${argv[i]} (usage: node native/gpu/pack.mjs [--out FILE] [--shape-model FILE])`);
    }
    return args;
}

/** Copies a file with its modification time, so that a build over an earlier unpacked archive recompiles only what changed. */
function copy(from, to) {
    fs.mkdirSync(path.dirname(to), {recursive: true});
    fs.copyFileSync(from, to);
    const {atime, mtime} = fs.statSync(from);
    fs.utimesSync(to, atime, mtime);
}

function main() {
    const args = parseArgs(process.argv.slice(2));
    const source = llamaCppDir();
    const patches = checkPatched(source);
    const listed = run("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z"], source);
    if (listed.status !== 0) throw new PackError(`git ls-files failed in ${source}: ${listed.stderr}`);
    const files = listed.stdout.split("\0").filter((rel) => rel !== "" && keepSourcePath(rel));

    const stage = path.join(nativeDir, ".build", "gpu-pack");
    fs.rmSync(stage, {recursive: true, force: true});
    const root = path.join(stage, packFolder);
    for (const rel of files) {
        const from = path.join(source, rel);
        if (fs.lstatSync(from).isFile()) copy(from, path.join(root, "llama.cpp", rel));
    }
    for (const [from, to] of harnessFiles) {
        if (!fs.existsSync(path.join(gpuDir, from))) throw new PackError(`native/gpu/${from} is missing`);
        copy(path.join(gpuDir, from), path.join(root, to));
    }
    fs.chmodSync(path.join(root, "run.sh"), 0o755);
    copy(path.join(repoRoot, "resources", "models", "ponder-demo.gguf"), path.join(root, "models", "ponder-demo.gguf"));
    copy(path.join(repoRoot, "resources", "models", "ponder-demo.retention.gguf"), path.join(root, "models", "ponder-demo.retention.gguf"));
    let shape = "none (native/gpu/README.md says how to make it)";
    if (fs.existsSync(args.shapeModel)) {
        const gates = args.shapeModel.replace(/\.gguf$/, ".retention.gguf");
        if (!fs.existsSync(gates))
            throw new PackError(`${gates}, the 1.5B shape's retention gates, is missing (npx tsx native/gpu/makeShape.ts makes both)`);
        copy(args.shapeModel, path.join(root, "models", "bench-1.5b-shape.gguf"));
        copy(gates, path.join(root, "models", "bench-1.5b-shape.retention.gguf"));
        shape = path.relative(repoRoot, args.shapeModel);
    } else if (args.shapeGiven) {
        throw new PackError(`--shape-model ${args.shapeModel} does not exist`);
    }
    fs.writeFileSync(
        path.join(root, "PACK.txt"),
        [
            `llama.cpp: ${path.relative(repoRoot, source)} (${files.length} files), patches applied: ${patches.join(" ")}`,
            `1.5B shape: ${shape}`,
            ""
        ].join("\n")
    );

    fs.mkdirSync(path.dirname(args.out), {recursive: true});
    fs.rmSync(args.out, {force: true});
    const tar = run("tar", ["-czf", args.out, "-C", stage, packFolder], stage);
    if (tar.status !== 0) throw new PackError(`tar failed: ${tar.stderr}`);
    fs.rmSync(stage, {recursive: true, force: true});
    const size = fs.statSync(args.out).size;
    console.log(
        `[gpu-pack] ${path.relative(process.cwd(), args.out)}: ${(size / 1024 / 1024).toFixed(1)} MiB (${size} bytes), ` +
            `${files.length} llama.cpp files, 1.5B shape: ${shape}`
    );
    if (size >= archiveLimit) throw new PackError(`the archive is ${size} bytes, over the 64 MiB a device run carries`);
}

if (process.argv[1] != null && path.resolve(process.argv[1]) === path.join(gpuDir, "pack.mjs")) {
    try {
        main();
    } catch (err) {
        if (!(err instanceof PackError)) throw err;
        console.error(`[gpu-pack] error: ${err.message}`);
        process.exit(1);
    }
}
