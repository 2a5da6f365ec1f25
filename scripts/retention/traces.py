"""Training/evaluation examples and the model's own greedy Full-KV continuations of them (cached on disk).

An example is a prompt (token ids) and, once traced, the model's greedy continuation with the full cache (thinking
included, up to and with the stop token). For the demo task the reference completion is offered as a proposal:
one teacher-forced pass checks that every next token of it is the model's argmax, in which case it IS the greedy
continuation (greedy decoding is deterministic); where it is not, greedy decoding continues from the first
difference. Other models decode from scratch.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import GgufModel  # noqa: E402

import task  # noqa: E402  (test/eval/train/task.py: the demo task and its tokenizer)

DEMO_STOP_IDS = (task.SPECIAL_IDS["<|im_end|>"], task.SPECIAL_IDS["<|endoftext|>"])
# where traced() caches the model's continuations, unless a script is told otherwise
DEFAULT_CACHE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache")
# the demo task's seeds: train.py trains on DEMO_TRAIN_SEED_BASE + 0 .. train-count - 1 (below task.EVAL_SEED_BASE =
# 2^31, the bench's held-out problems); validation problems (train.py --seeds, foresight.py, evaluate.py --first-seed)
# start well past them
DEMO_TRAIN_SEED_BASE = 1_000_000_000
DEMO_VALIDATION_SEED_BASE = 1_000_050_000


def demo_examples(first_seed: int, count: int, *, training: bool) -> list[dict]:
    """Demo-task problems with seeds first_seed.. as {"seed", "prompt", "proposal", "answer"}. Training seeds must stay
    below EVAL_SEED_BASE (2^31), evaluation seeds at or above it."""
    last = first_seed + count - 1
    if training and last >= task.EVAL_SEED_BASE:
        raise ValueError(f"training seeds must be below {task.EVAL_SEED_BASE} (held-out evaluation seeds); got up to {last}")
    if not training and first_seed < task.EVAL_SEED_BASE:
        raise ValueError(f"evaluation seeds must be >= {task.EVAL_SEED_BASE}")
    out = []
    for seed in range(first_seed, first_seed + count):
        p = task.generate_problem(seed)
        out.append({"seed": seed, "prompt": task.tokenize(task.render_prompt(p.question)),
                    "proposal": task.tokenize(task.render_completion(p.thinking, p.answer)), "answer": p.answer})
    return out


def jsonl_examples(path: str) -> list[dict]:
    """Prompts from a JSONL file: one object per line with "tokens" (already tokenized and rendered with the
    model's chat template, generation prompt included), and optionally "proposal": tokens the model is expected to
    write, checked in one pass before decoding (greedy_continuation keeps only what the model itself writes)."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            if not isinstance(obj.get("tokens"), list) or not all(isinstance(t, int) for t in obj["tokens"]):
                raise ValueError(f"{path}:{n}: each line needs \"tokens\": [ids...] (the rendered prompt, tokenized)")
            example = {"prompt": obj["tokens"]}
            proposal = obj.get("proposal")
            if proposal is not None:
                if not isinstance(proposal, list) or not all(isinstance(t, int) for t in proposal):
                    raise ValueError(f"{path}:{n}: \"proposal\" must be a list of token ids")
                example["proposal"] = proposal
            out.append(example)
    if not out:
        raise ValueError(f"{path}: no prompts")
    return out


@torch.no_grad()
def greedy_continuation(model: GgufModel, prompt: list[int], stop_ids, max_new: int, proposal: list[int] | None = None) -> list[int]:
    """The model's greedy continuation of prompt with the full cache, up to and including a stop token (or max_new)."""
    stop_ids = set(stop_ids)
    prefix: list[int] = []
    if proposal:
        logits = model(prompt + proposal)
        predicted = logits[len(prompt) - 1:].argmax(-1).tolist()
        agree = 0
        while agree < len(proposal) and predicted[agree] == proposal[agree] and proposal[agree] not in stop_ids:
            agree += 1
        if agree < len(proposal) and predicted[agree] == proposal[agree]:  # the stop token itself
            return proposal[:agree + 1]
        prefix = proposal[:agree]
    caches = [dict() for _ in model.layers]
    seq = prompt + prefix
    logits = model(seq, caches=caches)
    out = list(prefix)
    pos = len(seq)
    while len(out) < max_new:
        token = int(logits[-1].argmax())
        out.append(token)
        if token in stop_ids:
            break
        logits = model([token], positions=torch.tensor([pos]), mask=torch.zeros(1, pos + 1), caches=caches)
        pos += 1
    return out


def traced(model: GgufModel, model_fingerprint: str, examples: list[dict], stop_ids, max_new: int, cache_dir: str | None,
           log=print) -> list[dict]:
    """examples with "completion" (the greedy Full continuation) added, read from / written to cache_dir."""
    key = hashlib.sha256(json.dumps([model_fingerprint, sorted(stop_ids), max_new,
                                     [e["prompt"] for e in examples]]).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"traces-{key}.json") if cache_dir else None
    if path and os.path.exists(path):
        with open(path) as f:
            completions = json.load(f)
        log(f"traces: {len(completions)} from {os.path.relpath(path)}")
    else:
        completions = []
        for n, e in enumerate(examples):
            completions.append(greedy_continuation(model, e["prompt"], stop_ids, max_new, e.get("proposal")))
            if (n + 1) % 20 == 0 or n + 1 == len(examples):
                log(f"traces: {n + 1}/{len(examples)}")
        if path:
            os.makedirs(cache_dir, exist_ok=True)
            with open(path + ".tmp", "w") as f:
                json.dump(completions, f)
            os.replace(path + ".tmp", path)
    return [dict(e, completion=c) for e, c in zip(examples, completions)]


def stop_ids_from_metadata(meta: dict) -> list[int]:
    """eos / eot token ids of a GGUF model."""
    ids = [meta[k] for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id") if k in meta]
    if not ids:
        raise ValueError("the model declares no tokenizer.ggml.eos_token_id / eot_token_id")
    return sorted({int(i) for i in ids})
