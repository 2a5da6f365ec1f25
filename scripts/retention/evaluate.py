"""Simulates Ponder's eviction with retention gates on held-out demo problems, to choose training settings without
the app.

For each held-out problem (seeds EVAL_SEED_BASE + offset + i, never used in training) the model's greedy Full-KV
completion is the reference. Under a hard cache of budget = round(share * length of Full's sequence) cells
(prompt + completion), evicting every 16 tokens (position 0 and the 8 newest cells kept; see evictionSim.py), it
reports per share and ranking policy:

- agreement: teacher-forced top-1 agreement with Full over all completion tokens;
- identical: share of problems whose greedy output (thinking and answer) stays identical to Full's;
- correct: share of problems answered correctly by greedy decoding under eviction (Full's answer rate alongside).

"recent" (keep the newest cells) is the oracle-free baseline the learned ranking has to beat.

Usage: python3 scripts/retention/evaluate.py --model resources/models/ponder-demo.gguf \
    --sidecar resources/models/ponder-demo.retention.gguf --count 60 [--shares 0.25,0.5,0.75] [--policies retention,recent]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import load_gguf_model  # noqa: E402
from sidecar import fingerprint, read_sidecar  # noqa: E402
from evictionSim import POLICIES, simulate  # noqa: E402
from traces import DEFAULT_CACHE_DIR, DEMO_STOP_IDS, demo_examples, task, traced  # noqa: E402


def is_correct(example: dict, output: list[int]) -> bool:
    return task.check_answer(task.generate_problem(example["seed"]), task.extract_answer(task.detokenize(output)))


def evaluate(model, gates, examples: list[dict], shares: list[float], policies: list[str], decode: bool = True,
             log=None) -> dict:
    """{"full_correct", "<policy>@<share>": {"agreement", "identical", "correct"}} over traced demo examples."""
    report: dict = {"problems": len(examples),
                    "full_correct": sum(is_correct(e, e["completion"]) for e in examples) / len(examples)}
    for policy in policies:
        for share in shares:
            t0 = time.time()
            agree_tokens = total_tokens = identical = correct = 0
            for e in examples:
                budget = round(share * (len(e["prompt"]) + len(e["completion"])))
                r = simulate(model, gates if policy == "retention" else None, policy, budget, e["prompt"], e["completion"],
                             DEMO_STOP_IDS, decode=decode)
                agree_tokens += r["agreement"] * len(e["completion"])
                total_tokens += len(e["completion"])
                identical += r["identical"]
                correct += is_correct(e, r["output"]) if decode else r["identical"]
            key = f"{policy}@{share:g}"
            report[key] = {"agreement": round(agree_tokens / total_tokens, 4), "identical": round(identical / len(examples), 4),
                           "correct": round(correct / len(examples), 4), "seconds": round(time.time() - t0, 1)}
            if log:
                log(f"{key}: {json.dumps(report[key])}")
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the GGUF model (the demo model: the task is the demo task)")
    p.add_argument("--sidecar", help="retention sidecar (default: <model>.retention.gguf); needed for the retention policy")
    p.add_argument("--count", type=int, default=60, help="held-out problems. Defaults to 60.")
    p.add_argument("--offset", type=int, default=0, help="first held-out seed = EVAL_SEED_BASE + offset. Defaults to 0.")
    p.add_argument("--first-seed", type=int, default=None,
                   help="instead of --offset: the first seed, for a validation set of training-range seeds (below 2^31) "
                        "that train.py does not use (it takes 1e9 .. 1e9 + train-count - 1)")
    p.add_argument("--shares", default="0.25,0.5,0.75", help="budgets as shares of Full's length. Defaults to 0.25,0.5,0.75.")
    p.add_argument("--policies", default="retention,recent", help=f"comma-separated, of {POLICIES}. Defaults to both.")
    p.add_argument("--no-decode", action="store_true", help="teacher-forced only (correct = identical)")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR, help="where Full's traces are cached")
    p.add_argument("--json", help="also write the report here")
    args = p.parse_args()
    torch.set_num_threads(1)

    model, _ = load_gguf_model(args.model)
    policies = [x for x in args.policies.split(",") if x]
    for x in policies:
        if x not in POLICIES:
            p.error(f"unknown policy {x!r}")
    gates = None
    if "retention" in policies:
        sidecar = args.sidecar or (args.model[:-5] + ".retention.gguf")
        meta, gates = read_sidecar(sidecar, args.model)
        print(f"sidecar {sidecar}: budget {meta['ponder.retention.budget']}, reduction {meta['ponder.retention.reduction']}, "
              f"{meta['ponder.retention.source']}", flush=True)
    first = task.EVAL_SEED_BASE + args.offset if args.first_seed is None else args.first_seed
    examples = demo_examples(first, args.count, training=first < task.EVAL_SEED_BASE)
    examples = traced(model, fingerprint(args.model), examples, DEMO_STOP_IDS, 4096, args.cache_dir,
                      log=lambda m: print(m, flush=True))
    shares = [float(s) for s in args.shares.split(",")]
    report = evaluate(model, gates, examples, shares, policies, decode=not args.no_decode,
                      log=lambda m: print(m, flush=True))
    print(json.dumps(report), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
