// `npm run calibrate` on bad input: a missing model, a file that is not GGUF, a bad number of threads, an unknown option
// or prompt set. Each is one line naming what is wrong and exit status 1, before the engine or the model loads (no
// stack trace, no job started).
import {execFile} from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, expect, test} from "vitest";

const repoRoot = path.resolve(import.meta.dirname, "../../..");
let dir: string;
let model: string;

beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-calibrate-args-"));
    // a copy of the demo model, so that a job started by mistake writes nothing beside the shipped one
    model = path.join(dir, "model.gguf");
    await fs.copyFile(path.join(repoRoot, "resources/models/ponder-demo.gguf"), model);
    await fs.writeFile(path.join(dir, "notes.gguf"), "not a model at all\n".repeat(4));
});

afterAll(async () => {
    await fs.rm(dir, {recursive: true, force: true});
});

/** Runs scripts/calibrate.ts with these arguments, its work folder and output inside `dir`. */
const calibrate = (args: string[]) =>
    new Promise<{status: number | null; stdout: string; stderr: string}>((resolve) => {
        execFile(
            path.join(repoRoot, "node_modules/.bin/tsx"),
            [
                path.join(repoRoot, "scripts/calibrate.ts"),
                "--work-dir",
                path.join(dir, "work"),
                "--out",
                path.join(dir, "out.gguf"),
                ...args
            ],
            {cwd: repoRoot, timeout: 90_000, encoding: "utf8"},
            (err, stdout, stderr) => resolve({status: err == null ? 0 : ((err as {code?: number}).code ?? null), stdout, stderr})
        );
    });

test("bad input is one line and exit status 1, before anything loads", async () => {
    const missing = path.join(dir, "missing.gguf");
    const cases: [args: string[], line: string][] = [
        [["--model", missing], `error: --model: ${missing} does not exist`],
        [
            ["--model", path.join(dir, "notes.gguf")],
            "error: --model: notes.gguf is not a GGUF model file (it does not start with the GGUF signature)"
        ],
        [["--model", model, "--threads", "abc"], "error: --threads must be a whole number from 1, not abc"],
        [["--model", model, "--threads", "0"], "error: --threads must be a whole number from 1, not 0"],
        [["--model", model, "--prompts", "2.5"], "error: --prompts must be a whole number, not 2.5"],
        [["--model", model, "--prompt-set", "bogus"], "error: --prompt-set is own, demo, merge, multi or english"],
        [["--model", model, "--frobnicate"], "error: Unknown option '--frobnicate'"],
        [
            ["--model", model, "--traces", path.join(dir, "none.jsonl")],
            `error: --traces ${path.join(dir, "none.jsonl")}: ENOENT: no such file or directory, open '${path.join(dir, "none.jsonl")}'`
        ],
        [
            ["--model", model, "--traces", path.join(dir, "notes.gguf")],
            `error: --traces ${path.join(dir, "notes.gguf")}: line 1: not JSON (a trace file has one JSON object per line)`
        ],
        [["--model", model, "--conversations", dir], `error: --conversations ${dir}: no Ponder data there (no ponder.sqlite)`],
        [
            ["--model", model, "--traces", "a.jsonl", "--prompt-set", "own"],
            "error: --prompt-set and --traces name the prompts twice: give one"
        ],
        [["--model", model, "--draws", "0"], "error: --draws must be a whole number from 1, not 0"]
    ];
    const results = await Promise.all(cases.map(([args]) => calibrate(args)));
    for (const [i, [args, line]] of cases.entries())
        expect(results[i], args.join(" ")).toEqual({status: 1, stdout: "", stderr: `${line}\n`});
    // no job started: no work folder, no gates
    expect((await fs.readdir(dir)).sort()).toEqual(["model.gguf", "notes.gguf"]);
}, 180_000);
