"""Where the many-task model's thoughts go wrong, teacher-forced: per family, the accuracy of each column of the
thought's lines, and for tally the running counts by how far back the candidate's last vote is.

A completion is right only when every line of its thought is, so a column a little below 1.0 is what a family's greedy
accuracy loses. Held-out problems (seeds from EVAL_SEED_BASE + offset, `multiTask.held_out_options`), one forward pass
each, one thread.

Usage: python3 test/eval/train/familyErrors.py --ckpt <weights.pt> [--families tally,reverse] [--count 16] [--json out]
"""
from __future__ import annotations

import argparse
import collections
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch

import multiTask
from export import load_model
from task import EVAL_SEED_BASE, TOKEN_TEXT, render_completion, render_prompt, tokenize

# lines since the candidate's last vote, for tally's counts (0: the candidate's first vote, no line to read)
DISTANCE_BUCKETS = ((0, 0), (1, 1), (2, 3), (4, 7), (8, 15), (16, 31), (32, 10_000))


def bucket(distance: int) -> str:
    lo, hi = next(b for b in DISTANCE_BUCKETS if b[0] <= distance <= b[1])
    return "first vote" if hi == 0 else f"{lo}" if lo == hi else f"{lo}-{hi if hi < 10_000 else ''}"


def family_errors(model, family: str, count: int, offset: int) -> dict:
    opts = multiTask.held_out_options([family])
    columns: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    right = total = whole = 0
    for seed in range(EVAL_SEED_BASE + offset, EVAL_SEED_BASE + offset + count):
        p = multiTask.generate_problem(seed, opts)
        prompt, completion = tokenize(render_prompt(p.question)), tokenize(render_completion(p.thinking, p.answer))
        with torch.no_grad():
            predicted = model(torch.tensor([prompt + completion[:-1]]))[0].argmax(-1)[len(prompt) - 1:].tolist()
        lines = p.thinking.strip("\n").split("\n")
        # each completion token's line and column in the thought (None past the thought)
        starts, at = [], 0
        for token in completion:
            starts.append(at)
            at += len(TOKEN_TEXT[token].decode("utf-8", errors="replace"))
        line_starts = [sum(len(line) + 1 for line in lines[:k]) for k in range(len(lines))]
        last_vote: dict[str, int] = {}
        distance_of_line = []
        for k, line in enumerate(lines):
            name = line.split(":")[1].split("=")[0] if family == "tally" else ""
            distance_of_line.append(k - last_vote[name] if name in last_vote else 0)
            last_vote[name] = k
        ok_all = True
        for i, (token, guess) in enumerate(zip(completion, predicted)):
            ok = token == guess
            right += ok
            total += 1
            ok_all &= ok
            if starts[i] >= line_starts[-1] + len(lines[-1]):
                continue
            k = max(j for j, s in enumerate(line_starts) if s <= starts[i])
            column = starts[i] - line_starts[k]
            columns[column][0] += ok
            columns[column][1] += 1
            if family == "tally" and column > lines[k].index("="):
                c = counts[bucket(distance_of_line[k])]
                c[0] += ok
                c[1] += 1
        whole += ok_all
    report = {"family": family, "problems": count, "token_accuracy": round(right / total, 4), "whole": whole,
              "columns": {str(c): round(v[0] / v[1], 4) for c, v in sorted(columns.items())}}
    if family == "tally":
        report["count_by_distance"] = {b: {"accuracy": round(v[0] / v[1], 4), "tokens": v[1]} for b, v in counts.items()}
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt", required=True, help="a checkpoint or weights file of the many-task model")
    parser.add_argument("--families", default=",".join(multiTask.FAMILIES))
    parser.add_argument("--count", type=int, default=16, help="held-out problems per family. Defaults to 16.")
    parser.add_argument("--offset", type=int, default=0, help="first seed = EVAL_SEED_BASE + this. Defaults to 0.")
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.ckpt)
    reports = []
    for family in [f for f in args.families.split(",") if f]:
        if family not in multiTask.FAMILIES:
            parser.error(f"unknown family {family!r}")
        r = family_errors(model, family, args.count, args.offset)
        reports.append(r)
        worst = sorted(r["columns"].items(), key=lambda kv: kv[1])[:4]
        print(f"{family}: token accuracy {r['token_accuracy']:.4f}, completions whole {r['whole']}/{r['problems']}; "
              f"worst columns " + ", ".join(f"{c}: {a:.3f}" for c, a in worst), flush=True)
        if "count_by_distance" in r:
            print("  tally counts by lines since the candidate's last vote: " +
                  ", ".join(f"{b}: {v['accuracy']:.3f} ({v['tokens']})" for b, v in r["count_by_distance"].items()),
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)


if __name__ == "__main__":
    main()
