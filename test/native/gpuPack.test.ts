// The CUDA check's archive (native/gpu/): what `npm run gpu:pack` packs, that it fits a device run, and (opt-in,
// PONDER_GPU_PACK_BUILD=1: a CPU build of llama.cpp, 10 to 15 minutes here) that run.sh builds it on the CPU and the
// harness runs every policy and matches the CPU reference packed with it.
import {spawnSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import {keepSourcePath} from "../../native/gpu/pack.mjs";

const repoRoot = path.resolve(import.meta.dirname, "../..");
const policies = ["full", "streamingllm", "h2o", "lethe", "refreekv", "leankv", "lava", "trimkv", "h2o@state", "trimkv@heads"];
let dir: string;
let archive: string;
let entries: string[];

beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "ponder-gpu-pack-"));
    archive = path.join(dir, "ponder-gpu.tar.gz");
    const packed = spawnSync(process.execPath, [path.join(repoRoot, "native/gpu/pack.mjs"), "--out", archive], {encoding: "utf8"});
    expect(packed.stderr).toBe("");
    expect(packed.status).toBe(0);
    expect(packed.stdout).toMatch(/ponder-gpu\.tar\.gz: \d+\.\d MiB \(\d+ bytes\)/);
    const listed = spawnSync("tar", ["-tzf", archive], {encoding: "utf8", maxBuffer: 64 * 1024 * 1024});
    expect(listed.status).toBe(0);
    entries = listed.stdout.split("\n").filter((entry) => entry !== "");
});

afterAll(() => {
    fs.rmSync(dir, {recursive: true, force: true});
});

test("the archive fits what a device run carries (64 MiB)", () => {
    expect(fs.statSync(archive).size).toBeLessThan(64 * 1024 * 1024);
});

test("it holds the harness, run.sh, the CPU reference, the demo model and its gates", () => {
    for (const file of [
        "run.sh",
        "README.md",
        "PACK.txt",
        "cpu-reference.tsv",
        "harness/CMakeLists.txt",
        "harness/harness.cpp",
        "harness/choices.h",
        "models/ponder-demo.gguf",
        "models/ponder-demo.retention.gguf"
    ])
        expect(entries).toContain(`ponder-gpu/${file}`);
    const demo = fs.statSync(path.join(repoRoot, "resources/models/ponder-demo.gguf")).size;
    const unpacked = spawnSync("tar", ["-xzf", archive, "-C", dir, "ponder-gpu/models/ponder-demo.gguf"]);
    expect(unpacked.status).toBe(0);
    expect(fs.statSync(path.join(dir, "ponder-gpu/models/ponder-demo.gguf")).size).toBe(demo);
});

test("the llama.cpp in it is patched: the series' new files and API are there", () => {
    expect(entries).toContain("ponder-gpu/llama.cpp/src/llama-retention.cpp"); // added by 0007
    const header = spawnSync("tar", ["-xzOf", archive, "ponder-gpu/llama.cpp/src/llama-ext.h"], {encoding: "utf8"});
    for (const api of [
        "llama_memory_seq_rm_pos",
        "llama_set_attn_score",
        "llama_set_retention_gates",
        "llama_set_value_norms",
        "llama_set_attn_score_cells"
    ])
        expect(header.stdout).toContain(api);
    const pack = spawnSync("tar", ["-xzOf", archive, "ponder-gpu/PACK.txt"], {encoding: "utf8"}).stdout;
    expect(pack).toContain("0001-kv-cache-batched-position-removal.patch");
    expect(pack).toContain("0012-read-horizon-and-attn-norm-capture.patch");
});

test("it keeps the CPU and CUDA backends and leaves out docs, models, tests, tools and the other backends", () => {
    expect(entries.some((entry) => entry.startsWith("ponder-gpu/llama.cpp/ggml/src/ggml-cuda/"))).toBe(true);
    expect(entries.some((entry) => entry.startsWith("ponder-gpu/llama.cpp/ggml/src/ggml-cpu/"))).toBe(true);
    for (const skipped of ["docs/", "models/", "tests/", "tools/", "examples/", "ggml/src/ggml-vulkan/", "ggml/src/ggml-metal/"])
        expect(entries.filter((entry) => entry.startsWith(`ponder-gpu/llama.cpp/${skipped}`))).toEqual([]);
    expect(keepSourcePath("src/llama.cpp")).toBe(true);
    expect(keepSourcePath("vendor/nlohmann/json.hpp")).toBe(true);
    expect(keepSourcePath("convert_hf_to_gguf.py")).toBe(false);
    expect(keepSourcePath("ggml/src/ggml-sycl/ggml-sycl.cpp")).toBe(false);
});

test("the CPU reference holds every policy with flash attention off and on, for the demo model", () => {
    const rows = fs
        .readFileSync(path.join(repoRoot, "native/gpu/cpu-reference.tsv"), "utf8")
        .trim()
        .split("\n")
        .slice(1)
        .map((line) => line.split("\t"));
    for (const flash of ["off", "on"]) {
        const demo = rows.filter((row) => row[0] === "ponder-demo" && row[3] === flash);
        expect(demo.map((row) => row[4])).toEqual(policies);
        for (const row of demo) {
            expect(row[13]!.split(",")).toHaveLength(256); // every generated token id
            if (row[4] !== "full") expect(Number(row[6])).toBeLessThanOrEqual(128); // live cells within the budget
        }
    }
});

describe.runIf(process.env.PONDER_GPU_PACK_BUILD === "1")("run.sh --cpu (PONDER_GPU_PACK_BUILD=1)", () => {
    test(
        "builds the pack with CMake on the CPU, runs every policy and matches the CPU reference",
        () => {
            const out = path.join(dir, "results");
            const work = path.join(dir, "work");
            const started = Date.now();
            const run = spawnSync(
                "nice",
                [
                    "-n",
                    "10",
                    "bash",
                    path.join(repoRoot, "native/gpu/run.sh"),
                    "--archive",
                    archive,
                    "--cpu",
                    "--quick",
                    "--work",
                    work,
                    "--out",
                    out,
                    "--jobs",
                    "2"
                ],
                {encoding: "utf8", maxBuffer: 64 * 1024 * 1024}
            );
            console.log(
                `run.sh --cpu: ${((Date.now() - started) / 1000).toFixed(0)} s\n${fs.readFileSync(path.join(out, "timings.txt"), "utf8")}`
            );
            expect(run.status, run.stdout.slice(-4000) + run.stderr.slice(-4000)).toBe(0);
            const results = fs
                .readFileSync(path.join(out, "results.tsv"), "utf8")
                .trim()
                .split("\n")
                .slice(1)
                .map((line) => line.split("\t"));
            expect(results.filter((row) => row[0] === "ponder-demo").map((row) => `${row[3]} ${row[4]}`)).toEqual(
                ["off", "on"].flatMap((flash) => policies.map((policy) => `${flash} ${policy}`))
            );
            // the table's last column: every run as the reference, token for token; on the demo model the state restored
            // halfway goes on with H2O's very tokens (the random-weight shape may part from them: its greedy tokens turn on
            // rounding, and a restored state's cells lie elsewhere)
            const table = run.stdout
                .split("\n")
                .filter((line) => /^\| (ponder-demo|bench-1\.5b-shape) \|/.test(line))
                .map((line) => line.split("|"));
            expect(table).toHaveLength(results.length);
            for (const row of table) expect(row.at(-2)!.trim(), row.join("|")).toMatch(/^same tokens/);
            expect(
                table.filter((row) => row[1]!.trim() === "ponder-demo" && row[4]!.trim() === "h2o@state").map((row) => row.at(-2)!.trim())
            ).toEqual(["same tokens; restored at token 128, same tokens as h2o", "same tokens; restored at token 128, same tokens as h2o"]);
            expect(run.stdout).toMatch(/\| ponder-demo \| 320 \| on \| leankv \| q8_0\/q4_0 \|/);
            // per-head cells moved single KV heads between cells on every model and flash setting
            const heads = table.filter((row) => row[4]!.trim() === "trimkv@heads").map((row) => row.at(-2)!.trim());
            expect(heads).toHaveLength(4);
            for (const note of heads) expect(Number(/; (\d+) head moves$/.exec(note)?.[1])).toBeGreaterThan(0);
        },
        60 * 60 * 1000
    );
});
