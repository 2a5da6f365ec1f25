"""The retention sidecar (`<model>.retention.gguf`): TRIM-KV retention gates for one GGUF model.

Format (version 1; the engine's C++ loader and the app's TypeScript validator read exactly this):

- key/values: general.architecture = "ponder-retention", general.name = "<model name> retention gates",
  ponder.retention.{version (u32) = 1, gate = "trimkv-rg", activation = "silu", hidden (u32), budget (u32, 0 =
  unknown), reduction ("shared" | "per-head"), source}, ponder.retention.model.{architecture, fingerprint,
  block_count (u32), embedding_length (u32), head_count_kv (u32)};
- tensors, layer by layer: blk.{i}.retention.fc1.weight [H, d], blk.{i}.retention.fc1.bias [H],
  blk.{i}.retention.fc2.weight [n_kv, H], blk.{i}.retention.bias [n_kv] (shapes in torch/numpy row-major order;
  ggml ne is reversed). F32; the two weight matrices may be F16.

The gate of layer l maps the layer's attention input after RMSNorm (llama.cpp's `attn_norm`) of one token to
g = fc2 @ silu(fc1 @ x + fc1.bias) + bias, one value per KV head, and log beta = logsigmoid(g) (TRIM-KV's
retention gate "rg", from the authors' RetentionGate).
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import gguf, model_summary, read_metadata, tensor_to_numpy  # noqa: E402

FORMAT_VERSION = 1
ARCHITECTURE = "ponder-retention"
GATE = "trimkv-rg"
ACTIVATION = "silu"
REDUCTIONS = ("shared", "per-head")
FINGERPRINT_SPAN = 8 * 1024 * 1024
KEY = "ponder.retention."
F16_MAX = 65504  # the largest finite F16 value: a weight past it would be infinite in an F16 matrix


class SidecarError(Exception):
    """A sidecar that does not follow the format or does not belong to the model."""


def fingerprint(path: str) -> str:
    """SHA-256 (lowercase hex) of: the file size in decimal ASCII, "\\n", bytes [0, min(size, 8 MiB)), bytes
    [max(0, size - 8 MiB), size) (the two ranges may overlap for a small file; both are hashed)."""
    size = os.path.getsize(path)
    h = hashlib.sha256(f"{size}\n".encode("ascii"))
    with open(path, "rb") as f:
        h.update(f.read(min(size, FINGERPRINT_SPAN)))
        f.seek(max(0, size - FINGERPRINT_SPAN))
        h.update(f.read())
    return h.hexdigest()


def sidecar_path_for(model_path: str) -> str:
    """`dir/name.gguf` -> `dir/name.retention.gguf`."""
    base = model_path[:-5] if model_path.endswith(".gguf") else model_path
    return base + ".retention.gguf"


class Gate(nn.Module):
    """One layer's retention gate: d -> H (bias) -> SiLU -> n_kv (no bias) + per-head bias."""

    def __init__(self, d: int, hidden: int, n_kv: int):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden, bias=True)
        self.fc2 = nn.Linear(hidden, n_kv, bias=False)
        self.bias = nn.Parameter(torch.zeros(n_kv))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(x))) + self.bias


class RetentionGates(nn.Module):
    """The gates of every layer."""

    def __init__(self, n_layer: int, d: int, hidden: int, n_kv: int):
        super().__init__()
        self.n_layer, self.d, self.hidden, self.n_kv = n_layer, d, hidden, n_kv
        self.layers = nn.ModuleList([Gate(d, hidden, n_kv) for _ in range(n_layer)])

    def init_(self, generator: torch.Generator, bias_init: float, std: float = 0.02):
        """The authors' initialisation: weights N(0, std), fc1 bias 0, per-head bias = bias_init."""
        with torch.no_grad():
            for g in self.layers:
                g.fc1.weight.normal_(0.0, std, generator=generator)
                g.fc1.bias.zero_()
                g.fc2.weight.normal_(0.0, std, generator=generator)
                g.bias.fill_(bias_init)
        return self

    def logits(self, states) -> torch.Tensor:
        """states: per layer [T, d] (attn_norm outputs) -> gate logits g [L, T, n_kv]."""
        return torch.stack([gate(x) for gate, x in zip(self.layers, states)])

    def log_beta(self, states) -> torch.Tensor:
        """log beta = logsigmoid(g), [L, T, n_kv]."""
        return F.logsigmoid(self.logits(states))


def default_matrix_type(gates: RetentionGates) -> str:
    """F16 for models wider than 1024: the gate's d x H matrix is read at every decode, and F16 halves that (the engine's
    measured cost at 768 wide: 0.96x decode with F16 gates against 0.89x with F32); F32 below, where it costs little."""
    return "f16" if gates.d > 1024 else "f32"


def write_sidecar(path: str, gates: RetentionGates, model_path: str, *, budget: int, reduction: str, source: str,
                  matrix_type: str = "f32") -> None:
    """Writes the sidecar for the model at model_path atomically (temporary name in the same folder, then rename)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
    if matrix_type not in ("f32", "f16"):
        raise ValueError("matrix_type must be f32 or f16")
    summary = model_summary(model_path)
    expected = (summary["block_count"], summary["embedding_length"], summary["head_count_kv"])
    if (gates.n_layer, gates.d, gates.n_kv) != expected:
        raise SidecarError(f"gates are for (layers, d, n_kv) = {(gates.n_layer, gates.d, gates.n_kv)}, "
                           f"the model has {expected}")
    if matrix_type == "f16":
        for i, g in enumerate(gates.layers):
            for name, t in (("fc1.weight", g.fc1.weight), ("fc2.weight", g.fc2.weight)):
                flat = t.detach().reshape(-1)
                beyond = (flat.abs() > F16_MAX).nonzero()
                if len(beyond) > 0:
                    k = int(beyond[0])
                    raise SidecarError(f"layer {i}: retention.{name} holds {float(flat[k])} at {k}, beyond F16's largest value "
                                       f"({F16_MAX}): its matrices must be written as F32")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".retention-", suffix=".gguf.tmp", dir=folder)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, ARCHITECTURE)  # writes general.architecture
        w.add_name(f"{summary['name']} retention gates")
        w.add_uint32(KEY + "version", FORMAT_VERSION)
        w.add_string(KEY + "gate", GATE)
        w.add_string(KEY + "activation", ACTIVATION)
        w.add_string(KEY + "model.architecture", str(summary["architecture"]))
        w.add_string(KEY + "model.fingerprint", fingerprint(model_path))
        w.add_uint32(KEY + "model.block_count", int(summary["block_count"]))
        w.add_uint32(KEY + "model.embedding_length", int(summary["embedding_length"]))
        w.add_uint32(KEY + "model.head_count_kv", int(summary["head_count_kv"]))
        w.add_uint32(KEY + "hidden", int(gates.hidden))
        w.add_uint32(KEY + "budget", int(budget))
        w.add_string(KEY + "reduction", reduction)
        w.add_string(KEY + "source", source)
        matrix_dtype = np.float16 if matrix_type == "f16" else np.float32
        for i, g in enumerate(gates.layers):
            p = f"blk.{i}.retention."
            w.add_tensor(p + "fc1.weight", g.fc1.weight.detach().numpy().astype(matrix_dtype))
            w.add_tensor(p + "fc1.bias", g.fc1.bias.detach().numpy().astype(np.float32))
            w.add_tensor(p + "fc2.weight", g.fc2.weight.detach().numpy().astype(matrix_dtype))
            w.add_tensor(p + "bias", g.bias.detach().numpy().astype(np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_sidecar(path: str, model_path: str | None = None) -> tuple[dict[str, object], RetentionGates]:
    """(metadata, gates) of a sidecar, validated against the format (and, with model_path, against the model)."""
    reader = gguf.GGUFReader(path)
    meta = read_metadata(reader)

    def need(key: str, kind):
        if key not in meta:
            raise SidecarError(f"{path}: missing {key}")
        value = meta[key]
        if not isinstance(value, kind):
            raise SidecarError(f"{path}: {key} has the wrong type")
        return value

    if meta.get("general.architecture") != ARCHITECTURE:
        raise SidecarError(f"{path}: general.architecture is {meta.get('general.architecture')!r}, not {ARCHITECTURE!r}")
    if need(KEY + "version", int) != FORMAT_VERSION:
        raise SidecarError(f"{path}: version {meta[KEY + 'version']} (this tool reads {FORMAT_VERSION})")
    if need(KEY + "gate", str) != GATE or need(KEY + "activation", str) != ACTIVATION:
        raise SidecarError(f"{path}: gate {meta.get(KEY + 'gate')!r} / activation {meta.get(KEY + 'activation')!r} "
                           f"is not supported")
    if need(KEY + "reduction", str) not in REDUCTIONS:
        raise SidecarError(f"{path}: reduction {meta[KEY + 'reduction']!r} is not one of {REDUCTIONS}")
    n_layer = need(KEY + "model.block_count", int)
    d = need(KEY + "model.embedding_length", int)
    n_kv = need(KEY + "model.head_count_kv", int)
    hidden = need(KEY + "hidden", int)
    need(KEY + "budget", int)
    need(KEY + "source", str)
    need(KEY + "model.architecture", str)
    need(KEY + "model.fingerprint", str)
    if model_path is not None:
        if meta[KEY + "model.fingerprint"] != fingerprint(model_path):
            raise SidecarError(f"{path} was made for another model file than {model_path} (fingerprint differs)")
    tensors = {t.name: t for t in reader.tensors}
    gates = RetentionGates(n_layer, d, hidden, n_kv)
    expected_names = set()
    for i, g in enumerate(gates.layers):
        p = f"blk.{i}.retention."
        for name, param, shape in [("fc1.weight", g.fc1.weight, (hidden, d)), ("fc1.bias", g.fc1.bias, (hidden,)),
                                   ("fc2.weight", g.fc2.weight, (n_kv, hidden)), ("bias", g.bias, (n_kv,))]:
            expected_names.add(p + name)
            if p + name not in tensors:
                raise SidecarError(f"{path}: missing tensor {p + name}")
            array = tensor_to_numpy(tensors[p + name])
            if tuple(array.shape) != shape:
                raise SidecarError(f"{path}: {p + name} has shape {list(array.shape)}, expected {list(shape)}")
            with torch.no_grad():
                param.copy_(torch.from_numpy(array.copy()))
    extra = set(tensors) - expected_names
    if extra:
        raise SidecarError(f"{path}: unexpected tensors {sorted(extra)[:5]}")
    return meta, gates
