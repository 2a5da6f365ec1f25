"""The bench's foresight read-out (test/bench/foresight.ts) for retention gates in PyTorch, to compare gate files
without the app: along the model's greedy Full-KV traces (nothing evicted), does the gates' log beta at writing
(the max over layers and KV heads) rank the cells the chain of thought reads later above the ones it does not?

A read is one head of one layer putting at least half its attention on a cell. Question cells (after the first) are
"read later" when first read more than 64 tokens into the answer, "not read later" when never read; generated cells
are "read later" when read again more than 64 tokens after being written. AUC = P(read later > not read later),
ties half; the same definitions as the bench suite.

Selection between gate files belongs on problems neither trained on nor used by the bench: the default seeds are
training-range seeds (below 2^31) past the ones train.py uses.

Usage: python3 scripts/retention/foresight.py --model resources/models/ponder-demo.gguf \
    --sidecar resources/models/ponder-demo.retention.gguf [--first-seed 1000050000 --count 16]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import load_gguf_model  # noqa: E402
from sidecar import fingerprint, read_sidecar  # noqa: E402
from traces import DEFAULT_CACHE_DIR, DEMO_STOP_IDS, DEMO_VALIDATION_SEED_BASE, demo_examples, task, traced  # noqa: E402

SHARP_READ = 0.5
LATER = 64
DEFAULT_FIRST_SEED = DEMO_VALIDATION_SEED_BASE


def pairwise_auc(a: list[float], b: list[float]) -> float:
    """Mann-Whitney: P(x > y) for x from a, y from b, ties half."""
    if not a or not b:
        return float("nan")
    x = torch.tensor(a, dtype=torch.float64)
    y = torch.tensor(b, dtype=torch.float64)
    both = torch.cat((x, y))
    order = both.argsort()
    ranks = torch.empty_like(both)
    ranks[order] = torch.arange(1, len(both) + 1, dtype=torch.float64)
    # average ranks of ties
    values, inverse, counts = torch.unique(both, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(values), dtype=torch.float64).index_add_(0, inverse, ranks)
    ranks = (sums / counts)[inverse]
    return float((ranks[:len(a)].sum() - len(a) * (len(a) + 1) / 2) / (len(a) * len(b)))


@torch.no_grad()
def samples(model, gates, prompt: list[int], completion: list[int]) -> dict:
    """{"question"|"generated": {"needed": [...], "not_needed": [...]}} of max log beta at writing."""
    seq = prompt + completion
    n_prompt = len(prompt)
    states: list[torch.Tensor] = []
    sharpest = torch.zeros(len(seq), len(seq))

    def on_attn(_layer, weights):
        torch.maximum(sharpest, weights.amax(0), out=sharpest)

    model(seq, on_attn_norm=lambda _layer, h: states.append(h), on_attn=on_attn)
    signal = gates.log_beta(states).amax(dim=(0, 2)).double()  # [T]
    rows = sharpest[n_prompt:]  # row r: the query at position n_prompt + r
    reads = rows >= SHARP_READ
    out = {"question": {"needed": [], "not_needed": []}, "generated": {"needed": [], "not_needed": []}}
    n_rows = rows.shape[0]
    if n_rows > LATER:
        for position in range(1, n_prompt):
            hit = reads[:, position].nonzero()
            first = int(hit[0]) if len(hit) else -1
            if 0 <= first < LATER:
                continue
            out["question"]["needed" if first >= LATER else "not_needed"].append(float(signal[position]))
    for written in range(0, n_rows - LATER):
        position = n_prompt + written
        read_later = bool(reads[written + LATER + 1:, position].any())
        out["generated"]["needed" if read_later else "not_needed"].append(float(signal[position]))
    return out


def foresight(model, gates, examples: list[dict]) -> dict:
    merged = {"question": {"needed": [], "not_needed": []}, "generated": {"needed": [], "not_needed": []}}
    for e in examples:
        s = samples(model, gates, e["prompt"], e["completion"])
        for cells in merged:
            for kind in merged[cells]:
                merged[cells][kind] += s[cells][kind]
    return {cells: {"needed": len(v["needed"]), "not_needed": len(v["not_needed"]),
                    "auc": round(pairwise_auc(v["needed"], v["not_needed"]), 4)} for cells, v in merged.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the demo model")
    p.add_argument("--sidecar", nargs="+", help="gate files (default: <model>.retention.gguf)")
    p.add_argument("--first-seed", type=int, default=DEFAULT_FIRST_SEED, help=f"Defaults to {DEFAULT_FIRST_SEED}.")
    p.add_argument("--count", type=int, default=16, help="problems. Defaults to 16.")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR)
    args = p.parse_args()
    torch.set_num_threads(1)
    model, _ = load_gguf_model(args.model)
    heldout = args.first_seed >= task.EVAL_SEED_BASE
    examples = traced(model, fingerprint(args.model), demo_examples(args.first_seed, args.count, training=not heldout),
                      DEMO_STOP_IDS, 4096, args.cache_dir, log=lambda m: print(m, file=sys.stderr, flush=True))
    for path in args.sidecar or [args.model[:-5] + ".retention.gguf"]:
        _, gates = read_sidecar(path, args.model)
        print(json.dumps({"sidecar": path, **foresight(model, gates, examples)}), flush=True)


if __name__ == "__main__":
    main()
