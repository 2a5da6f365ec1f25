"""Greedy held-out accuracy in PyTorch, with the full KV cache and with a StreamingLLM-style window.

The window policy: while generating, every new token attends only to the first --sinks tokens and the most recent
ceil(--window * current length) tokens (the prompt is prefilled with full attention). This is what a cache that
keeps attention sinks + the last 25% of the tokens can see.

Usage: python3 test/eval/train/evaluate.py --ckpt test/eval/train/runs/main/final.pt --count 200 [--window 0.25]

Problems are of the checkpoint's task (its --task); --min-steps ... --max-vars default to the task's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

# One core: OpenBLAS/OpenMP would otherwise start a thread per core (must be set before importing torch).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from task import render_prompt, render_completion, tokenize, detokenize, extract_answer, EVAL_SEED_BASE, SPECIAL_IDS
from model import generate
from export import load_model
from train import TASKS


def run(model, problems, window, sinks):
    correct, exact, total_tokens = 0, 0, 0
    per_problem = []
    for problem in problems:
        prompt = tokenize(render_prompt(problem.question))
        target = tokenize(render_completion(problem.thinking, problem.answer))
        out = generate(model, prompt, len(target) + 64, {SPECIAL_IDS["<|im_end|>"], SPECIAL_IDS["<|endoftext|>"]},
                       window_fraction=window, sinks=sinks)
        text = detokenize(out)
        ok = extract_answer(text) == problem.answer
        correct += ok
        exact += out == target
        total_tokens += len(out)
        per_problem.append({"seed": problem.seed, "size": len(target), "ok": bool(ok)})
    return {"accuracy": correct / len(problems), "exact_thinking": exact / len(problems),
            "generated_tokens": total_tokens}, per_problem


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--offset", type=int, default=0, help="held-out seeds EVAL_SEED_BASE + offset + i")
    p.add_argument("--min-steps", type=int, help="smallest size (program steps, list items)")
    p.add_argument("--max-steps", type=int, help="largest size")
    p.add_argument("--min-vars", type=int)
    p.add_argument("--max-vars", type=int)
    p.add_argument("--window", type=float, default=0.25, help="recent-window fraction for the windowed run (0: skip)")
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--details", help="write per-problem results (JSON) here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    model = load_model(args.ckpt)
    task = TASKS[torch.load(args.ckpt)["args"].get("task", "demo")]
    args.min_steps = args.min_steps if args.min_steps is not None else task.DEFAULT_MIN_SIZE
    args.max_steps = args.max_steps if args.max_steps is not None else task.DEFAULT_MAX_SIZE
    args.min_vars = args.min_vars if args.min_vars is not None else task.DEFAULT_MIN_VARS
    args.max_vars = args.max_vars if args.max_vars is not None else task.DEFAULT_MAX_VARS
    opts = task.options(args.min_steps, args.max_steps, args.min_vars, args.max_vars)
    problems = [task.generate_problem(EVAL_SEED_BASE + args.offset + i, opts) for i in range(args.count)]
    report = {"count": args.count, "steps": [args.min_steps, args.max_steps],
              "mean_thinking_tokens": sum(len(tokenize(pr.thinking)) for pr in problems) / len(problems)}
    details = {}
    t0 = time.time()
    report["full"], details["full"] = run(model, problems, None, args.sinks)
    report["full"]["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(report), flush=True)
    if args.window > 0:
        t0 = time.time()
        key = f"window_{args.window:g}"
        report[key], details[key] = run(model, problems, args.window, args.sinks)
        report[key]["seconds"] = round(time.time() - t0, 1)
        report[key]["sinks"] = args.sinks
    print(json.dumps(report), flush=True)
    if args.details:
        with open(args.details, "w") as f:
            json.dump({"report": report, "problems": details}, f)


if __name__ == "__main__":
    main()
