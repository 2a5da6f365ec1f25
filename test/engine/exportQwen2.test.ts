// test/eval/train's export of a qwen2 model (llama's graph with biases on q, k and v, NEOX RoPE; the many-task
// reasoner's architecture): a random qwen2 model with large biases, written as a weights file as train.py's
// --save-weights writes it, exported by export.py and read by llama.cpp, tokenizes every text as training does, renders
// the chat template to the training prompt, and gives PyTorch's next-token logits (verify.py). Without the biases in
// the GGUF the logits differ by far more than the rounding. The retention scripts' PyTorch replica of llama.cpp's graph
// (scripts/retention/ggufModel.py, which the simulations run) reads the same file and gives llama.cpp's logits.
// Needs Python with torch.
import {execFileSync} from "node:child_process";
import {mkdtempSync, rmSync} from "node:fs";
import os from "node:os";
import path from "node:path";
import {afterAll, expect, test} from "vitest";
import {torchPython} from "../fixtures/torchPython.js";

const root = path.resolve(import.meta.dirname, "../..");
const train = path.join(root, "test/eval/train");
const dir = mkdtempSync(path.join(os.tmpdir(), "ponder-qwen2-"));
afterAll(() => rmSync(dir, {recursive: true, force: true}));

const makeWeights = `
import sys, torch
sys.path.insert(0, sys.argv[1])
from model import ModelConfig, Transformer
from task import VOCAB_SIZE
torch.manual_seed(5)
cfg = ModelConfig(vocab_size=VOCAB_SIZE, n_embd=64, n_layer=2, n_head=4, n_ff=128, context_length=1024, arch="qwen2",
                  n_head_kv=2, n_embd_head=16)
model = Transformer(cfg)
with torch.no_grad():
    for layer in model.layers:
        for linear in (layer.wq, layer.wk, layer.wv):
            linear.bias.normal_(0, 0.5)
torch.save({"model": model.state_dict(), "step": 0, "config": cfg.to_dict(), "cpu": 0.0}, sys.argv[2])
`;

// The replica's next-token logits on three prefixes of a held-out problem of every family against llama.cpp's
// (check_llama_cpp exits non-zero past 1% of the largest logit or on a different argmax).
const checkReplica = `
import json, sys
sys.path.insert(0, sys.argv[1])
from ggufModel import check_llama_cpp, load_gguf_model
import multiTask, task
model, _ = load_gguf_model(sys.argv[2])
worst = 0.0
for family in multiTask.FAMILIES:
    p = multiTask.generate_problem(task.EVAL_SEED_BASE, multiTask.held_out_options([family]))
    sample = task.tokenize(multiTask.conversation(p))[:400]
    worst = max(worst, check_llama_cpp(model, sys.argv[2], sample, log=lambda m: None)["worstRelative"])
print(json.dumps({"worstRelative": worst}))
`;

type Verdict = {tokenization: string; template: string; logits: Array<{maxAbsDiff: number; maxLogit: number; sameArgmax: boolean}>};

function verify(weights: string, gguf: string): Verdict {
    const out = execFileSync(torchPython(), [path.join(train, "verify.py"), "--ckpt", weights, "--task", "multi", "--gguf", gguf], {
        cwd: root,
        encoding: "utf8",
        timeout: 300_000
    });
    return JSON.parse(out.slice(out.indexOf("{"))) as Verdict;
}

test("a qwen2 model exported from a weights file gives llama.cpp PyTorch's tokens, template and logits", () => {
    const python = torchPython();
    const weights = path.join(dir, "qwen2-weights.pt");
    const gguf = path.join(dir, "qwen2.gguf");
    execFileSync(python, ["-c", makeWeights, train, weights], {timeout: 120_000});
    // A weights file names no task: the export refuses it without --task, with the reason.
    expect(() =>
        execFileSync(python, [path.join(train, "export.py"), "--ckpt", weights, "--out", gguf], {
            cwd: root,
            stdio: "pipe",
            timeout: 120_000
        })
    ).toThrow(/does not name its task/);
    execFileSync(python, [path.join(train, "export.py"), "--ckpt", weights, "--task", "multi", "--out", gguf], {
        cwd: root,
        stdio: "pipe",
        timeout: 120_000
    });

    const verdict = verify(weights, gguf);
    expect(verdict.tokenization).toMatch(/^ok/);
    expect(verdict.template).toBe("ok");
    expect(verdict.logits).toHaveLength(3);
    for (const check of verdict.logits) {
        expect(check.sameArgmax).toBe(true);
        expect(check.maxAbsDiff).toBeLessThan(1e-3 * Math.max(1, check.maxLogit));
    }

    const replica = execFileSync(python, ["-c", checkReplica, path.join(root, "scripts/retention"), gguf], {
        cwd: root,
        encoding: "utf8",
        timeout: 600_000
    });
    const {worstRelative} = JSON.parse(replica.slice(replica.lastIndexOf("{"))) as {worstRelative: number};
    expect(worstRelative).toBeLessThan(1e-3);
}, 1_200_000);
