"""Converts the TRIM-KV authors' released gate weights (`trimkv_weights.pth`) into a Ponder retention sidecar.

    npm run convert:trimkv:py -- --weights trimkv_weights.pth --model model.gguf [--out model.retention.gguf] [--type f16]

The checkpoint is a PyTorch state_dict with, for every layer i,
    model.layers.{i}.self_attn.retention_gate.linear1.weight [H, d]
    model.layers.{i}.self_attn.retention_gate.linear1.bias   [H]
    model.layers.{i}.self_attn.retention_gate.linear2.weight [n_kv, H]
    model.layers.{i}.self_attn.retention_gate.bias           [n_kv]
(the "rg" gate: linear1, SiLU, linear2 without bias, per-head bias, logsigmoid). Layer count, d and n_kv are checked
against the GGUF model's metadata. Anything else is refused with the reason: missing or unexpected keys, wrong
shapes, a linear2 bias, or another gate type (gate_proj/up_proj = "rg3", per-head projections = "rg2").
The sidecar records budget 0 (unknown) and reduction "per-head" (how the authors trained). The checkpoint is loaded with
torch's weights-only unpickler (torch.load(weights_only=True)): a pickle that names anything but tensors, storages and
plain containers is refused, and nothing in it runs.
"""
from __future__ import annotations

import argparse
import os
import pickle
import re
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import UnsupportedModelError, model_summary  # noqa: E402
from sidecar import RetentionGates, SidecarError, default_matrix_type, sidecar_path_for, write_sidecar  # noqa: E402

KEY_RE = re.compile(r"^(?:.*\.)?layers\.(\d+)\.self_attn\.retention_gate\.(.+)$")
RG_PARTS = ("linear1.weight", "linear1.bias", "linear2.weight", "bias")


class ConversionError(Exception):
    pass


def load_state_dict(path: str) -> dict[str, torch.Tensor]:
    """Loads the checkpoint with torch's weights-only unpickler: a pickle naming anything but tensors, storages and
    plain containers (os.system, say) is refused before it runs."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        refused = re.search(r"WeightsUnpickler error: (.*)", str(e))
        raise ConversionError(f"{path}: its pickle asks for more than a state_dict of tensors "
                              f"({refused.group(1).strip() if refused else e}); it was refused and nothing was run") from e
    except Exception as e:
        raise ConversionError(f"{path}: not a PyTorch checkpoint ({e})") from e
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ConversionError(f"{path}: expected a state_dict (name -> tensor)")
    return obj


def gates_from_state_dict(sd: dict[str, torch.Tensor], n_layer: int, d: int, n_kv: int) -> RetentionGates:
    """Maps the authors' rg keys onto RetentionGates after checking names and shapes against the model."""
    per_layer: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in sd.items():
        m = KEY_RE.match(key)
        if not m:
            raise ConversionError(f"unexpected key {key!r}: only the retention gates' weights are expected")
        per_layer.setdefault(int(m.group(1)), {})[m.group(2)] = value
    parts = {p for layer in per_layer.values() for p in layer}
    if parts & {"gate_proj.weight", "up_proj.weight", "down_proj.weight"} or any("gate_proj" in p or "up_proj" in p for p in parts):
        raise ConversionError("this checkpoint uses the gate_proj/up_proj retention gate ('rg3'), which is not supported "
                              "(only 'rg': linear1, SiLU, linear2, bias)")
    if "linear2.bias" in parts:
        raise ConversionError("linear2 has a bias: not the 'rg' gate (linear2 without bias + per-head bias); not supported")
    extra = parts - set(RG_PARTS)
    if extra:
        raise ConversionError(f"unsupported gate parameters {sorted(extra)} (only {', '.join(RG_PARTS)} are supported)")
    if sorted(per_layer) != list(range(n_layer)):
        raise ConversionError(f"the checkpoint has gates for layers {sorted(per_layer)[:3]}...{sorted(per_layer)[-3:]} "
                              f"({len(per_layer)} layers); the model has {n_layer} layers")
    hidden = None
    for i in range(n_layer):
        missing = [p for p in RG_PARTS if p not in per_layer[i]]
        if missing:
            names = ", ".join(f"model.layers.{i}.self_attn.retention_gate.{p}" for p in missing)
            raise ConversionError(f"layer {i}: missing {names}")
        h = per_layer[i]["linear1.weight"].shape[0] if per_layer[i]["linear1.weight"].dim() == 2 else None
        hidden = hidden or h
        expected = {"linear1.weight": (hidden, d), "linear1.bias": (hidden,), "linear2.weight": (n_kv, hidden), "bias": (n_kv,)}
        for p, shape in expected.items():
            got = tuple(per_layer[i][p].shape)
            if got != shape:
                raise ConversionError(f"layer {i}: retention_gate.{p} has shape {list(got)}, expected {list(shape)} "
                                      f"(model: d {d}, {n_kv} KV heads; gate hidden {hidden})")
    gates = RetentionGates(n_layer, d, hidden, n_kv)
    with torch.no_grad():
        for i, g in enumerate(gates.layers):
            src = per_layer[i]
            g.fc1.weight.copy_(src["linear1.weight"].float())
            g.fc1.bias.copy_(src["linear1.bias"].float())
            g.fc2.weight.copy_(src["linear2.weight"].float())
            g.bias.copy_(src["bias"].float())
    return gates


def load_gates_for_model(weights: str, model_path: str) -> RetentionGates:
    s = model_summary(model_path)
    return gates_from_state_dict(load_state_dict(weights), int(s["block_count"]), int(s["embedding_length"]),
                                 int(s["head_count_kv"]))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", required=True, help="trimkv_weights.pth")
    p.add_argument("--model", required=True, help="the GGUF model the gates were trained for")
    p.add_argument("--out", help="sidecar path. Defaults to <model>.retention.gguf.")
    p.add_argument("--type", choices=["f32", "f16"], default=None,
                   help="type of the two weight matrices. Defaults to f16 for models wider than 1024 (half the bandwidth a decode spends on the gates), else f32.")
    args = p.parse_args()
    try:
        gates = load_gates_for_model(args.weights, args.model)
        out = args.out or sidecar_path_for(args.model)
        write_sidecar(out, gates, args.model, budget=0, reduction="per-head",
                      source=f"converted from {os.path.basename(args.weights)}", matrix_type=args.type or default_matrix_type(gates))
    except (ConversionError, SidecarError, UnsupportedModelError, FileNotFoundError) as e:
        raise SystemExit(f"error: {e}")
    print(f"wrote {out}: {gates.n_layer} layers, d {gates.d}, hidden {gates.hidden}, {gates.n_kv} KV heads")


if __name__ == "__main__":
    main()
