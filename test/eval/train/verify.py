"""Compares PyTorch and llama.cpp on an exported model: tokenization, chat template and next-token logits.

Usage: python3 test/eval/train/verify.py --ckpt test/eval/train/runs/main/final.pt --gguf resources/models/ponder-demo.gguf
       python3 test/eval/train/verify.py --ckpt test/eval/train/runs/merge/final.pt --gguf resources/models/ponder-merge.gguf
       python3 test/eval/train/verify.py --ckpt test/eval/train/checkpoints/multi-weights.pt --task multi \
           --gguf resources/models/ponder-multi.gguf

The sample texts are problems of the checkpoint's task (its --task).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

# One core: OpenBLAS/OpenMP would otherwise start a thread per core (must be set before importing torch).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from task import render_prompt, render_completion, tokenize, EVAL_SEED_BASE
from export import load_model, task_of, REPO_ROOT, MODELS
from train import TASKS


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", required=True)
    p.add_argument("--gguf", help="the exported model; the task's model in resources/models/")
    p.add_argument("--task", choices=sorted(MODELS), help="the task the model was trained on; the checkpoint's --task")
    p.add_argument("--seed", type=int, default=EVAL_SEED_BASE + 20_000_000)
    args = p.parse_args()
    torch.set_num_threads(1)

    model = load_model(args.ckpt)
    task_name = task_of(args.ckpt, args.task)
    task = TASKS[task_name]
    args.gguf = args.gguf or MODELS[task_name]["out"]
    generate_problem = task.generate_problem
    problem = generate_problem(args.seed, task.options(40, 40, task.DEFAULT_MIN_VARS, task.DEFAULT_MAX_VARS))
    prompt = render_prompt(problem.question)
    full = prompt + render_completion(problem.thinking, problem.answer)
    prompt_ids = tokenize(prompt)
    full_ids = tokenize(full)
    from train import SYSTEM_PROMPTS
    texts = [full, problem.question, "Hello, world! <think>\n a  b\n\n\tc~{}|</think>",
             "The quick brown fox jumps over the lazy dog. ABCDEFG abcdefg ZZZ xY aaaa AAAAA Zz.\n\n  x1y22z333",
             "<|im_start|>system\nsystem user assistant<|im_end|>\n<|endoftext|>"]
    texts += [render_prompt(problem.question, s) for s in SYSTEM_PROMPTS]
    texts += [render_prompt(generate_problem(args.seed + i).question) + render_completion(
        generate_problem(args.seed + i).thinking, generate_problem(args.seed + i).answer) for i in range(1, 20)]
    reference = {
        "texts": [{"text": t, "ids": tokenize(t)} for t in texts],
        "question": problem.question,
        "promptIds": prompt_ids,
        "logitChecks": [],
    }
    with torch.no_grad():
        logits = model(torch.tensor([full_ids]))[0]
    for n in [len(prompt_ids), len(prompt_ids) + 300, len(full_ids) - 1]:
        reference["logitChecks"].append({"ids": full_ids[:n], "logits": logits[n - 1].tolist()})

    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "reference.json")
        with open(ref_path, "w") as f:
            json.dump(reference, f)
        subprocess.run(["npx", "tsx", os.path.join("test", "eval", "train", "compareLlamaCpp.ts"), ref_path,
                        os.path.abspath(args.gguf)], cwd=REPO_ROOT, check=True)


if __name__ == "__main__":
    main()
