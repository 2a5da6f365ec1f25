"""Prints the loss weight the training tool gives each target token of a problem, as JSON lines: what `make_batch`
trains on, for a person checking a change to a task's thought or to `answer_slots`, and for the tests.

Usage: python3 test/eval/train/lossWeights.py --task multi --families sum,tally --seeds 1,2 [--answer-loss 3]
A line per family and seed (the many-task model: each family alone): {"seed", "family", "prompt_tokens", "targets": [[token text, weight], ...]} for the targets from the
assistant's first token on (the prompt's own targets are listed too when --question-loss is above 0).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402 (sets the thread count before importing torch)
from task import TOKEN_TEXT, render_prompt, tokenize  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(train.TASKS), default="multi")
    parser.add_argument("--families", help="the many-task model's families to draw from (comma-separated)")
    parser.add_argument("--seeds", required=True, help="problem seeds (comma-separated)")
    parser.add_argument("--answer-loss", type=float, default=3.0)
    parser.add_argument("--question-loss", type=float, default=0.0)
    args = parser.parse_args()

    train.args_task = train.TASKS[args.task]
    if args.task == "multi":
        families = args.families.split(",") if args.families else list(train.multi_task.FAMILIES)
        option_sets = [train.multi_task.TaskOptions(0, 100, [family]) for family in families]
    else:
        option_sets = [train.args_task.options(8, 8, 4, 4)]
    for opts in option_sets:
        for seed in (int(s) for s in args.seeds.split(",")):
            print(json.dumps(weights_of(seed, opts, args)))


def weights_of(seed: int, opts, args) -> dict:
    tokens, weights = (t[0].tolist() for t in train.make_batch([seed], opts, question_weight=args.question_loss,
                                                                answer_weight=args.answer_loss)[:2])
    problem = train.args_task.generate_problem(seed, opts)
    n_prompt = len(tokenize(render_prompt(problem.question)))
    # target i is tokens[i + 1]; the padding of a packed row carries weight 0 and is left out
    first = 0 if args.question_loss > 0 else n_prompt - 1
    last = max(i for i, w in enumerate(weights) if w > 0)
    targets = [[TOKEN_TEXT[tokens[i + 1]].decode(), weights[i]] for i in range(first, last + 1)]
    return {"seed": seed, "family": getattr(problem, "family", args.task), "prompt_tokens": n_prompt, "targets": targets}

if __name__ == "__main__":
    main()
