"""A `qwen3` GGUF model as a PyTorch replica of llama.cpp's LLM_ARCH_QWEN3 graph, beside ggufModel.py's llama one.

qwen3 is llama's graph (ggufModel.py: RMSNorm pre-norm blocks, grouped-query attention, SwiGLU, no biases) with two
changes, both as llama.cpp computes them (`llm_build_qwen3`):

- each head's q and k are RMS-normalised over the head dimension with a weight (`attn_q_norm`, `attn_k_norm`, the
  model's eps) after the projection and before RoPE;
- RoPE in NEOX mode: dimension i is rotated with dimension i + rope_dims / 2 (halves, not adjacent pairs), with the
  same frequencies theta_i = p * s * base^(-2i / rope_dims) / ff_i.

The replica keeps GgufLlama's interface (positions, additive mask, caches of cells at their own positions, the
per-KV-head additive bias, the `attn_norm` and attention-weight hooks), so evictionSim.py, evictionModes.py and
traces.py run on it unchanged. `load_model(path)` loads either architecture.

Check against llama.cpp (next-token logits on prefixes of a held-out merge problem, scripts/retention/checkLogits.ts
as train.py --check-llama-cpp does): `python3 scripts/retention/ggufQwen3.py --model resources/models/ponder-merge.gguf`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import (REPO_ROOT, GgufConfig, GgufLlama, GqaBlock, RMSNorm, UnsupportedModelError, gguf,  # noqa: E402
                       load_gguf_model, read_metadata, rope_tables, tensor_to_numpy)

ARCHITECTURE = "qwen3"


def rope_neox(x: torch.Tensor, cfg: GgufConfig, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., T, head_dim]: ggml's GGML_ROPE_TYPE_NEOX on the first rope_dims dimensions, pairs (i, i + rope_dims/2)."""
    n = cfg.rope_dims
    half = n // 2
    x0, x1, rest = x[..., :half], x[..., half:n], x[..., n:]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos, rest), dim=-1)


class Qwen3Block(GqaBlock):
    """One qwen3 block: GqaBlock with the per-head q/k RMSNorm and NEOX RoPE."""

    def __init__(self, cfg: GgufConfig):
        super().__init__(cfg)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_eps)

    def forward(self, x, cos, sin, mask, cache=None, bias=None, on_attn_norm=None, on_attn=None):
        """As GqaBlock.forward."""
        cfg = self.cfg
        B, T, _ = x.shape
        assert B == 1, "the replica runs one sequence at a time"
        n_kv, g, hd = cfg.n_head_kv, cfg.n_head // cfg.n_head_kv, cfg.head_dim
        h = self.attn_norm(x)
        if on_attn_norm is not None:
            on_attn_norm(h[0])
        q = self.q_norm(self.wq(h)[0].view(T, cfg.n_head, hd)).transpose(0, 1)
        k = self.k_norm(self.wk(h)[0].view(T, n_kv, hd)).transpose(0, 1)
        q = rope_neox(q, cfg, cos, sin)
        k = rope_neox(k, cfg, cos, sin)
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


class GgufQwen3(GgufLlama):
    """llama.cpp's LLM_ARCH_QWEN3 in PyTorch (F32), one sequence at a time; GgufLlama's forward."""

    def __init__(self, cfg: GgufConfig):
        super().__init__(cfg)
        self.layers = torch.nn.ModuleList([Qwen3Block(cfg) for _ in range(cfg.n_layer)])


def load_qwen3_model(path: str) -> tuple[GgufQwen3, dict[str, object]]:
    """(replica in eval mode with requires_grad off, GGUF metadata). Raises UnsupportedModelError with the reason."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model not found: {path}")
    reader = gguf.GGUFReader(path)
    meta = read_metadata(reader)
    arch = meta.get("general.architecture")
    if arch != ARCHITECTURE:
        raise UnsupportedModelError(f"{path}: architecture {arch!r} is not {ARCHITECTURE}")
    if meta.get(f"{arch}.expert_count"):
        raise UnsupportedModelError(f"{path}: mixture-of-experts models are not supported")
    if meta.get(f"{arch}.rope.scaling.type", "none") != "none":
        raise UnsupportedModelError(f"{path}: rope scaling is not supported by the qwen3 replica")
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
    cfg = GgufConfig(
        architecture=arch, name=str(meta.get("general.name", os.path.basename(path))),
        vocab_size=int(tensors["token_embd.weight"].shape[1]), n_embd=n_embd, n_layer=int(meta[f"{arch}.block_count"]),
        n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=int(meta[f"{arch}.feed_forward_length"]),
        rms_eps=float(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        rope_freq_base=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        rope_dims=int(meta.get(f"{arch}.rope.dimension_count", head_dim)))
    if "rope_freqs.weight" in tensors:
        cfg.rope_freq_factors = tensor_to_numpy(tensors["rope_freqs.weight"]).reshape(-1).tolist()
    model = GgufQwen3(cfg)

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
        for mod, name in [(layer.attn_norm, "attn_norm"), (layer.wq, "attn_q"), (layer.wk, "attn_k"), (layer.wv, "attn_v"),
                          (layer.q_norm, "attn_q_norm"), (layer.k_norm, "attn_k_norm"), (layer.wo, "attn_output"),
                          (layer.ffn_norm, "ffn_norm"), (layer.w_gate, "ffn_gate"), (layer.w_up, "ffn_up"),
                          (layer.w_down, "ffn_down")]:
            put(mod.weight, p + name + ".weight")
        for extra in ("attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"):
            if p + extra in tensors:
                raise UnsupportedModelError(f"{path}: attention biases ({p + extra}) are not supported")
    put(model.norm.weight, "output_norm.weight")
    put(model.output.weight, "output.weight" if "output.weight" in tensors else "token_embd.weight")
    model.eval()
    model.requires_grad_(False)
    return model, meta


def load_model(path: str) -> tuple[GgufLlama, dict[str, object]]:
    """A llama (ggufModel.py) or qwen3 (here) GGUF model as its replica, with its metadata."""
    arch = read_metadata(gguf.GGUFReader(path)).get("general.architecture")
    return load_qwen3_model(path) if arch == ARCHITECTURE else load_gguf_model(path)


def check_llama_cpp(model: GgufLlama, model_path: str, sample: list[int]) -> dict:
    """llama.cpp's next-token logits (checkLogits.ts) against the replica's on three prefixes of sample."""
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
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf"))
    p.add_argument("--seed-offset", type=int, default=0, help="held-out merge problem EVAL_SEED_BASE + this")
    args = p.parse_args()
    torch.set_num_threads(1)
    import mergeTask  # noqa: E402  (test/eval/train/mergeTask.py, on the path through ggufModel)
    import task  # noqa: E402
    model, _ = load_model(args.model)
    problem = mergeTask.generate_problem(task.EVAL_SEED_BASE + args.seed_offset, mergeTask.TaskOptions(min_k_share=0.5))
    sample = task.tokenize(task.render_prompt(problem.question) + task.render_completion(problem.thinking, problem.answer))
    result = check_llama_cpp(model, args.model, sample)
    worst = max(c["maxAbsDiff"] / max(1.0, c["maxLogit"]) for c in result["checks"])
    print(json.dumps(dict(result, worstRelative=worst)))
    if not all(c["sameArgmax"] for c in result["checks"]) or worst > 0.01:
        raise SystemExit("the PyTorch replica does not compute what llama.cpp computes for this model (see above)")


if __name__ == "__main__":
    main()
