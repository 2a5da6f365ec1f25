// The built headless server given a --model that is missing or not GGUF: one line naming the file, exit status 1, and
// nothing started (no data directory, no lock, no page served), as its other command-line errors do.
import {execFile} from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, expect, test} from "vitest";

const repoRoot = path.resolve(import.meta.dirname, "../..");
let dir: string;

beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-headless-model-"));
    await fs.writeFile(path.join(dir, "notes.gguf"), "not a model at all\n".repeat(4));
});

afterAll(async () => {
    await fs.rm(dir, {recursive: true, force: true});
});

/** Runs out/main/headless.js with this --model and its own data directory inside `dir`. */
const headless = (model: string) =>
    new Promise<{status: number | null; stdout: string; stderr: string}>((resolve) => {
        const dataDir = path.join(dir, `data-${path.basename(model)}`);
        execFile(
            process.execPath,
            [path.join(repoRoot, "out/main/headless.js"), "--model", model, "--data-dir", dataDir, "--port", "0"],
            {cwd: repoRoot, timeout: 120_000, encoding: "utf8"},
            (err, stdout, stderr) => resolve({status: err == null ? 0 : ((err as {code?: number}).code ?? null), stdout, stderr})
        );
    });

test("a missing or non-GGUF --model is one line and exit status 1, before the data directory is taken", async () => {
    const missing = path.join(dir, "missing.gguf");
    const [absent, notGguf] = await Promise.all([headless(missing), headless(path.join(dir, "notes.gguf"))]);
    expect(absent).toEqual({status: 1, stdout: "", stderr: `--model: ${missing} does not exist\n`});
    expect(notGguf).toEqual({
        status: 1,
        stdout: "",
        stderr: "--model: notes.gguf is not a GGUF model file (it does not start with the GGUF signature)\n"
    });
    expect((await fs.readdir(dir)).sort()).toEqual(["notes.gguf"]);
});
