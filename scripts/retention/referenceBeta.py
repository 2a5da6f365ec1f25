"""Prints the retention gates' logits g (before logsigmoid) for a token sequence, computed in PyTorch from the
replica's attn_norm outputs (full causal attention, positions 0..n-1), for tests that compare the engine's values.

    python3 scripts/retention/referenceBeta.py --model model.gguf (--weights trimkv_weights.pth | --sidecar x.retention.gguf) \
        --tokens 1,2,3

Output (stdout, JSON): {"layers": [[[g per KV head] per token] per layer]}.
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
from ggufModel import UnsupportedModelError, load_gguf_model  # noqa: E402
from convertTrimkv import ConversionError, load_gates_for_model  # noqa: E402
from sidecar import SidecarError, read_sidecar  # noqa: E402


@torch.no_grad()
def gate_logits(model, gates, tokens: list[int]) -> torch.Tensor:
    """[L, T, n_kv] gate logits from the attn_norm outputs of a full causal pass."""
    states: list[torch.Tensor] = []
    model(tokens, on_attn_norm=lambda layer, h: states.append(h))
    return gates.logits(states)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--weights", help="the authors' trimkv_weights.pth state_dict")
    src.add_argument("--sidecar", help="a retention sidecar")
    p.add_argument("--tokens", required=True, help="comma-separated token ids")
    args = p.parse_args()
    torch.set_num_threads(1)
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        raise SystemExit("error: --tokens must be comma-separated integers")
    if not tokens:
        raise SystemExit("error: no tokens")
    try:
        model, _ = load_gguf_model(args.model)
        if max(tokens) >= model.cfg.vocab_size or min(tokens) < 0:
            raise SystemExit(f"error: token ids must be in [0, {model.cfg.vocab_size})")
        gates = load_gates_for_model(args.weights, args.model) if args.weights else read_sidecar(args.sidecar, args.model)[1]
    except (UnsupportedModelError, ConversionError, SidecarError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}")
    g = gate_logits(model, gates, tokens)
    print(json.dumps({"layers": g.tolist()}))


if __name__ == "__main__":
    main()
