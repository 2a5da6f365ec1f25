"""Loads a `llama`, `qwen2` or `qwen3` GGUF model into a PyTorch replica of llama.cpp's graph for it.

The replica extends `test/eval/train/model.py` (whose logits equal llama.cpp's for the task models) with what the
retention tools need, without changing that file:

- grouped-query attention (`attention.head_count_kv` < `attention.head_count`; query head h reads KV head
  h // (n_head / n_kv), as ggml's broadcasting mul_mat does) and `attention.key_length` != n_embd / n_head;
- the attention input after each layer's RMSNorm (llama.cpp's `attn_norm` tensor) handed to a callback, which is
  the retention gates' input;
- an additive attention bias per layer and KV head (TRIM-KV's `(t - i) * log beta_i`), shared by that KV head's
  query heads;
- caches whose cells keep their own absolute positions (so a simulation can evict cells as llama.cpp does).

Each architecture is a row of ARCHITECTURES: what its graph adds to llama's (LLM_ARCH_LLAMA: RMSNorm pre-norm
blocks, grouped-query attention, SwiGLU, no biases), as llama.cpp computes it. `qwen2` (`llm_build_qwen2`) adds
biases to the q, k and v projections (before RoPE) and rotates in NEOX mode. `qwen3` (`llm_build_qwen3`)
RMS-normalises each head's q and k over the head dimension with a weight (`attn_q_norm`, `attn_k_norm`, the model's
eps) after the projection and before RoPE, and rotates in NEOX mode: dimension i with dimension i + rope_dims / 2
(halves, not adjacent pairs), at the same frequencies.

Weights are read as llama.cpp stores them: RoPE NORM mode rotates adjacent pairs, and convert_hf_to_gguf.py has
already permuted q/k for it, so no permutation happens here. F32, F16, BF16 and the quantized types gguf-py can
dequantize (Q8_0, Q4_0, K-quants, ...) are accepted; everything is computed in F32.

Run alone, it checks the replica's next-token logits against llama.cpp's (scripts/retention/checkLogits.ts, as
train.py --check-llama-cpp does) on prefixes of a held-out merge problem:
`python3 scripts/retention/ggufModel.py --model resources/models/ponder-merge.gguf`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GGUF_PY = os.path.join(REPO_ROOT, "node_modules", "node-llama-cpp", "llama", "llama.cpp", "gguf-py")
TRAIN_DIR = os.path.join(REPO_ROOT, "test", "eval", "train")
# Appended, not prepended: test/eval/train also has a train.py and an evaluate.py, which must not shadow ours.
for _path in (GGUF_PY, TRAIN_DIR):
    if _path not in sys.path:
        sys.path.append(_path)

import gguf  # noqa: E402  (llama.cpp's gguf-py, from node-llama-cpp's llama.cpp checkout)
from gguf.quants import dequantize  # noqa: E402
from model import RMSNorm, apply_rope, apply_rope_neox  # noqa: E402  (test/eval/train/model.py)


@dataclass(frozen=True)
class Architecture:
    """What an architecture's graph changes in llama's, as llama.cpp builds it."""
    rope_neox: bool  # RoPE rotates the pairs (i, i + rope_dims / 2) (GGML_ROPE_TYPE_NEOX), not adjacent ones
    qk_norm: bool  # each head's q and k RMS-normalised over head_dim with a weight before RoPE
    qkv_bias: bool  # the q, k and v projections add a bias (attn_q.bias, attn_k.bias, attn_v.bias)
    rms_eps: float  # attention.layer_norm_rms_epsilon when the file has none
    rope_scalings: tuple[str, ...]  # the rope.scaling.type values the replica computes


ARCHITECTURES = {
    "llama": Architecture(rope_neox=False, qk_norm=False, qkv_bias=False, rms_eps=1e-5, rope_scalings=("none", "linear")),
    "qwen2": Architecture(rope_neox=True, qk_norm=False, qkv_bias=True, rms_eps=1e-6, rope_scalings=("none",)),
    "qwen3": Architecture(rope_neox=True, qk_norm=True, qkv_bias=False, rms_eps=1e-6, rope_scalings=("none",)),
}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)


class UnsupportedModelError(Exception):
    """The GGUF file is not a model this replica computes exactly."""


@dataclass
class GgufConfig:
    architecture: str
    name: str
    vocab_size: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    rms_eps: float
    rope_freq_base: float
    rope_dims: int
    rope_freq_scale: float = 1.0
    rope_freq_factors: list[float] | None = field(default=None, repr=False)

    @property
    def graph(self) -> Architecture:
        return ARCHITECTURES[self.architecture]


def read_metadata(reader: "gguf.GGUFReader") -> dict[str, object]:
    """The key/values of a GGUF file as Python values (arrays of numbers and strings as lists)."""
    out: dict[str, object] = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            out[key] = f.contents()
        except Exception:  # an exotic type gguf-py cannot render: skip it, none of ours is one
            continue
    return out


def model_summary(path: str) -> dict[str, object]:
    """architecture, name, block_count, embedding_length, head_count_kv of a GGUF model (any architecture)."""
    meta = read_metadata(gguf.GGUFReader(path))
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise UnsupportedModelError(f"{path}: no general.architecture: not a GGUF model")

    def need(key: str) -> int:
        if key not in meta:
            raise UnsupportedModelError(f"{path}: missing {key}")
        return int(meta[key])

    head_count = meta.get(f"{arch}.attention.head_count")
    head_count_kv = meta.get(f"{arch}.attention.head_count_kv", head_count)
    if isinstance(head_count_kv, list):
        raise UnsupportedModelError(f"{path}: per-layer head_count_kv is not supported")
    if head_count_kv is None:
        raise UnsupportedModelError(f"{path}: missing {arch}.attention.head_count_kv and head_count")
    return {"architecture": arch, "name": str(meta.get("general.name", os.path.basename(path))),
            "block_count": need(f"{arch}.block_count"), "embedding_length": need(f"{arch}.embedding_length"),
            "head_count_kv": int(head_count_kv)}


def tensor_to_numpy(t: "gguf.ReaderTensor") -> np.ndarray:
    """A GGUF tensor as float32 in numpy row-major order (shape = reversed ggml ne)."""
    shape = tuple(int(n) for n in reversed(t.shape.tolist()))
    if t.tensor_type == gguf.GGMLQuantizationType.F32:
        array = np.asarray(t.data, dtype=np.float32)
    elif t.tensor_type == gguf.GGMLQuantizationType.F16:
        array = np.asarray(t.data).view(np.float16).astype(np.float32)
    else:
        try:
            array = dequantize(np.asarray(t.data), t.tensor_type)
        except NotImplementedError as e:
            raise UnsupportedModelError(f"tensor {t.name}: type {t.tensor_type.name} cannot be dequantized by gguf-py") from e
    return np.ascontiguousarray(array.reshape(shape), dtype=np.float32)


def rope_tables(cfg: GgufConfig, positions: torch.Tensor):
    """cos/sin [T, rope_dims/2] for absolute positions (NORM and NEOX modes): theta_i = p * s * base^(-2i/n) / ff_i."""
    half = cfg.rope_dims // 2
    inv_freq = cfg.rope_freq_base ** (-torch.arange(0, half, dtype=torch.float64) * 2 / cfg.rope_dims)
    if cfg.rope_freq_factors is not None:
        inv_freq = inv_freq / torch.tensor(cfg.rope_freq_factors[:half], dtype=torch.float64)
    angles = positions.to(torch.float64)[:, None] * cfg.rope_freq_scale * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def rope(x: torch.Tensor, cfg: GgufConfig, cos, sin) -> torch.Tensor:
    """x [..., T, head_dim] rotated on its first rope_dims dimensions in the architecture's mode."""
    rotate = apply_rope_neox if cfg.graph.rope_neox else apply_rope
    if cfg.rope_dims == x.shape[-1]:
        return rotate(x, cos, sin)
    return torch.cat((rotate(x[..., :cfg.rope_dims], cos, sin), x[..., cfg.rope_dims:]), dim=-1)


class GqaBlock(nn.Module):
    """One block (pre-norm attention + SwiGLU) with grouped-query attention, qwen2's q/k/v biases and qwen3's q/k norms."""

    def __init__(self, cfg: GgufConfig):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.n_embd, cfg.head_dim
        self.attn_norm = RMSNorm(d, cfg.rms_eps)
        bias = cfg.graph.qkv_bias
        self.wq = nn.Linear(d, cfg.n_head * hd, bias=bias)
        self.wk = nn.Linear(d, cfg.n_head_kv * hd, bias=bias)
        self.wv = nn.Linear(d, cfg.n_head_kv * hd, bias=bias)
        self.wo = nn.Linear(cfg.n_head * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, cfg.rms_eps) if cfg.graph.qk_norm else None
        self.k_norm = RMSNorm(hd, cfg.rms_eps) if cfg.graph.qk_norm else None
        self.ffn_norm = RMSNorm(d, cfg.rms_eps)
        self.w_gate = nn.Linear(d, cfg.n_ff, bias=False)
        self.w_up = nn.Linear(d, cfg.n_ff, bias=False)
        self.w_down = nn.Linear(cfg.n_ff, d, bias=False)

    def forward(self, x, cos, sin, mask, cache=None, bias=None, on_attn_norm=None, on_attn=None):
        """x [1, T, d]; mask additive [T, S]; cache: dict with "k"/"v" [n_kv, S0, hd] to append to (kept cells,
        already rotated at their own positions); bias: additive [n_kv or 1, T, S] or None; on_attn_norm(h [T, d]);
        on_attn(weights [n_head, T, S]): the attention weights after the softmax."""
        cfg = self.cfg
        B, T, _ = x.shape
        assert B == 1, "the replica runs one sequence at a time"
        n_kv, g, hd = cfg.n_head_kv, cfg.n_head // cfg.n_head_kv, cfg.head_dim
        h = self.attn_norm(x)
        if on_attn_norm is not None:
            on_attn_norm(h[0])
        q = self.wq(h)[0].view(T, cfg.n_head, hd)
        k = self.wk(h)[0].view(T, n_kv, hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = rope(q.transpose(0, 1), cfg, cos, sin)
        k = rope(k.transpose(0, 1), cfg, cos, sin)
        v = self.wv(h)[0].view(T, n_kv, hd).transpose(0, 1)
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=1)
                v = torch.cat((cache["v"], v), dim=1)
            cache["k"], cache["v"] = k, v
        q = q.reshape(n_kv, g, T, hd)
        scores = (q @ k[:, None].transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + mask
        if bias is not None:
            scores = scores + bias[:, None]
        weights = torch.softmax(scores, dim=-1)
        if on_attn is not None:
            on_attn(weights.reshape(cfg.n_head, T, -1))
        attn = (weights @ v[:, None]).view(cfg.n_head, T, hd)
        x = x + self.wo(attn.transpose(0, 1).reshape(1, T, cfg.n_head * hd))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class GgufModel(nn.Module):
    """llama.cpp's graph of a supported architecture in PyTorch (F32), one sequence at a time."""

    def __init__(self, cfg: GgufConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.layers = nn.ModuleList([GqaBlock(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.output = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, tokens, positions=None, mask=None, caches=None, bias=None, on_attn_norm=None, on_attn=None):
        """tokens [T] (or [1, T]) -> logits [T, V].

        positions: absolute positions of the tokens (default 0..T-1); mask: additive [T, S] (default causal, S = T);
        caches: per-layer dicts (see GqaBlock); bias: None, one [n_kv|1, T, S] tensor for every layer, or a callable
        bias(layer) returning one; on_attn_norm(layer, h [T, d]); on_attn(layer, weights [n_head, T, S])."""
        tokens = torch.as_tensor(tokens).reshape(-1)
        T = tokens.shape[0]
        if positions is None:
            positions = torch.arange(T)
        if mask is None:
            mask = torch.full((T, T), float("-inf")).triu(1)
        cos, sin = rope_tables(self.cfg, positions)
        x = self.tok_embeddings(tokens)[None]
        for i, layer in enumerate(self.layers):
            b = bias(i) if callable(bias) else bias
            hook = None if on_attn_norm is None else (lambda h, i=i: on_attn_norm(i, h))
            attn_hook = None if on_attn is None else (lambda w, i=i: on_attn(i, w))
            x = layer(x, cos, sin, mask, None if caches is None else caches[i], b, hook, attn_hook)
        return self.output(self.norm(x))[0]


def load_gguf_model(path: str) -> tuple[GgufModel, dict[str, object]]:
    """(replica in eval mode with requires_grad off, GGUF metadata). Raises UnsupportedModelError with the reason."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model not found: {path}")
    reader = gguf.GGUFReader(path)
    meta = read_metadata(reader)
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise UnsupportedModelError(f"{path}: architecture {arch!r} is not supported (the PyTorch replica implements "
                                    f"{', '.join(SUPPORTED_ARCHITECTURES)} only)")
    graph = ARCHITECTURES[arch]
    if meta.get(f"{arch}.expert_count"):
        raise UnsupportedModelError(f"{path}: mixture-of-experts {arch} models are not supported")
    scaling = meta.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in graph.rope_scalings:
        raise UnsupportedModelError(f"{path}: rope scaling {scaling!r} is not supported for {arch} (only "
                                    f"{' and '.join(graph.rope_scalings)})")
    tensors = {t.name: t for t in reader.tensors}
    n_embd = int(meta[f"{arch}.embedding_length"])
    n_head = int(meta[f"{arch}.attention.head_count"])
    n_head_kv = meta.get(f"{arch}.attention.head_count_kv", n_head)
    if isinstance(n_head_kv, list):
        raise UnsupportedModelError(f"{path}: per-layer head_count_kv is not supported")
    n_head_kv = int(n_head_kv)
    head_dim = int(meta.get(f"{arch}.attention.key_length", n_embd // n_head))
    if int(meta.get(f"{arch}.attention.value_length", head_dim)) != head_dim:
        raise UnsupportedModelError(f"{path}: value_length != key_length is not supported")
    if n_head % n_head_kv != 0:
        raise UnsupportedModelError(f"{path}: head_count {n_head} is not a multiple of head_count_kv {n_head_kv}")
    vocab = int(tensors["token_embd.weight"].shape[1])
    cfg = GgufConfig(
        architecture=arch, name=str(meta.get("general.name", os.path.basename(path))), vocab_size=vocab, n_embd=n_embd,
        n_layer=int(meta[f"{arch}.block_count"]), n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim,
        n_ff=int(meta[f"{arch}.feed_forward_length"]),
        rms_eps=float(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", graph.rms_eps)),
        rope_freq_base=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        rope_dims=int(meta.get(f"{arch}.rope.dimension_count", head_dim)),
        rope_freq_scale=1.0 / float(meta.get(f"{arch}.rope.scaling.factor", 1.0)) if scaling == "linear" else 1.0)
    if "rope_freqs.weight" in tensors:
        cfg.rope_freq_factors = tensor_to_numpy(tensors["rope_freqs.weight"]).reshape(-1).tolist()
    model = GgufModel(cfg)

    def put(param: torch.Tensor, name: str):
        if name not in tensors:
            raise UnsupportedModelError(f"{path}: missing tensor {name}")
        array = tensor_to_numpy(tensors[name])
        if tuple(array.shape) != tuple(param.shape):
            raise UnsupportedModelError(f"{path}: tensor {name} has shape {list(array.shape)}, expected {list(param.shape)}")
        param.data.copy_(torch.from_numpy(array.copy()))

    put(model.tok_embeddings.weight, "token_embd.weight")
    for i, layer in enumerate(model.layers):
        p = f"blk.{i}."
        weights = [(layer.attn_norm, "attn_norm"), (layer.wq, "attn_q"), (layer.wk, "attn_k"), (layer.wv, "attn_v"),
                   (layer.wo, "attn_output"), (layer.ffn_norm, "ffn_norm"), (layer.w_gate, "ffn_gate"),
                   (layer.w_up, "ffn_up"), (layer.w_down, "ffn_down")]
        if graph.qk_norm:
            weights += [(layer.q_norm, "attn_q_norm"), (layer.k_norm, "attn_k_norm")]
        for mod, name in weights:
            put(mod.weight, p + name + ".weight")
        if graph.qkv_bias:
            for mod, name in ((layer.wq, "attn_q"), (layer.wk, "attn_k"), (layer.wv, "attn_v")):
                put(mod.bias, p + name + ".bias")
        for extra in ("attn_output.bias",) if graph.qkv_bias else ("attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"):
            if p + extra in tensors:
                raise UnsupportedModelError(f"{path}: attention biases ({p + extra}) are not supported")
    put(model.norm.weight, "output_norm.weight")
    put(model.output.weight, "output.weight" if "output.weight" in tensors else "token_embd.weight")
    model.eval()
    model.requires_grad_(False)
    return model, meta


def check_llama_cpp(model: GgufModel, model_path: str, sample: list[int], log=print) -> dict:
    """llama.cpp's next-token logits (checkLogits.ts) against the replica's on three prefixes of sample: logs
    checkLogits.ts's report with worstRelative (the largest difference over max(1, largest |logit|)) and returns it;
    exits when an argmax differs or worstRelative is above 0.01."""
    with torch.no_grad():
        logits = model(sample)
    cuts = sorted({max(1, len(sample) // 3), max(1, 2 * len(sample) // 3), len(sample)})
    reference = {"checks": [{"ids": sample[:n], "logits": logits[n - 1].tolist()} for n in cuts]}
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "reference.json")
        with open(ref_path, "w") as f:
            json.dump(reference, f)
        res = subprocess.run(["npx", "tsx", os.path.join("scripts", "retention", "checkLogits.ts"), ref_path,
                              os.path.abspath(model_path)], cwd=REPO_ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"llama.cpp check failed to run:\n{res.stderr[-2000:]}")
    result = json.loads(res.stdout.strip().splitlines()[-1])
    result["worstRelative"] = max(c["maxAbsDiff"] / max(1.0, c["maxLogit"]) for c in result["checks"])
    log(f"llama.cpp check: {json.dumps(result)}")
    if not all(c["sameArgmax"] for c in result["checks"]) or result["worstRelative"] > 0.01:
        raise SystemExit("the PyTorch replica does not compute what llama.cpp computes for this model (see above)")
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf"))
    p.add_argument("--seed-offset", type=int, default=0, help="held-out merge problem EVAL_SEED_BASE + this")
    args = p.parse_args()
    torch.set_num_threads(1)
    import mergeTask  # noqa: E402  (test/eval/train/mergeTask.py, on the path above)
    import task  # noqa: E402
    try:
        model, _ = load_gguf_model(args.model)
    except UnsupportedModelError as e:
        raise SystemExit(f"error: {e}")
    problem = mergeTask.generate_problem(task.EVAL_SEED_BASE + args.seed_offset, mergeTask.TaskOptions(min_k_share=0.5))
    sample = task.tokenize(task.render_prompt(problem.question) + task.render_completion(problem.thinking, problem.answer))
    check_llama_cpp(model, args.model, sample)


if __name__ == "__main__":
    main()
