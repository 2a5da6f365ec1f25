"""A PyTorch simulation of Ponder's hard KV-cache eviction with shared cells.

llama.cpp's KV cells are shared by all layers and heads, so the engine evicts a token everywhere. The schedule follows
main/engine/pruning/KvController.ts: never more live cells than the budget. While the prompt is read, tokens go in as long
as they fit; when the next ones do not, a round prunes down to budget - input room (input room = max(decode room,
min(512, floor(0.3 * budget)))). While generating, a round every `prune_every` (16) tokens, or when the next token
would not fit, prunes down to budget - decode room (decode room = min(prune_every, budget / 2)). A round keeps the
cell at position 0 and the `keep_recent` (8) newest cells and ranks the rest; the lowest go. Kept cells keep their
positions (no shifting), as llama.cpp's cells do.

Rankings:
- "retention": TRIM-KV's score (t - pos_i) * log beta_i reduced over layers and KV heads with the max (a cell stays
  if any head wants it), in double precision; t = the tokens seen + 1 (the authors' q_idx, as the engine counts it);
- "recent": position (keep the most recent; an oracle-free baseline, StreamingLLM with one sink).

evictionModes.py runs this schedule with cells kept per layer or per (layer, KV head) instead, at equal memory.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import GgufModel  # noqa: E402
from sidecar import RetentionGates  # noqa: E402

POLICIES = ("retention", "recent")


def schedule_rooms(budget: int, prune_every: int) -> tuple[int, int]:
    """(decode room, input room): what a round leaves free while generating and while reading a prompt."""
    decode_room = max(1, min(prune_every, budget // 2))
    return decode_room, max(decode_room, min(512, int(budget * 0.3)))


class EvictionSim:
    def __init__(self, model: GgufModel, gates: RetentionGates | None, policy: str, budget: int, prune_every: int = 16,
                 keep_recent: int = 8):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}")
        if policy == "retention" and gates is None:
            raise ValueError("the retention policy needs gates")
        if budget < keep_recent + 2:
            raise ValueError(f"budget {budget} is too small (at least {keep_recent + 2} cells)")
        self.model, self.gates, self.policy = model, gates, policy
        self.budget, self.keep_recent = budget, keep_recent
        self.prune_every = prune_every
        self.decode_room, self.input_room = schedule_rooms(budget, prune_every)
        self.caches = [dict() for _ in model.layers]
        self.positions = torch.zeros(0, dtype=torch.long)
        self.log_beta = torch.zeros(0, dtype=torch.float64)  # per cell, max over layers and KV heads
        self.next_pos = 0
        self.since_round = 0
        self.rounds = 0

    @property
    def cells(self) -> int:
        return int(self.positions.numel())

    @torch.no_grad()
    def read_input(self, tokens: list[int]) -> torch.Tensor:
        """Reads prompt tokens (rounds when they do not fit) and returns their logits [n, V]."""
        out = []
        i = 0
        while i < len(tokens):
            remaining = len(tokens) - i
            if self.budget - self.cells < min(remaining, self.input_room):
                self._prune(self.budget - self.input_room)
            n = min(remaining, self.budget - self.cells)
            out.append(self._forward(tokens[i:i + n]))
            i += n
        return torch.cat(out)

    @torch.no_grad()
    def decode(self, tokens: list[int]) -> torch.Tensor:
        """Decodes generated tokens (teacher-forced: as if decoded one by one) and returns their logits [n, V]."""
        out = []
        i = 0
        while i < len(tokens):
            if self.since_round >= self.prune_every or self.budget - self.cells < 1:
                self._prune(self.budget - self.decode_room)
                self.since_round = 0
            n = min(len(tokens) - i, self.budget - self.cells, self.prune_every - self.since_round)
            out.append(self._forward(tokens[i:i + n]))
            self.since_round += n
            i += n
        return torch.cat(out)

    def _forward(self, tokens: list[int]) -> torch.Tensor:
        T, S0 = len(tokens), self.cells
        positions = torch.arange(self.next_pos, self.next_pos + T)
        mask = torch.zeros(T, S0 + T)
        mask[:, S0:] = torch.full((T, T), float("-inf")).triu(1)
        states: list[torch.Tensor] = []
        logits = self.model(tokens, positions=positions, mask=mask, caches=self.caches,
                            on_attn_norm=(lambda layer, h: states.append(h)) if self.gates is not None else None)
        if self.gates is not None:
            lb = self.gates.log_beta(states).to(torch.float64)  # [L, T, n_kv]
            new_lb = lb.amax(dim=(0, 2))
        else:
            new_lb = torch.zeros(T, dtype=torch.float64)
        self.positions = torch.cat((self.positions, positions))
        self.log_beta = torch.cat((self.log_beta, new_lb))
        self.next_pos += T
        return logits

    def scores(self) -> torch.Tensor:
        """Eviction scores of the cells (higher stays)."""
        if self.policy == "recent":
            return self.positions.to(torch.float64)
        # the engine's age, the authors' q_idx - pos with q_idx = seen + 1 (ngocbh/trimkv TrimKVCache.compress)
        t = self.next_pos + 1
        return (t - self.positions).to(torch.float64) * self.log_beta

    def _prune(self, max_keep: int):
        n = self.cells
        if n <= max_keep:
            return
        protected = torch.zeros(n, dtype=torch.bool)
        protected[self.positions == 0] = True
        protected[max(0, n - self.keep_recent):] = True
        room = max(0, max_keep - int(protected.sum()))
        candidates = (~protected).nonzero().flatten()
        s = self.scores()[candidates]
        # ties: the newer cell stays (candidates are in position order; a stable sort on -score keeps ties in order,
        # so sort on (score, position) descending by flipping)
        order = torch.argsort(s.flip(0), descending=True, stable=True)
        chosen = candidates.flip(0)[order[:room]]
        keep = protected.clone()
        keep[chosen] = True
        idx = keep.nonzero().flatten()
        for c in self.caches:
            c["k"] = c["k"][:, idx]
            c["v"] = c["v"][:, idx]
        self.positions = self.positions[idx]
        self.log_beta = self.log_beta[idx]
        self.rounds += 1


def simulate(model: GgufModel, gates: RetentionGates | None, policy: str, budget: int, prompt: list[int],
             completion: list[int], stop_ids, decode: bool = True, make_sim=None) -> dict:
    """Teacher-forced along Full's greedy completion under eviction: top-1 agreement with Full on the completion's
    tokens and whether the whole greedy output stays identical; with decode, when it does not, greedy decoding under
    eviction from the first difference gives the actual output (for answer checks). make_sim: a fresh simulation
    with read_input and decode (evictionModes.py's ModeSim); by default EvictionSim(model, gates, policy, budget)."""
    if make_sim is None:
        make_sim = lambda: EvictionSim(model, gates, policy, budget)  # noqa: E731
    sim = make_sim()
    last = sim.read_input(prompt)[-1:]
    logits = torch.cat((last, sim.decode(completion[:-1])))
    predicted = logits.argmax(-1)
    agree = predicted == torch.tensor(completion)
    result = {"agreement": float(agree.float().mean()), "identical": bool(agree.all()), "output": completion}
    if result["identical"] or not decode:
        return result
    first = int((~agree).nonzero()[0])
    sim = make_sim()
    logits = sim.read_input(prompt)[-1:]
    if first > 0:
        logits = sim.decode(completion[:first])
    out = list(completion[:first])
    stop_ids = set(stop_ids)
    while len(out) < len(completion) + 64:
        token = int(logits[-1].argmax())
        out.append(token)
        if token in stop_ids:
            break
        logits = sim.decode([token])
    result["output"] = out
    return result
