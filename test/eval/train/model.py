"""A small transformer that computes exactly what llama.cpp's LLM_ARCH_LLAMA, LLM_ARCH_QWEN2 or LLM_ARCH_QWEN3
graph computes.

- RMSNorm (eps from the config) with a weight, pre-norm blocks, no biases (but qwen2's on q, k and v).
- llama: RoPE in llama.cpp's "NORM" mode: pairs of ADJACENT dimensions (x[2i], x[2i+1]) are rotated by
  pos * freq_base^(-2i/head_dim). Because the PyTorch model already uses llama.cpp's layout, the q/k weights are
  exported as they are (no convert_hf_to_gguf-style permutation).
- qwen2: llama's graph with biases on the q, k and v projections, and RoPE in "NEOX" mode (as qwen3).
- qwen3: each head's q and k are RMS-normalised over the head dimension with a weight (attn_q_norm, attn_k_norm, the
  same eps) before RoPE, and RoPE is in "NEOX" mode: dimension i is paired with i + head_dim/2 (rotating halves).
- Grouped-query attention: n_head_kv key/value heads, query head h reads key/value head h // (n_head / n_head_kv)
  (ggml's broadcast in the attention product).
- Attention scale 1/sqrt(head_dim), causal softmax; SwiGLU feed-forward (down(silu(gate(x)) * up(x))).
- Separate (untied) output matrix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    vocab_size: int = 261
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_ff: int = 384
    rope_freq_base: float = 10000.0
    rms_eps: float = 1e-5
    context_length: int = 4096
    arch: str = "llama"
    n_head_kv: int = 0  # key/value heads; 0: as many as query heads
    n_embd_head: int = 0  # dimension of a head; 0: n_embd // n_head

    @property
    def head_dim(self) -> int:
        return self.n_embd_head or self.n_embd // self.n_head

    @property
    def kv_heads(self) -> int:
        return self.n_head_kv or self.n_head

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg: ModelConfig, positions: torch.Tensor):
    """cos/sin of shape [T, head_dim/2] for the given absolute positions (llama.cpp NORM mode)."""
    half = cfg.head_dim // 2
    inv_freq = cfg.rope_freq_base ** (-torch.arange(0, half, dtype=torch.float64) * 2 / cfg.head_dim)
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def apply_rope(x, cos, sin):
    """x: [B, H, T, D]; rotates adjacent pairs (x[2i], x[2i+1])."""
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return torch.stack((r0, r1), dim=-1).flatten(-2)


def apply_rope_neox(x, cos, sin):
    """x: [B, H, T, D]; rotates the pairs (x[i], x[i + D/2]) (ggml's GGML_ROPE_TYPE_NEOX)."""
    half = x.shape[-1] // 2
    x0 = x[..., :half]
    x1 = x[..., half:]
    return torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.n_embd
        q_dim, kv_dim = cfg.n_head * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        if cfg.arch not in ("llama", "qwen2", "qwen3"):
            raise ValueError(f"unknown architecture {cfg.arch}")
        if cfg.n_head % cfg.kv_heads != 0:
            raise ValueError("n_head must be a multiple of n_head_kv")
        self.attn_norm = RMSNorm(d, cfg.rms_eps)
        bias = cfg.arch == "qwen2"  # qwen2: biases on q, k and v (attn_q.bias, attn_k.bias, attn_v.bias)
        self.wq = nn.Linear(d, q_dim, bias=bias)
        self.wk = nn.Linear(d, kv_dim, bias=bias)
        self.wv = nn.Linear(d, kv_dim, bias=bias)
        self.wo = nn.Linear(q_dim, d, bias=False)
        if cfg.arch == "qwen3":
            self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_eps)
            self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_eps)
        self.ffn_norm = RMSNorm(d, cfg.rms_eps)
        self.w_gate = nn.Linear(d, cfg.n_ff, bias=False)
        self.w_up = nn.Linear(d, cfg.n_ff, bias=False)
        self.w_down = nn.Linear(cfg.n_ff, d, bias=False)

    def forward(self, x, cos, sin, mask, cache=None):
        """x: [B, T, d]; mask: additive [T, S] (or [B, 1, T, S]); cache: optional dict with k/v to append to."""
        B, T, d = x.shape
        H, D, KV = self.cfg.n_head, self.cfg.head_dim, self.cfg.kv_heads
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, H, D)
        k = self.wk(h).view(B, T, KV, D)
        v = self.wv(h).view(B, T, KV, D).transpose(1, 2)
        if self.cfg.arch == "qwen3":
            q = self.q_norm(q)
            k = self.k_norm(k)
        rope = apply_rope if self.cfg.arch == "llama" else apply_rope_neox
        q = rope(q.transpose(1, 2), cos, sin)
        k = rope(k.transpose(1, 2), cos, sin)
        if cache is not None:
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=2)
                v = torch.cat((cache["v"], v), dim=2)
            cache["k"], cache["v"] = k, v
        if KV != H:
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D)) + mask
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.wo(attn.transpose(1, 2).reshape(B, T, H * D))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.output = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        # PyTorch's default initialisation (embeddings N(0, 1), Linear U(+-1/sqrt(fan_in))): with it the copy and
        # lookup (induction) circuits form several times sooner than with GPT-2's N(0, 0.02) on this task.

    def forward(self, tokens, start_pos: int = 0, mask=None, caches=None):
        """tokens: [B, T] -> logits [B, T, V]. mask: additive, broadcastable to [B, H, T, start_pos + T];
        defaults to causal. caches: list of per-layer dicts for incremental decoding."""
        B, T = tokens.shape
        positions = torch.arange(start_pos, start_pos + T)
        cos, sin = rope_tables(self.cfg, positions)
        if mask is None:
            mask = torch.full((T, start_pos + T), float("-inf")).triu(start_pos + 1)
        x = self.tok_embeddings(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, mask, None if caches is None else caches[i])
        return self.output(self.norm(x))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


@torch.no_grad()
def generate(model: Transformer, prompt: list[int], max_new_tokens: int, stop_ids: set[int],
             window_fraction: float | None = None, sinks: int = 4) -> list[int]:
    """Greedy decoding with a KV cache. With window_fraction set, every generated token only sees the first `sinks`
    tokens and the most recent ceil(window_fraction * cache length) tokens (StreamingLLM-style eviction during
    generation; the prompt itself is processed with full attention)."""
    model.eval()
    caches = [dict() for _ in model.layers]
    logits = model(torch.tensor([prompt]), 0, None, caches)
    out: list[int] = []
    pos = len(prompt)
    for _ in range(max_new_tokens):
        token = int(logits[0, -1].argmax())
        out.append(token)
        if token in stop_ids:
            break
        mask = torch.zeros(1, pos + 1)
        if window_fraction is not None:
            length = pos + 1
            keep = max(1, math.ceil(window_fraction * length))
            if keep + sinks < length:
                mask[0, sinks:length - keep] = float("-inf")
        logits = model(torch.tensor([[token]]), pos, mask, caches)
        pos += 1
    return out
