// The authors' released gates (TRIM-KV's `trimkv_weights.pth`) through the converter: a state_dict in their exact key
// names and shapes, written for a generated llama model, becomes a sidecar the engine loads, and the engine's gate
// logit of every cell, layer and KV head equals the PyTorch reference computed from the same state_dict (a full pass of
// the model's replica: every layer's attn_norm, not only the first). Needs Python with torch (Debian's python3-torch).
import {execFileSync} from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {afterAll, beforeAll, describe, expect, test} from "vitest";
import type {Token} from "node-llama-cpp";
import {NativeKv} from "../../main/engine/native/NativeKv.js";
import {loadPatchedLlama} from "../../main/engine/native/loadPatchedLlama.js";
import {findRetentionGates} from "../../main/engine/retention/findRetentionGates.js";
import {getFixtureModelInfo} from "../fixtures/gguf/fixtures.js";
import type {GeneratedModelInfo} from "../fixtures/gguf/generateModel.js";
import {torchPython} from "../fixtures/torchPython.js";

const scripts = path.resolve(import.meta.dirname, "../../scripts/retention");

describe("TRIM-KV's released gates, converted", () => {
    let dir: string;
    let python: string;
    let modelPath: string;
    let info: GeneratedModelInfo;

    const run = (script: string, args: string[]) =>
        execFileSync(python, [path.join(scripts, script), ...args], {encoding: "utf8", timeout: 120_000});

    beforeAll(async () => {
        python = torchPython();
        dir = await fs.mkdtemp(path.join(os.tmpdir(), "ponder-trimkv-convert-"));
        info = await getFixtureModelInfo("tiny-llama");
        modelPath = path.join(dir, "tiny-llama.gguf");
        await fs.copyFile(info.path, modelPath);
    });

    afterAll(async () => {
        await fs.rm(dir, {recursive: true, force: true});
    });

    test("the engine's gate logits equal PyTorch's from the same state_dict, in every layer and KV head", async () => {
        const weights = path.join(dir, "trimkv_weights.pth");
        run("makeFakeTrimkv.py", ["--model", modelPath, "--out", weights, "--seed", "3", "--hidden", "64", "--scale", "0.3"]);
        const sidecar = path.join(dir, "tiny-llama.retention.gguf");
        run("convertTrimkv.py", ["--weights", weights, "--model", modelPath, "--out", sidecar]);

        const tokens = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 65, 66, 67, 68] as Token[];
        const reference = JSON.parse(
            run("referenceBeta.py", ["--model", modelPath, "--weights", weights, "--tokens", tokens.join(",")])
        ) as {layers: number[][][]};

        const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
        const model = await llama.loadModel({modelPath});
        const context = await model.createContext({contextSize: 64, threads: 1});
        const kv = new NativeKv(context);
        try {
            await kv.configureRetention(sidecar);
            await context.getSequence().evaluateWithoutGeneratingNewTokens(tokens);
            const snapshot = await kv.retention(0);
            const n = snapshot.positions.length;
            expect(n).toBe(tokens.length);
            expect(snapshot.logits).toHaveLength(reference.layers.length);
            let spread = 0;
            for (const [layer, expected] of reference.layers.entries()) {
                for (let j = 0; j < n; j++) {
                    const row = expected[snapshot.positions[j]!]!;
                    for (let h = 0; h < snapshot.heads; h++) {
                        const engine = snapshot.logits[layer]![h * n + j]!;
                        expect(Math.abs(engine - row[h]!), `layer ${layer}, position ${snapshot.positions[j]}, head ${h}`).toBeLessThan(
                            2e-2
                        );
                        spread = Math.max(spread, Math.abs(row[h]! - expected[0]![h]!));
                    }
                }
            }
            // the token-dependent part of the logits is far larger than the tolerance: the comparison means something
            expect(spread).toBeGreaterThan(0.5);
        } finally {
            await kv.dispose();
            await context.dispose();
            await model.dispose();
        }
    }, 300_000);

    test("train:retention trains gates on the model's own continuations and writes a sidecar the app accepts and the engine loads", async () => {
        const prompts = path.join(dir, "prompts.jsonl");
        await fs.writeFile(
            prompts,
            [
                [72, 101, 108, 108, 111],
                [65, 66, 67, 68, 69, 70]
            ]
                .map((tokens) => JSON.stringify({tokens}))
                .join("\n") + "\n"
        );
        // where the app looks for it: beside the model (replacing the converted gates of the first test)
        const sidecar = path.join(dir, "tiny-llama.retention.gguf");
        run("train.py", [
            "--model",
            modelPath,
            "--prompts",
            prompts,
            "--out",
            sidecar,
            "--steps",
            "3",
            "--hidden",
            "16",
            "--max-new",
            "24",
            "--budget",
            "8",
            "--cache-dir",
            path.join(dir, "cache"),
            "--log-every",
            "1"
        ]);
        const found = await findRetentionGates({
            path: modelPath,
            architecture: "llama",
            layers: info.spec.nLayer,
            embeddingLength: info.spec.nEmbd,
            headCountKv: info.spec.nHeadKv
        });
        expect(found).toMatchObject({available: true, info: {hidden: 16, budget: 8, reduction: "shared"}});
        const llama = await loadPatchedLlama({gpu: false, logLevel: "error"});
        const model = await llama.loadModel({modelPath});
        const context = await model.createContext({contextSize: 64, threads: 1});
        const kv = new NativeKv(context);
        try {
            expect(await kv.configureRetention(sidecar)).toMatchObject({layers: info.spec.nLayer, heads: info.spec.nHeadKv});
        } finally {
            await kv.dispose();
            await context.dispose();
            await model.dispose();
        }
    }, 300_000);

    test("train:retention --seeds trains one set of gates per seed and keeps the best on prompts held out of training", async () => {
        const prompts = path.join(dir, "prompts-seeds.jsonl");
        const rows = [
            [72, 101, 108, 108, 111],
            [65, 66, 67, 68, 69, 70],
            [49, 50, 51],
            [87, 104, 121]
        ];
        await fs.writeFile(prompts, rows.map((tokens) => JSON.stringify({tokens})).join("\n") + "\n");
        const out = path.join(dir, "tiny-llama.retention.gguf"); // beside the model, where the app reads it
        const common = [
            "--model",
            modelPath,
            "--prompts",
            prompts,
            "--out",
            out,
            "--steps",
            "2",
            "--hidden",
            "16",
            "--max-new",
            "24",
            "--budget",
            "8",
            "--cache-dir",
            path.join(dir, "cache"),
            "--log-every",
            "1"
        ];
        const log = run("train.py", [...common, "--seeds", "3,4", "--validation-count", "1"]);
        expect(log).toMatch(/seed 3: validation at 0\.25 of each length: \{"identical": [\d.]+, "agreement": [\d.]+\}/);
        expect(log).toMatch(/seed 4: validation at 0\.25/);
        expect(log).toMatch(/kept seed [34], best of seeds 3,4 on 1 validation prompts/);
        const found = await findRetentionGates({
            path: modelPath,
            architecture: "llama",
            layers: info.spec.nLayer,
            embeddingLength: info.spec.nEmbd,
            headCountKv: info.spec.nHeadKv
        });
        expect(found.available && found.info.source).toMatch(/3 JSONL training problems, .*best of seeds 3,4 on 1 validation prompts/);
        // every prompt held out would leave nothing to train on
        let message = "";
        try {
            run("train.py", [...common, "--seeds", "3,4", "--validation-count", "4"]);
        } catch (err) {
            message = String((err as {stderr?: string; stdout?: string}).stderr ?? "") + String((err as {stdout?: string}).stdout ?? "");
        }
        expect(message).toMatch(/holds the last 4 prompts out for validation, but .* has 4/);
    }, 300_000);

    test("the read-horizon term: how long the model reads a key, in the gate's units, and recorded in the sidecar", async () => {
        // 12 tokens, each reading itself, but key 1 read strongly by query 5 (horizon 4) and key 0 weakly by query 4 (no
        // read at threshold 0.5). The loss is zero where -1 / log beta = horizon + 1 and counts only keys watched at least
        // max(min_seen, 2 x horizon) tokens after writing: with min_seen 10, keys 0 (11 watched) and 1 (10), not key 2 (9).
        const check = `
import sys, json, torch
sys.path.insert(0, ${JSON.stringify(scripts)})
from train import read_horizons, horizon_loss
w = torch.eye(12)[None].clone()
w[0, 5, 1], w[0, 5, 5] = 0.6, 0.4
w[0, 4, 0], w[0, 4, 4] = 0.3, 0.7
h = read_horizons(w, 0.5)
exact = torch.tensor([[-1.0 / (float(x) + 1) for x in h[0]]])
off = exact * 3
expected = torch.nn.functional.smooth_l1_loss(-torch.log(-off[0, :2]), torch.log1p(h[0, :2]))
print(json.dumps({"h": h[0].tolist(), "exact": float(horizon_loss(exact, h, min_seen=0)), "off": float(horizon_loss(off, h, min_seen=0)),
    "watched": float(horizon_loss(off, h, min_seen=10)), "expected": float(expected)}))
`;
        const result = JSON.parse(execFileSync(python, ["-c", check], {encoding: "utf8", timeout: 120_000})) as Record<
            string,
            number | number[]
        >;
        expect(result.h).toEqual([0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        expect(result.exact).toBeCloseTo(0, 6);
        expect(result.off).toBeGreaterThan(0.1);
        expect(result.watched).toBeCloseTo(result.expected as number, 6);

        const prompts = path.join(dir, "prompts-horizon.jsonl");
        await fs.writeFile(
            prompts,
            [
                [72, 101, 108, 108, 111],
                [65, 66, 67, 68, 69, 70]
            ]
                .map((tokens) => JSON.stringify({tokens}))
                .join("\n") + "\n"
        );
        const out = path.join(dir, "tiny-llama.retention.gguf");
        const log = run("train.py", [
            "--model",
            modelPath,
            "--prompts",
            prompts,
            "--out",
            out,
            "--steps",
            "2",
            "--hidden",
            "16",
            "--max-new",
            "24",
            "--budget",
            "8",
            "--cache-dir",
            path.join(dir, "cache"),
            "--log-every",
            "1",
            "--horizon-weight",
            "0.25"
        ]);
        expect(log).toMatch(/step 2\/2 .* hor [1-9]\d*\.\d+|step 2\/2 .* hor 0\.\d*[1-9]/);
        const found = await findRetentionGates({
            path: modelPath,
            architecture: "llama",
            layers: info.spec.nLayer,
            embeddingLength: info.spec.nEmbd,
            headCountKv: info.spec.nHeadKv
        });
        expect(found.available && found.info.source).toMatch(/capacity weight 1, horizon weight 0\.25 at read 0\.5, shared/);
        // a read is a share of one head's attention: outside (0, 1] it is refused before anything loads
        let message = "";
        try {
            run("train.py", [
                "--model",
                modelPath,
                "--prompts",
                prompts,
                "--out",
                out,
                "--horizon-weight",
                "0.25",
                "--read-threshold",
                "1.5"
            ]);
        } catch (err) {
            message = String((err as {stderr?: string}).stderr ?? "");
        }
        expect(message).toMatch(/--read-threshold must be above 0 and at most 1/);
    }, 300_000);

    test("a state_dict of another shape or gate type is refused with the reason", async () => {
        const weights = path.join(dir, "wrong.pth");
        run("makeFakeTrimkv.py", ["--model", modelPath, "--out", weights, "--seed", "4", "--hidden", "16"]);
        // drop one layer's gate: the converter names the missing key
        execFileSync(python, [
            "-c",
            `import torch; sd = torch.load(${JSON.stringify(weights)}); del sd["model.layers.1.self_attn.retention_gate.linear2.weight"]; torch.save(sd, ${JSON.stringify(weights)})`
        ]);
        let message = "";
        try {
            run("convertTrimkv.py", ["--weights", weights, "--model", modelPath, "--out", path.join(dir, "never.retention.gguf")]);
        } catch (err) {
            message = String((err as {stderr?: string}).stderr ?? err);
        }
        expect(message).toMatch(/layers\.1\.self_attn\.retention_gate\.linear2\.weight/);
        await expect(fs.access(path.join(dir, "never.retention.gguf"))).rejects.toThrow();
    }, 120_000);
});
