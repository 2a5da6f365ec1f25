"""Cells kept per layer or per (layer, KV head) against llama.cpp's shared cells, at equal memory, in simulation.

llama.cpp's KV cells hold a token for every layer and head, so the engine frees a token from all of them at once and
ranks a cell by the maximum over layers and KV heads (evictionSim.py). The papers keep cells per head (TRIM-KV, H2O,
ReFreeKV) or per layer (Lethe, LAVa). This module replays the engine's schedule (evictionSim.EvictionSim's rounds,
rooms, position 0 and the `keep_recent` newest cells kept) with four modes:

- `shared`: one set of cells for every layer and KV head, ranked by the shared reduction (the engine's eviction);
- `layer`: each layer keeps exactly the budget's count of its own cells, ranked by that layer's reduction over its
  KV heads;
- `head`: each (layer, KV head) keeps exactly the budget's count of its own cells, ranked by its own score;
- `pooled`: the (layer, KV head)s together keep the budget's count times their number, each cell ranked by its own
  head's score against every head's, so a head that reads far keeps more cells than one that reads the last line.
  llama.cpp's cache gives every head as many slots, so this is not memory the engine can save: it measures whether
  what the heads read fits the budget at all, when equal shares are not required.

The same count in every layer or head is the same memory as that many shared cells. Every kept cell lies in the past,
so one causal mask still serves every head: the simulation keeps every position in the cache and applies a keep mask
per (layer, KV head) to the attention logits (a cell a head dropped is -inf to that head's query heads). Each round
counts the live cells of every (layer, KV head) and checks that it is exactly the round's target, never above the
budget (`ModeSim.round_log`, `ModeSim.peak`).

Rankings (higher stays), per (layer, KV head), then reduced by the mode:
- "retention": TRIM-KV's (t - pos) * log beta of the cell's own gate (per-head log beta from the sidecar, logsigmoid in
  double precision as the engine takes it); `layer` and `shared` take the max over the layer's or all KV heads (a cell
  stays if any head wants it);
- "h2o": H2O's accumulated attention received (gamma = 1, every query row, prompt and generation), summed over the KV
  head's query heads; `layer` sums a layer's KV heads, `shared` every layer and head; with H2O's recent window (the
  newest max_keep - floor(max_keep x heavy_ratio) cells, as the engine's h2o policy keeps);
- "oracle": foresight, not a policy: the attention Full's own trace (teacher-forced, every cell kept) gives the cell
  from the round's position on, summed over the KV head's query heads and the future queries; `layer` and `shared`
  sum it (the bench's oracle on shared cells ranks by the same future attention). It bounds what a ranking can do in
  each mode when it knows what will be read;
- "oracle-max": the same foresight by the strongest single read still to come (the largest weight one future query of
  one of the KV head's query heads puts on the cell); `layer` and `shared` take the max. A cell read once, hard, ranks
  as high as one read often.

Usage (the table of docs/BENCHMARKS.md, "Per-head cells in simulation"):
    python3 scripts/retention/evictionModes.py --models demo,merge --count 12 --shares 0.125,0.25,0.5 \\
        --modes shared,layer,head --rankings retention,h2o --json /tmp/modes.json
    python3 scripts/retention/evictionModes.py --table /tmp/modes.json   # the table again, from the report
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
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evictionSim import EvictionSim, schedule_rooms, simulate  # noqa: E402
from ggufModel import REPO_ROOT, GgufModel, load_gguf_model  # noqa: E402
from sidecar import RetentionGates, fingerprint, read_sidecar, sidecar_path_for  # noqa: E402

MODES = ("shared", "layer", "head", "pooled")
RANKINGS = ("retention", "h2o", "oracle", "oracle-max")
ORACLES = ("oracle", "oracle-max")
# how each ranking joins heads' scores into a layer's or the shared one: a retention stays if any head wants the cell
# (the engine's max), attention received adds up (H2O's sum over heads, as Lethe's Eq. 2 sums a layer's heads)
REDUCTIONS = {"retention": "max", "h2o": "sum", "oracle": "sum", "oracle-max": "max"}


@torch.no_grad()
def future_attention(model: GgufModel, tokens: list[int], ranking: str) -> torch.Tensor:
    """Foresight from Full's trace: [L, n_kv, T + 1, T] float32, row q holding, for every key, the attention that the
    queries at positions q and after give it (their sum for "oracle", their largest weight for "oracle-max"), over
    the KV head's query heads likewise; row T (no query left) is 0."""
    cfg = model.cfg
    n_kv, group, T = cfg.n_head_kv, cfg.n_head // cfg.n_head_kv, len(tokens)
    rows: list[torch.Tensor] = []

    def on_attn(_layer: int, w: torch.Tensor):  # [n_head, T, T]
        w = w.reshape(n_kv, group, T, T).float()
        if ranking == "oracle":
            per_query = w.sum(1)
            suffix = per_query.flip(1).cumsum(1).flip(1)
        else:
            per_query = w.amax(1)
            suffix = torch.cummax(per_query.flip(1), dim=1).values.flip(1)
        rows.append(torch.cat((suffix, torch.zeros(n_kv, 1, T)), dim=1))

    model(tokens, on_attn=on_attn)
    return torch.stack(rows)


class ModeSim(EvictionSim):
    """EvictionSim's schedule with a keep mask per (layer, KV head) over every cached position.

    per_head_scores: optional callable(sim) -> [L, n_kv, S] float64 replacing the ranking's own per-head scores (for
    tests), reduced by the ranking's reduction as the ranking's would be; future: the oracles' foresight
    (future_attention of Full's trace)."""

    def __init__(self, model: GgufModel, gates: RetentionGates | None, ranking: str, mode: str, budget: int,
                 prune_every: int = 16, keep_recent: int = 8, heavy_ratio: float = 0.5, per_head_scores=None,
                 future: torch.Tensor | None = None):
        if ranking not in RANKINGS:
            raise ValueError(f"ranking must be one of {RANKINGS}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if ranking == "retention" and gates is None and per_head_scores is None:
            raise ValueError("the retention ranking needs gates")
        if ranking in ORACLES and future is None and per_head_scores is None:
            raise ValueError("an oracle needs the future attention of Full's trace")
        self.future = future
        if budget < keep_recent + 2:
            raise ValueError(f"budget {budget} is too small (at least {keep_recent + 2} cells)")
        cfg = model.cfg
        self.model, self.gates, self.policy, self.ranking, self.mode = model, gates, ranking, ranking, mode
        self.budget, self.keep_recent, self.prune_every, self.heavy_ratio = budget, keep_recent, prune_every, heavy_ratio
        self.decode_room, self.input_room = schedule_rooms(budget, prune_every)
        self.per_head_scores = per_head_scores
        self.n_layer, self.n_kv, self.group = cfg.n_layer, cfg.n_head_kv, cfg.n_head // cfg.n_head_kv
        self.caches = [dict() for _ in model.layers]  # every position stays; the keep mask hides the dropped ones
        self.keep = torch.zeros(self.n_layer, self.n_kv, 0, dtype=torch.bool)
        self.log_beta = torch.zeros(self.n_layer, self.n_kv, 0, dtype=torch.float64)
        self.accumulated = torch.zeros(self.n_layer, self.n_kv, 0, dtype=torch.float64)
        self.next_pos = 0
        self.since_round = 0
        self.rounds = 0
        self.peak = 0  # the most live cells any (layer, KV head) held, at any time
        self.round_log: list[tuple[int, int, int]] = []  # per round: (max_keep, fewest, most live cells of a head)

    @property
    def positions(self) -> torch.Tensor:
        return torch.arange(self.next_pos)

    def live(self) -> torch.Tensor:
        """Live cells per (layer, KV head), [L, n_kv]."""
        return self.keep.sum(-1)

    @property
    def cells(self) -> int:
        """Live cells of a (layer, KV head): the same count for all of them (the schedule's count); `pooled`: their
        mean, which every forward raises by its tokens as in the other modes."""
        live = self.live()
        if self.mode == "pooled":
            total, heads = int(live.sum()), live.numel()
            if total % heads:
                raise AssertionError(f"the heads hold {total} cells, not a whole number per head")
            return total // heads
        lo, hi = int(live.min()) if live.numel() else 0, int(live.max()) if live.numel() else 0
        if lo != hi:
            raise AssertionError(f"heads hold different numbers of cells ({lo} to {hi})")
        return hi

    def _forward(self, tokens: list[int]) -> torch.Tensor:
        T, S0 = len(tokens), self.next_pos
        S = S0 + T
        positions = torch.arange(S0, S)
        mask = torch.zeros(T, S)
        mask[:, S0:] = torch.full((T, T), float("-inf")).triu(1)
        hidden = torch.zeros(self.n_layer, self.n_kv, 1, S)
        hidden[..., :S0].masked_fill_(~self.keep[:, :, None, :], float("-inf"))
        states: list[torch.Tensor] = []
        received = torch.zeros(self.n_layer, self.n_kv, S, dtype=torch.float64)

        def on_attn(layer: int, w: torch.Tensor):  # w [n_head, T, S]; query head h reads KV head h // group
            received[layer] = w.reshape(self.n_kv, self.group, T, S).sum(dim=(1, 2)).to(torch.float64)

        logits = self.model(tokens, positions=positions, mask=mask, caches=self.caches, bias=lambda layer: hidden[layer],
                            on_attn_norm=(lambda layer, h: states.append(h)) if self.gates is not None else None,
                            on_attn=on_attn if self.ranking == "h2o" else None)
        if self.gates is not None:
            # logsigmoid in double, as the engine takes it from the stored float logits
            lb = F.logsigmoid(self.gates.logits(states).to(torch.float64)).permute(0, 2, 1)  # [L, n_kv, T]
        else:
            lb = torch.zeros(self.n_layer, self.n_kv, T, dtype=torch.float64)
        self.log_beta = torch.cat((self.log_beta, lb), dim=-1)
        self.accumulated = torch.cat((self.accumulated, torch.zeros(self.n_layer, self.n_kv, T, dtype=torch.float64)), -1)
        self.accumulated += received
        self.keep = torch.cat((self.keep, torch.ones(self.n_layer, self.n_kv, T, dtype=torch.bool)), dim=-1)
        self.next_pos = S
        self.peak = max(self.peak, self.cells if self.mode == "pooled" else int(self.live().max()))
        if self.peak > self.budget:
            raise AssertionError(f"a head holds {self.peak} cells, over the budget of {self.budget}")
        return logits

    def head_scores(self) -> torch.Tensor:
        """Per (layer, KV head) scores of every position, [L, n_kv, S] (higher stays)."""
        if self.per_head_scores is not None:
            return self.per_head_scores(self).to(torch.float64)
        if self.ranking == "h2o":
            # H2O (Zhang et al., §4): a key's score is the attention it has received, accumulated over the queries
            return self.accumulated.clone()
        if self.ranking in ORACLES:
            # what Full's trace reads from here on; positions past its end (a greedy run that went longer) read 0
            known = self.future.shape[-1]
            row = self.future[:, :, min(self.next_pos, known), :min(self.next_pos, known)].to(torch.float64)
            return F.pad(row, (0, self.next_pos - row.shape[-1]))
        # TRIM-KV (Bui et al.): retention beta^(t - pos) compared in log space; t = the tokens seen + 1 (the engine's age)
        t = self.next_pos + 1
        return (t - self.positions).to(torch.float64)[None, None, :] * self.log_beta

    def scores(self) -> torch.Tensor:
        """The mode's ranking scores, [L, n_kv, S]: per head (`head`, `pooled`), or reduced over a layer's or all heads
        and broadcast."""
        s = self.head_scores()
        if self.mode in ("head", "pooled"):
            return s
        dims = (1,) if self.mode == "layer" else (0, 1)
        reduced = s.amax(dim=dims, keepdim=True) if REDUCTIONS[self.ranking] == "max" else s.sum(dim=dims, keepdim=True)
        return reduced.expand_as(s)

    def _prune(self, max_keep: int):
        if self.cells <= max_keep:
            return
        recent = self.keep_recent
        if self.ranking == "h2o":  # H2O's recent window, the rest of the budget its heavy hitters (the engine's h2o)
            recent = max(recent, max_keep - int(max_keep * self.heavy_ratio))
        # each head's structure: position 0 and its `recent` newest live cells (every head holds as many live cells,
        # so as many protected ones; the newest positions are live in all of them unless a larger window reaches back)
        newer_live = self.keep.flip(-1).cumsum(-1).flip(-1)  # live cells at or after each position
        protected = self.keep & (newer_live <= recent)
        protected[..., 0] = True
        protected_count = int(protected[0, 0].sum())
        room = max(0, max_keep - protected_count)
        candidate = self.keep & ~protected  # [L, n_kv, S]
        s = self.scores().masked_fill(~candidate, float("-inf"))
        keep = protected.clone()
        if self.mode == "pooled":
            # every head's candidates against each other: the room of all heads together (ties: the newer cell)
            flat = s.flip(-1).reshape(-1)
            order = torch.argsort(flat, descending=True, stable=True)[:room * self.n_layer * self.n_kv]
            chosen = torch.zeros_like(flat, dtype=torch.bool)
            chosen[order] = True
            keep |= chosen.reshape(s.shape).flip(-1)
        else:
            # ties: the newer cell stays (a stable descending sort over positions taken newest first)
            order = torch.argsort(s.flip(-1), dim=-1, descending=True, stable=True)[..., :room]
            keep.scatter_(-1, (self.next_pos - 1) - order, True)
        keep &= self.keep  # choosing a cell that is not a candidate would be a bug: the counts below catch it
        self.keep = keep
        live = self.live()
        target = max(max_keep, protected_count)  # the protected cells stay where they alone are more
        lo, hi = int(live.min()), int(live.max())
        if self.mode == "pooled":
            lo = hi = self.cells  # the heads' mean: their counts differ by design
        if lo != target or hi != target:
            raise AssertionError(f"round {self.rounds}: heads keep {lo} to {hi} cells, not exactly {target}")
        self.round_log.append((max_keep, lo, hi))
        self.rounds += 1


# ---------------------------------------------------------------------------------------------------------------
# The measurement: held-out problems of the two task models


def held_out_examples(problem, count: int, offset: int) -> list[dict]:
    """traces.py examples of the problems `problem(seed)` draws for seeds EVAL_SEED_BASE + offset .. (+ count)."""
    import task  # test/eval/train/task.py (on the path through ggufModel)
    examples = []
    for seed in range(task.EVAL_SEED_BASE + offset, task.EVAL_SEED_BASE + offset + count):
        p = problem(seed)
        examples.append({"seed": seed, "prompt": task.tokenize(task.render_prompt(p.question)),
                         "proposal": task.tokenize(task.render_completion(p.thinking, p.answer)), "answer": p.answer})
    return examples


def task_examples(task_name: str, count: int, offset: int = 0) -> tuple[list[dict], object]:
    """Held-out problems (seeds EVAL_SEED_BASE + offset ..) as traces.py examples, and the function that grades an
    output: the demo task's, the merge task's with k in the second half (the app's and bench's held-out sets), the
    recurrence task's, or one family's of the many-task model (`multi/<family>`, its held-out options)."""
    import task  # test/eval/train/task.py (on the path through ggufModel)
    if task_name == "demo":
        from traces import demo_examples
        examples = demo_examples(task.EVAL_SEED_BASE + offset, count, training=False)
        problem = lambda seed: task.generate_problem(seed)  # noqa: E731
    elif task_name == "merge":
        import mergeTask  # test/eval/train/mergeTask.py
        merge_opts = mergeTask.TaskOptions(min_k_share=0.5)
        problem = lambda seed: mergeTask.generate_problem(seed, merge_opts)  # noqa: E731
        examples = held_out_examples(problem, count, offset)
    elif task_name == "recur":
        import recurTask  # test/eval/train/recurTask.py
        problem = lambda seed: recurTask.generate_problem(seed)  # noqa: E731
        examples = held_out_examples(problem, count, offset)
    elif task_name.startswith("multi/"):
        import multiTask  # test/eval/train/multiTask.py
        multi_opts = multiTask.held_out_options([task_name.split("/", 1)[1]])
        problem = lambda seed: multiTask.generate_problem(seed, multi_opts)  # noqa: E731
        examples = held_out_examples(problem, count, offset)
    else:
        raise ValueError(f"unknown task {task_name!r}")

    def is_correct(example: dict, output: list[int]) -> bool:  # as scripts/retention/evaluate.py grades
        return task.extract_answer(task.detokenize(output)) == problem(example["seed"]).answer

    return examples, is_correct


MODELS = {"demo": os.path.join(REPO_ROOT, "resources", "models", "ponder-demo.gguf"),
          "merge": os.path.join(REPO_ROOT, "resources", "models", "ponder-merge.gguf"),
          "multi": os.path.join(REPO_ROOT, "resources", "models", "ponder-multi.gguf"),
          "recur": os.path.join(REPO_ROOT, "test", "eval", "models", "ponder-recur.gguf")}


def run_model(name: str, args, log) -> dict:
    """One model's report: `name` is demo, merge, recur, or `multi/<family>` (the many-task model on one family's
    problems)."""
    from traces import DEFAULT_CACHE_DIR, DEMO_STOP_IDS, traced  # noqa: F401
    path = MODELS[name.split("/", 1)[0]]
    model, _ = load_gguf_model(path)
    meta, gates = read_sidecar(sidecar_path_for(path), path)
    log(f"{name}: {model.cfg.architecture}, {model.cfg.n_layer} layers x {model.cfg.n_head_kv} KV heads "
        f"({model.cfg.n_head} query heads); gates: {meta['ponder.retention.source']}")
    examples, is_correct = task_examples(name, args.count, args.offset)
    # the task models share the tokenizer and its stop tokens
    examples = traced(model, fingerprint(path), examples, DEMO_STOP_IDS, 4096, args.cache_dir, log=log)
    lengths = [len(e["prompt"]) + len(e["completion"]) for e in examples]
    report: dict = {"model": name, "problems": len(examples), "full_correct": sum(is_correct(e, e["completion"]) for e in examples),
                    "tokens": [min(lengths), max(lengths)], "runs": {}}
    log(f"{name}: Full answers {report['full_correct']}/{len(examples)}; sequences {min(lengths)}-{max(lengths)} tokens")
    for ranking in args.rankings:
        for mode in args.modes:
            for share in args.shares:
                t0 = time.time()
                agree = total = identical = correct = peak_over = 0
                per_problem = []
                for e, n in zip(examples, lengths):
                    budget = round(share * n)
                    sims: list[ModeSim] = []
                    future = future_attention(model, e["prompt"] + e["completion"], ranking) if ranking in ORACLES else None

                    def make_sim(budget=budget, future=future):
                        sims.append(ModeSim(model, gates if ranking == "retention" else None, ranking, mode, budget,
                                            heavy_ratio=args.heavy_ratio, future=future))
                        return sims[-1]

                    r = simulate(model, None, ranking, budget, e["prompt"], e["completion"], DEMO_STOP_IDS, make_sim=make_sim)
                    ok = is_correct(e, r["output"])
                    agree += r["agreement"] * len(e["completion"])
                    total += len(e["completion"])
                    identical += r["identical"]
                    correct += ok
                    peak_over = max(peak_over, max(s.peak - s.budget for s in sims))
                    per_problem.append({"seed": e["seed"], "budget": budget, "identical": r["identical"], "correct": ok,
                                        "peak": max(s.peak for s in sims)})
                key = f"{ranking}/{mode}@{share:g}"
                report["runs"][key] = {"agreement": round(agree / total, 4), "identical": identical, "correct": correct,
                                       "peak_minus_budget": peak_over, "seconds": round(time.time() - t0, 1),
                                       "problems": per_problem}
                log(f"{name} {key}: correct {correct}/{len(examples)}, identical {identical}/{len(examples)}, "
                    f"agreement {agree / total:.4f}, {time.time() - t0:.1f} s")
    return report


def table(reports: list[dict], shares: list[float], rankings: list[str], modes: list[str]) -> str:
    """Markdown: a row per model, ranking and mode; per share, right answers and thoughts identical to Full's (of the
    problems), and the teacher-forced top-1 agreement with Full over the completions' tokens."""
    head = "| model | ranking | mode | " + " | ".join(f"{s * 100:g}%: correct / identical (agreement)" for s in shares) + " |"
    lines = [head, "|" + " --- |" * (3 + len(shares))]
    for rep in reports:
        n = rep["problems"]
        for ranking in rankings:
            for mode in modes:
                runs = [rep["runs"][f"{ranking}/{mode}@{s:g}"] for s in shares]
                cells = [f"{r['correct']} / {r['identical']} ({r['agreement']:.4f})" for r in runs]
                lines.append(f"| {rep['model']} (Full {rep['full_correct']}/{n}) | {ranking} | {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    from traces import DEFAULT_CACHE_DIR
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="demo,merge",
                   help="comma-separated, of demo, merge, recur, multi (every family of the many-task model) or "
                        "multi/<family>. Defaults to demo,merge.")
    p.add_argument("--count", type=int, default=12, help="held-out problems per model. Defaults to 12.")
    p.add_argument("--offset", type=int, default=0, help="first held-out seed = EVAL_SEED_BASE + offset. Defaults to 0.")
    p.add_argument("--shares", default="0.125,0.25,0.5", help="budgets as shares of Full's length. Defaults to 0.125,0.25,0.5.")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {MODES}. Defaults to all.")
    p.add_argument("--rankings", default=",".join(RANKINGS), help=f"comma-separated, of {RANKINGS}. Defaults to all.")
    p.add_argument("--heavy-ratio", type=float, default=0.5, help="H2O's share of heavy hitters. Defaults to 0.5.")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR, help="where Full's traces are cached")
    p.add_argument("--json", help="also write the report here")
    p.add_argument("--demo-model", help="another copy of the demo model (its gates beside it, as the app keeps them)")
    p.add_argument("--merge-model", help="another copy of the merge model (its gates beside it)")
    p.add_argument("--multi-model", help="another copy of the many-task model (its gates beside it)")
    p.add_argument("--recur-model", help="another copy of the recurrence model (its gates beside it)")
    p.add_argument("--table", metavar="JSON", help="only print the table of a report written by --json")
    args = p.parse_args()
    if args.table:
        with open(args.table) as f:
            saved = json.load(f)
        a = saved["args"]
        print(table(saved["reports"], a["shares"], a["rankings"], a["modes"]))
        return
    torch.set_num_threads(1)
    args.shares = [float(s) for s in args.shares.split(",")]
    args.modes = [m for m in args.modes.split(",") if m]
    args.rankings = [r for r in args.rankings.split(",") if r]
    for m in args.modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r}")
    for r in args.rankings:
        if r not in RANKINGS:
            p.error(f"unknown ranking {r!r}")
    if args.demo_model:
        MODELS["demo"] = os.path.abspath(args.demo_model)
    if args.merge_model:
        MODELS["merge"] = os.path.abspath(args.merge_model)
    if args.multi_model:
        MODELS["multi"] = os.path.abspath(args.multi_model)
    if args.recur_model:
        MODELS["recur"] = os.path.abspath(args.recur_model)
    log = lambda m: print(m, flush=True)  # noqa: E731
    t0 = time.time()
    reports = []
    import multiTask  # test/eval/train/multiTask.py (on the path through ggufModel)
    names = []
    for name in [m for m in args.models.split(",") if m]:
        if name == "multi":
            names += [f"multi/{family}" for family in multiTask.FAMILIES]
        elif name in MODELS or (name.startswith("multi/") and name.split("/", 1)[1] in multiTask.FAMILIES):
            names.append(name)
        else:
            p.error(f"unknown model {name!r}")
    for name in names:
        reports.append(run_model(name, args, log))
    print(table(reports, args.shares, args.rankings, args.modes), flush=True)
    print(f"{time.time() - t0:.0f} s in all", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items()}, "reports": reports}, f, indent=1)


if __name__ == "__main__":
    main()
