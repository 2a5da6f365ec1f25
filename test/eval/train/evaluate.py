"""Greedy held-out accuracy in PyTorch, with the full KV cache and with a StreamingLLM-style window.

The window policy: while generating, every new token attends only to the first --sinks tokens and the most recent
ceil(--window * current length) tokens (the prompt is prefilled with full attention). This is what a cache that
keeps attention sinks + the last 25% of the tokens can see.

Usage: python3 test/eval/train/evaluate.py --ckpt test/eval/train/runs/main/final.pt --count 200 [--window 0.25]
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
from task import (TaskOptions, generate_problem, render_prompt, render_completion, tokenize, detokenize,
                  extract_answer, check_answer, EVAL_SEED_BASE, SPECIAL_IDS,
                  DEFAULT_MIN_STEPS, DEFAULT_MAX_STEPS, DEFAULT_MIN_VARS, DEFAULT_MAX_VARS)
from model import generate
from export import load_model


def run(model, problems, window, sinks):
    correct, exact, total_tokens = 0, 0, 0
    per_problem = []
    for problem in problems:
        prompt = tokenize(render_prompt(problem.question))
        target = tokenize(render_completion(problem.thinking, problem.answer))
        out = generate(model, prompt, len(target) + 64, {SPECIAL_IDS["<|im_end|>"], SPECIAL_IDS["<|endoftext|>"]},
                       window_fraction=window, sinks=sinks)
        text = detokenize(out)
        ok = check_answer(problem, extract_answer(text))
        correct += ok
        exact += out == target
        total_tokens += len(out)
        per_problem.append({"seed": problem.seed, "steps": problem.steps, "ok": bool(ok)})
    return {"accuracy": correct / len(problems), "exact_thinking": exact / len(problems),
            "generated_tokens": total_tokens}, per_problem


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--offset", type=int, default=0, help="held-out seeds EVAL_SEED_BASE + offset + i")
    p.add_argument("--min-steps", type=int, default=DEFAULT_MIN_STEPS)
    p.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    p.add_argument("--min-vars", type=int, default=DEFAULT_MIN_VARS)
    p.add_argument("--max-vars", type=int, default=DEFAULT_MAX_VARS)
    p.add_argument("--window", type=float, default=0.25, help="recent-window fraction for the windowed run (0: skip)")
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--details", help="write per-problem results (JSON) here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    model = load_model(args.ckpt)
    opts = TaskOptions(args.min_steps, args.max_steps, args.min_vars, args.max_vars)
    problems = [generate_problem(EVAL_SEED_BASE + args.offset + i, opts) for i in range(args.count)]
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
