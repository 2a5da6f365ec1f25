"""Writes a fake `trimkv_weights.pth` for a GGUF model: the TRIM-KV authors' exact key names and shapes ("rg" gate),
random values (weights and linear1 bias N(0, scale), scale 0.02 as the authors initialise them; per-head bias U(8, 14)),
for engine tests (a larger --scale makes the token-dependent part of the logits large enough to check).

    python3 scripts/retention/makeFakeTrimkv.py --model fixture.gguf --out trimkv_weights.pth --seed 1 [--hidden 512] [--scale 0.02]
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import UnsupportedModelError, model_summary  # noqa: E402


def fake_state_dict(n_layer: int, d: int, n_kv: int, hidden: int, seed: int, scale: float = 0.02) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    sd: dict[str, torch.Tensor] = {}
    for i in range(n_layer):
        p = f"model.layers.{i}.self_attn.retention_gate."
        sd[p + "linear1.weight"] = torch.randn(hidden, d, generator=gen) * scale
        sd[p + "linear1.bias"] = torch.randn(hidden, generator=gen) * scale
        sd[p + "linear2.weight"] = torch.randn(n_kv, hidden, generator=gen) * scale
        sd[p + "bias"] = 8.0 + 6.0 * torch.rand(n_kv, generator=gen)
    return sd


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1, help="Defaults to 1.")
    p.add_argument("--hidden", type=int, default=512, help="gate hidden size H. Defaults to 512.")
    p.add_argument("--scale", type=float, default=0.02, help="standard deviation of the random weights. Defaults to 0.02.")
    args = p.parse_args()
    try:
        s = model_summary(args.model)
    except (UnsupportedModelError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}")
    sd = fake_state_dict(int(s["block_count"]), int(s["embedding_length"]), int(s["head_count_kv"]), args.hidden, args.seed, args.scale)
    tmp = args.out + ".tmp"
    torch.save(sd, tmp)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {s['block_count']} layers, d {s['embedding_length']}, {s['head_count_kv']} KV heads, hidden {args.hidden}")


if __name__ == "__main__":
    main()
