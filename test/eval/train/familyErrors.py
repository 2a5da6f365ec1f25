"""Where the many-task model's thoughts go wrong, teacher-forced: per family, the accuracy of each column of the
thought's lines, and for tally the running count on the asked candidate's votes ("+") and on the others (".").

A completion is right only when every line of its thought is, so a column a little below 1.0 is what a family's greedy
accuracy loses. Held-out problems (seeds from EVAL_SEED_BASE + offset, `multiTask.held_out_options`), one forward pass
each, one thread.

Usage: python3 test/eval/train/familyErrors.py --ckpt <weights.pt> [--families tally,reverse] [--count 16] [--json out]
"""
from __future__ import annotations

import argparse
import bisect
import collections
import itertools
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch

import multiTask
from export import load_model
from task import EVAL_SEED_BASE, TOKEN_TEXT, render_completion, render_prompt, tokenize

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
        # each completion token's offset in the text, and each thought line's first offset
        starts = [0, *itertools.accumulate(len(TOKEN_TEXT[t].decode("utf-8", errors="replace")) for t in completion)]
        line_starts = [0, *itertools.accumulate(len(line) + 1 for line in lines[:-1])]
        ok_all = True
        for i, (token, guess) in enumerate(zip(completion, predicted)):
            ok = token == guess
            right += ok
            total += 1
            ok_all &= ok
            if starts[i] >= line_starts[-1] + len(lines[-1]):
                continue
            k = bisect.bisect_right(line_starts, starts[i]) - 1
            column = starts[i] - line_starts[k]
            columns[column][0] += ok
            columns[column][1] += 1
            if family == "tally" and column >= multiTask.TALLY_MARK_COLUMN:  # the mark and the count
                c = counts["asked" if lines[k][multiTask.TALLY_MARK_COLUMN] == "+" else "other"]
                c[0] += ok
                c[1] += 1
        whole += ok_all
    report = {"family": family, "problems": count, "token_accuracy": round(right / total, 4), "whole": whole,
              "columns": {str(c): round(v[0] / v[1], 4) for c, v in sorted(columns.items())}}
    if family == "tally":
        report["count_by_vote"] = {b: {"accuracy": round(v[0] / v[1], 4), "tokens": v[1]} for b, v in counts.items()}
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
        if "count_by_vote" in r:
            print("  tally's count on votes for the asked candidate and for the others: " +
                  ", ".join(f"{b}: {v['accuracy']:.3f} ({v['tokens']})" for b, v in r["count_by_vote"].items()),
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)


if __name__ == "__main__":
    main()
