"""Exports a training checkpoint to GGUF (the checkpoint's architecture, llama, qwen2 or qwen3) via exportGguf.ts.

Usage: python3 test/eval/train/export.py --ckpt test/eval/train/runs/main/final.pt --out resources/models/ponder-demo.gguf
       python3 test/eval/train/export.py --ckpt test/eval/train/runs/merge/final.pt --task merge \
           --out resources/models/ponder-merge.gguf
       python3 test/eval/train/export.py --ckpt test/eval/train/checkpoints/multi-weights.pt --task multi --type f16

A checkpoint (train.py's checkpoint.pt or final.pt) names its task; a weights file (--save-weights) does not: give --task.

The PyTorch model already uses llama.cpp's layouts (RoPE "NORM" adjacent pairs for llama, "NEOX" halves for qwen3),
and qwen2's biases on q, k and v are llama.cpp's attn_q.bias, attn_k.bias and attn_v.bias,
so tensors are written as they are: a torch Linear weight [out, in] (row-major) is the ggml tensor with ne = [in, out].
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
# One core: OpenBLAS/OpenMP would otherwise start a thread per core (must be set before importing torch).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import ModelConfig, Transformer
from task import MERGE_PAIRS, SPECIAL_TOKENS, VOCAB_SIZE

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
# Per task: the model's name and description in the GGUF, and its default output path.
MODELS = {
    "demo": {
        "name": "Ponder Demo Reasoner",
        "description": "A ~1M-parameter llama-architecture model trained from scratch (test/eval/train in the Ponder repository) "
                       "on a synthetic long-range reasoning task: it evaluates a program of mod-10 additions inside "
                       "<think>...</think> and answers the value of ZZ. It knows nothing else.",
        "out": os.path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf")
    },
    "merge": {
        "name": "Ponder Merge Reasoner",
        "description": "A ~1.6M-parameter qwen3-architecture model (grouped-query attention) trained from scratch "
                       "(test/eval/train in the Ponder repository) on a synthetic task: it merges two sorted lists of "
                       "two-digit numbers step by step inside <think>...</think> and answers the k-th number of the merge. "
                       "It knows nothing else.",
        "out": os.path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf")
    },
    "multi": {
        "name": "Ponder Reasoner",
        "description": "A ~3M-parameter qwen2-architecture model (grouped-query attention, biases on q, k and v) trained "
                       "from scratch (test/eval/train in the Ponder repository) on six synthetic task families asked in "
                       "words: running a program of mod-10 additions, the k-th number of two merged sorted lists, a "
                       "running sum mod 100, following arrows, reversing a list, and counting votes. It thinks step by "
                       "step inside <think>...</think> and then answers. It knows nothing else.",
        "out": os.path.join(REPO_ROOT, "resources", "models", "ponder-multi.gguf")
    },
    "recur": {
        "name": "Ponder Recurrence Reasoner",
        "description": "A ~1M-parameter llama-architecture model (grouped-query attention) trained from scratch "
                       "(test/eval/train in the Ponder repository) on a synthetic task with a short question and a long "
                       "thought: from two one-digit values it writes f(n) = f(n-1) + f(n/2) mod 10 line by line inside "
                       "<think>...</think>, reading its own lines far back, and answers the asked value. It knows "
                       "nothing else.",
        "out": os.path.join(REPO_ROOT, "test", "eval", "models", "ponder-recur.gguf")
    }
}


def gguf_tensors(model: Transformer):
    """(gguf name, torch tensor) in llama.cpp's conventional order."""
    out = [("token_embd.weight", model.tok_embeddings.weight)]
    for i, layer in enumerate(model.layers):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", layer.attn_norm.weight),
            (p + "attn_q.weight", layer.wq.weight),
            (p + "attn_k.weight", layer.wk.weight),
            (p + "attn_v.weight", layer.wv.weight),
            (p + "attn_output.weight", layer.wo.weight),
        ]
        if model.cfg.arch == "qwen2":
            out += [(p + "attn_q.bias", layer.wq.bias), (p + "attn_k.bias", layer.wk.bias), (p + "attn_v.bias", layer.wv.bias)]
        if model.cfg.arch == "qwen3":
            out += [(p + "attn_q_norm.weight", layer.q_norm.weight), (p + "attn_k_norm.weight", layer.k_norm.weight)]
        out += [
            (p + "ffn_norm.weight", layer.ffn_norm.weight),
            (p + "ffn_gate.weight", layer.w_gate.weight),
            (p + "ffn_up.weight", layer.w_up.weight),
            (p + "ffn_down.weight", layer.w_down.weight),
        ]
    out += [("output_norm.weight", model.norm.weight), ("output.weight", model.output.weight)]
    return out


def load_model(ckpt_path: str) -> Transformer:
    """A checkpoint's or a weights file's model (a weights file may hold F16 values: read back as F32)."""
    ckpt = torch.load(ckpt_path)
    model = Transformer(ModelConfig(**ckpt["config"]))
    model.load_state_dict({name: tensor.float() for name, tensor in ckpt["model"].items()})
    model.eval()
    return model


def task_of(ckpt_path: str, task: str | None) -> str:
    """The task a model was trained on: the one asked for, else the checkpoint's --task (runs before the option were
    the demo task's); a weights file names none."""
    if task is not None:
        return task
    args = torch.load(ckpt_path).get("args")
    if args is None:
        raise SystemExit(f"{ckpt_path} does not name its task (a weights file): give --task")
    return args.get("task", "demo")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--task", choices=sorted(MODELS), help="the task the model was trained on; the checkpoint's --task")
    p.add_argument("--out", help="the GGUF to write; the task's model in resources/models/")
    p.add_argument("--type", choices=["f32", "f16"], default="f32", help="type of the matrices (norms stay F32)")
    args = p.parse_args()

    model = load_model(args.ckpt)
    assert model.cfg.vocab_size == VOCAB_SIZE, "checkpoint vocabulary differs from task.py's tokenizer"
    task = task_of(args.ckpt, args.task)
    info = MODELS[task]
    args.out = args.out or info["out"]
    header = {"config": {**model.cfg.to_dict(), "n_head_kv": model.cfg.kv_heads, "n_embd_head": model.cfg.head_dim},
              "name": info["name"], "description": info["description"], "merges": [f"{p[0]} {p[1]}" for p in MERGE_PAIRS],
              "specialTokens": SPECIAL_TOKENS, "tensors": []}
    with tempfile.TemporaryDirectory() as tmp:
        bin_path = os.path.join(tmp, "dump.bin")
        offset = 0
        with open(bin_path, "wb") as f:
            for name, tensor in gguf_tensors(model):
                array = tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4")
                header["tensors"].append({"name": name, "shape": list(array.shape), "offset": offset})
                f.write(array.tobytes())
                offset += array.nbytes
        json_path = os.path.join(tmp, "dump.json")
        with open(json_path, "w") as f:
            json.dump(header, f)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        subprocess.run(["npx", "tsx", os.path.join("test", "eval", "train", "exportGguf.ts"), json_path,
                        os.path.abspath(args.out), args.type], cwd=REPO_ROOT, check=True)


if __name__ == "__main__":
    main()
