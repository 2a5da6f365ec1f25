"""Trains TRIM-KV retention gates for a GGUF model (the model stays frozen) and writes the retention sidecar.

    npm run train:retention -- --model resources/models/ponder-demo.gguf --demo-task \
        --out resources/models/ponder-demo.retention.gguf [--budget 128 --steps 300 --seed 1 --reduction shared]

Steps:
1. load the GGUF into the PyTorch replica (ggufModel.py); with --check-llama-cpp compare its next-token logits with
   llama.cpp's (through node-llama-cpp, scripts/retention/checkLogits.ts) on a sample;
2. training prompts: --demo-task (test/eval/train/task.py problems with seeds below 2^31 only; held-out evaluation
   seeds start at 2^31) or --prompts file.jsonl (one {"tokens": [...]} per line: prompts already rendered with the
   model's chat template, generation prompt included, and tokenized by llama.cpp; rendering templates in Python is
   out of scope);
3. the model's greedy Full-KV continuations of them (thinking included), cached in --cache-dir;
4. gate training with TRIM-KV's loss on prompt + continuation: student attention logits get + (t - i) * log beta_i,
   loss = (next-token cross-entropy + KL(teacher || student)) / 2 over the continuation's tokens + capacity loss
   mean_t max(0, (S_t - M) / (t - M)) with S_t = sum_{i<=t} beta_i^(t-i) (t > M), weight --capacity-weight;
   teacher = the same model without bias. --reduction shared (default) uses for every layer and head the max over
   layers and heads of log beta, the ranking the engine uses with llama.cpp's shared cells; per-head is the
   paper's. With --horizon-weight w, + w x Smooth-L1(log(-1 / log beta), log(1 + read horizon)), the read horizon
   being how far after a token the frozen model still puts --read-threshold of one head's attention on it (Locret's
   supervision in TRIM-KV's units; horizon_loss). --soft-max T trains the shared reduction through a softmax-weighted
   max whose temperature falls from T to 0;
5. with --seeds, steps 4 once per seed, and the gates kept are those that keep the most validation completions whole
   under the engine's eviction at --select-share of each length (evictionSim.py; ties: top-1 agreement);
6. the sidecar (sidecar.py), written atomically.

Seeded and reproducible with one thread. Gate inputs are the attn_norm outputs of the teacher pass (see README).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ggufModel import UnsupportedModelError, check_llama_cpp, load_gguf_model  # noqa: E402
from sidecar import REDUCTIONS, RetentionGates, default_matrix_type, fingerprint, write_sidecar  # noqa: E402
from evictionSim import simulate  # noqa: E402
from traces import (DEFAULT_CACHE_DIR, DEMO_STOP_IDS, DEMO_TRAIN_SEED_BASE, DEMO_VALIDATION_SEED_BASE,  # noqa: E402
                    demo_examples, jsonl_examples, stop_ids_from_metadata, task, traced)


def distance_matrix(T: int) -> torch.Tensor:
    """[T, T] with (t - i) for i <= t and 0 above the diagonal (the causal mask removes those)."""
    r = torch.arange(T, dtype=torch.float32)
    return (r[:, None] - r[None, :]).clamp(min=0)


def capacity_loss(log_beta: torch.Tensor, dist: torch.Tensor, lower: torch.Tensor, budget: int) -> torch.Tensor:
    """log_beta [N, T] (N series) -> mean over series and t > M of max(0, (S_t - M) / (t - M)),
    S_t = sum_{i<=t} beta_i^(t-i) (TRIM-KV capacity loss)."""
    T = log_beta.shape[-1]
    if T <= budget + 1:
        return log_beta.sum() * 0.0
    rows = torch.arange(budget + 1, T)
    total = log_beta.new_zeros(())
    for series in log_beta:
        e = torch.exp(dist[rows] * series[None, :]) * lower[rows]
        s = e.sum(-1)
        total = total + F.relu((s - budget) / (rows.float() - budget)).mean()
    return total / log_beta.shape[0]


def read_horizons(weights: torch.Tensor, threshold: float) -> torch.Tensor:
    """weights [G, T, T] (attention after the softmax, causal) -> [G, T]: for each key i, (last query t >= i giving it
    at least threshold of its attention) - i; 0 when no query does (read once, by itself at most)."""
    T = weights.shape[-1]
    rows = torch.arange(T, dtype=torch.float32)
    last = ((weights >= threshold).float() * rows[None, :, None]).amax(dim=1)
    return (last - rows[None, :]).clamp(min=0)


def horizon_loss(log_beta: torch.Tensor, horizon: torch.Tensor, min_seen: int = 16) -> torch.Tensor:
    """log_beta, horizon [N, T] -> Smooth-L1 between the gate's e-folding age -1 / log beta and the read horizon + 1,
    both in log space, over keys watched at least max(min_seen, 2 x horizon) tokens after writing (a later read would
    otherwise be unknown). Locret supervises its retaining heads with the attention a key receives later;
    here that supervision is put in TRIM-KV's units, so beta^(t - i) has decayed by e exactly when the model stops
    reading the key."""
    T = log_beta.shape[-1]
    watched = (T - 1 - torch.arange(T, dtype=torch.float32))[None, :]
    keep = watched >= torch.clamp(2 * horizon, min=min_seen)
    if not bool(keep.any()):
        return log_beta.sum() * 0.0
    predicted = -torch.log(-log_beta.clamp(max=-1e-6))  # log(-1 / log beta)
    return F.smooth_l1_loss(predicted[keep], torch.log1p(horizon[keep]))


def train_gates(model, cfg, examples: list[dict], args, seed: int, log, eval_examples=None) -> RetentionGates:
    """Trains one set of gates (seeded by seed) on the traced examples with TRIM-KV's loss; see the module's doc."""
    if eval_examples is not None:
        from evaluate import evaluate
    gen = torch.Generator().manual_seed(seed)
    gates = RetentionGates(cfg.n_layer, cfg.n_embd, args.hidden, cfg.n_head_kv).init_(gen, args.bias_init)
    opt = torch.optim.Adam(gates.parameters(), lr=args.lr)
    order: list[int] = []
    t_train = time.time()
    terms = ("loss", "ce", "kl", "cap", "hor")
    sums = dict.fromkeys(terms + ("n",), 0.0)
    heads_per_kv = cfg.n_head // cfg.n_head_kv
    for step in range(1, args.steps + 1):
        if not order:
            order = torch.randperm(len(examples), generator=gen).tolist()
        e = examples[order.pop()]
        seq = (e["prompt"] + e["completion"])[:args.max_tokens]
        n_prompt = min(len(e["prompt"]), len(seq) - 1)
        inputs, targets = seq[:-1], torch.tensor(seq[n_prompt:])
        T = len(inputs)
        states: list[torch.Tensor] = []
        horizons: list[torch.Tensor] = []  # per layer [n_kv, T], with --horizon-weight

        def on_attn(_layer, weights):  # [n_head, T, T] -> the sharpest read of each KV head's query group
            horizons.append(read_horizons(weights.reshape(cfg.n_head_kv, heads_per_kv, T, T).amax(1), args.read_threshold))

        with torch.no_grad():
            teacher = model(inputs, on_attn_norm=lambda layer, h: states.append(h),
                            on_attn=on_attn if args.horizon_weight > 0 else None)[n_prompt - 1:]
            teacher_logp = F.log_softmax(teacher, -1)
        lb = gates.log_beta(states)  # [L, T, n_kv]
        dist = distance_matrix(T)
        lower = torch.ones(T, T).tril()
        if args.soft_max > 0:
            # every gate learns while the temperature falls to the engine's max (a hard max trains only the winner)
            temperature = args.soft_max * max(0.0, 1.0 - step / (0.8 * args.steps))
        else:
            temperature = 0.0
        if args.reduction == "shared":
            if temperature > 0:
                per_gate = lb.permute(1, 0, 2).reshape(T, -1)  # [T, L * n_kv]
                shared = (torch.softmax(per_gate / temperature, -1) * per_gate).sum(-1)
            else:
                shared = lb.amax(dim=(0, 2))  # [T]
            b = (dist * shared[None, :])[None]
            bias = lambda layer: b  # noqa: E731
            series = shared[None]
            horizon = torch.stack(horizons).amax(dim=(0, 1))[None] if horizons else None
        else:
            per = lb.permute(0, 2, 1)  # [L, n_kv, T]
            bias = lambda layer: dist[None] * per[layer][:, None, :]  # noqa: E731
            series = per.reshape(-1, T)
            horizon = torch.stack(horizons).reshape(-1, T) if horizons else None
        student = model(inputs, bias=bias)[n_prompt - 1:]
        student_logp = F.log_softmax(student, -1)
        ce = F.nll_loss(student_logp, targets)
        kl = (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1).mean()
        budget = max(16, round(args.budget_share * len(seq))) if args.budget_share > 0 else args.budget
        cap = capacity_loss(series, dist, lower, budget)
        loss = 0.5 * (ce + kl) + args.capacity_weight * cap
        hor = horizon_loss(series, horizon) if horizon is not None else None
        if hor is not None:
            loss = loss + args.horizon_weight * hor
        lr = args.lr * min(1.0, step / max(1, args.warmup)) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss.backward()
        opt.step()
        for k, v in zip(terms, (loss, ce, kl, cap, hor)):
            sums[k] += float(v) if v is not None else 0.0
        sums["n"] += 1
        if step % args.log_every == 0 or step == args.steps:
            spent = time.time() - t_train
            n = sums["n"]
            with torch.no_grad():
                s = series.detach()
            log(f"step {step}/{args.steps} loss {sums['loss'] / n:.4f} ce {sums['ce'] / n:.4f} kl {sums['kl'] / n:.4f} "
                f"cap {sums['cap'] / n:.4f} hor {sums['hor'] / n:.4f} | log beta median {float(s.median()):.2e} min {float(s.min()):.2e} | "
                f"lr {lr:.1e} {spent / step:.2f} s/step ETA {spent / step * (args.steps - step):.0f}s")
            sums = dict.fromkeys(terms + ("n",), 0.0)
        if eval_examples is not None and step % args.eval_every == 0:
            r = evaluate(model, gates, eval_examples, [0.25, 0.5], ["retention"], decode=False)
            log(f"eval step {step}: {json.dumps({k: v for k, v in r.items() if '@' in k})}")

    return gates


def validation_score(model, gates, examples: list[dict], share: float, stop_ids) -> dict:
    """Teacher-forced along each example's Full completion under the engine's eviction at round(share * length) cells
    (evictionSim.py): the share of completions kept whole (every next token Full's) and the top-1 agreement."""
    identical = agree = total = 0
    for e in examples:
        budget = max(16, round(share * (len(e["prompt"]) + len(e["completion"]))))
        r = simulate(model, gates, "retention", budget, e["prompt"], e["completion"], stop_ids, decode=False)
        identical += r["identical"]
        agree += r["agreement"] * len(e["completion"])
        total += len(e["completion"])
    return {"identical": round(identical / len(examples), 4), "agreement": round(agree / max(1, total), 4)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="GGUF model (llama architecture)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--demo-task", action="store_true", help="train on demo-task problems (seeds below 2^31)")
    src.add_argument("--prompts", help='JSONL, one {"tokens": [...]} per line (rendered, tokenized prompts)')
    p.add_argument("--out", help="sidecar path. Defaults to <model>.retention.gguf.")
    p.add_argument("--train-count", type=int, default=120, help="training prompts (demo task). Defaults to 120.")
    p.add_argument("--budget", type=int, default=128, help="M of the capacity loss, in tokens. Defaults to 128.")
    p.add_argument("--budget-share", type=float, default=0.0,
                   help="instead of --budget: M = round(share * sequence length) per sequence (0: off). Defaults to 0.")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps (one sequence each). Defaults to 300.")
    p.add_argument("--seed", type=int, default=1, help="seed of the gate init and the example order. Defaults to 1.")
    p.add_argument("--reduction", choices=REDUCTIONS, default="shared", help="Defaults to shared.")
    p.add_argument("--hidden", type=int, default=512, help="gate hidden size H. Defaults to 512.")
    p.add_argument("--bias-init", type=float, default=8.0, help="initial per-head gate bias. Defaults to 8.")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate (cosine to 10%%). Defaults to 1e-2.")
    p.add_argument("--warmup", type=int, default=10, help="linear warm-up steps. Defaults to 10.")
    p.add_argument("--capacity-weight", type=float, default=1.0, help="Defaults to 1.")
    p.add_argument("--soft-max", type=float, default=0.0,
                   help="shared reduction: train through a softmax-weighted max over layers and KV heads whose temperature "
                        "(in log beta) falls from this to 0 (the engine's max) at 80%% of the steps; 0: the max throughout. "
                        "Defaults to 0.")
    p.add_argument("--horizon-weight", type=float, default=0.0,
                   help="weight of the read-horizon term (Locret-style supervision from the model's own attention; 0: the "
                        "paper's loss only). Defaults to 0.")
    p.add_argument("--read-threshold", type=float, default=0.5,
                   help="a key is read when one head of its KV group puts at least this share of its attention on it. "
                        "Defaults to 0.5.")
    p.add_argument("--max-new", type=int, default=4096, help="longest traced continuation. Defaults to 4096.")
    p.add_argument("--max-tokens", type=int, default=4096, help="crop training sequences to this length. Defaults to 4096.")
    p.add_argument("--type", choices=["f32", "f16"], default=None,
                   help="type of the two weight matrices. Defaults to f16 for models wider than 1024 (half the bandwidth a decode spends on the gates), else f32.")
    p.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR, help="where traces are cached")
    p.add_argument("--check-llama-cpp", action="store_true", help="compare the replica's logits with llama.cpp first")
    p.add_argument("--eval-every", type=int, default=0, help="demo task: held-out teacher-forced check every N steps")
    p.add_argument("--eval-count", type=int, default=10, help="problems in that check. Defaults to 10.")
    p.add_argument("--log-every", type=int, default=10, help="Defaults to 10.")
    p.add_argument("--seeds", help="comma-separated seeds: train one set of gates per seed and keep the one that keeps the "
                                   "most validation completions whole under eviction (then top-1 agreement); replaces --seed")
    p.add_argument("--validation-count", type=int, default=40,
                   help="validation prompts for --seeds: demo-task problems with training-range seeds that are not trained "
                        "on, or the last N prompts of --prompts, held out of training. Defaults to 40.")
    p.add_argument("--select-share", type=float, default=0.25,
                   help="--seeds: the cache budget of the validation, as a share of each sequence's length. Defaults to 0.25.")
    args = p.parse_args()
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()] if args.seeds else [args.seed]
    if len(seeds) != len(set(seeds)) or not seeds:
        p.error("--seeds: distinct integers, for example 1,2,3")
    if len(seeds) > 1 and args.validation_count < 1:
        p.error("--seeds needs --validation-count of at least 1")
    if not 0 < args.select_share < 1:
        p.error("--select-share must be between 0 and 1")
    if args.horizon_weight < 0 or args.soft_max < 0:
        p.error("--horizon-weight and --soft-max must be 0 or more")
    if not 0 < args.read_threshold <= 1:
        p.error("--read-threshold must be above 0 and at most 1 (a share of one head's attention)")
    if args.soft_max > 0 and args.reduction != "shared":
        p.error("--soft-max softens the shared reduction's max: it needs --reduction shared")
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    log = lambda m: print(m, flush=True)  # noqa: E731

    started = time.time()
    try:
        model, meta = load_gguf_model(args.model)
    except UnsupportedModelError as e:
        raise SystemExit(f"error: {e}")
    cfg = model.cfg
    out = args.out or (args.model[:-5] + ".retention.gguf")
    log(f"model {cfg.name}: {cfg.n_layer} layers, d {cfg.n_embd}, {cfg.n_head} heads / {cfg.n_head_kv} KV heads")

    if args.demo_task:
        if cfg.vocab_size != task.VOCAB_SIZE:
            raise SystemExit("error: --demo-task needs the demo model (its vocabulary differs)")
        if DEMO_TRAIN_SEED_BASE + args.train_count > DEMO_VALIDATION_SEED_BASE:
            raise SystemExit(f"error: --train-count above {DEMO_VALIDATION_SEED_BASE - DEMO_TRAIN_SEED_BASE} reaches the validation seeds")
        examples = demo_examples(DEMO_TRAIN_SEED_BASE, args.train_count, training=True)
        stop_ids = list(DEMO_STOP_IDS)
        validation = demo_examples(DEMO_VALIDATION_SEED_BASE, args.validation_count, training=True) if len(seeds) > 1 else []
    else:
        examples = jsonl_examples(args.prompts)
        stop_ids = stop_ids_from_metadata(meta)
        validation = []
        if len(seeds) > 1:
            if len(examples) <= args.validation_count:
                raise SystemExit(f"error: --seeds holds the last {args.validation_count} prompts out for validation, "
                                 f"but {args.prompts} has {len(examples)}: add prompts or lower --validation-count")
            examples, validation = examples[:-args.validation_count], examples[-args.validation_count:]
    if args.check_llama_cpp:
        sample = examples[0]["prompt"] + examples[0].get("proposal", [])[:200]
        check_llama_cpp(model, args.model, sample, log)
    examples = traced(model, fingerprint(args.model), examples, stop_ids, args.max_new, args.cache_dir, log)
    if validation:
        validation = traced(model, fingerprint(args.model), validation, stop_ids, args.max_new, args.cache_dir, log)
    lengths = sorted(len(e["prompt"]) + len(e["completion"]) for e in examples)
    log(f"{len(examples)} traces, {lengths[0]}-{lengths[-1]} tokens (median {lengths[len(lengths) // 2]}), "
        f"{time.time() - started:.0f}s so far")

    eval_examples = None
    if args.eval_every and args.demo_task:
        eval_examples = traced(model, fingerprint(args.model),
                               demo_examples(task.EVAL_SEED_BASE + 100_000, args.eval_count, training=False),
                               stop_ids, args.max_new, args.cache_dir, log)
    t_train = time.time()
    if len(seeds) == 1:
        gates = train_gates(model, cfg, examples, args, seeds[0], log, eval_examples)
        chosen = f"seed {seeds[0]}"
    else:
        best = None
        for seed in seeds:
            log(f"seed {seed} ({seeds.index(seed) + 1} of {len(seeds)})")
            candidate = train_gates(model, cfg, examples, args, seed, log, eval_examples)
            score = validation_score(model, candidate, validation, args.select_share, stop_ids)
            log(f"seed {seed}: validation at {args.select_share:g} of each length: {json.dumps(score)}")
            if best is None or (score["identical"], score["agreement"]) > (best[1]["identical"], best[1]["agreement"]):
                best = (seed, score, candidate)
        gates = best[2]
        chosen = (f"seed {best[0]}, best of seeds {','.join(map(str, seeds))} on {len(validation)} validation prompts "
                  f"(whole at {args.select_share:g}: {best[1]['identical']:g})")
        log(f"kept {chosen}")

    recorded_budget = round(args.budget_share * lengths[len(lengths) // 2]) if args.budget_share > 0 else args.budget
    m_text = f"M {args.budget_share:g} x length" if args.budget_share > 0 else f"M {args.budget}"
    source = (f"ponder train:retention, {len(examples)} {'demo-task' if args.demo_task else 'JSONL'} training problems, "
              f"{args.steps} steps, {m_text}, capacity weight {args.capacity_weight:g}, "
              f"{f'horizon weight {args.horizon_weight:g} at read {args.read_threshold:g}, ' if args.horizon_weight > 0 else ''}"
              f"{f'soft max {args.soft_max:g}, ' if args.soft_max > 0 else ''}"
              f"{args.reduction}, {chosen}")
    write_sidecar(out, gates, args.model, budget=recorded_budget, reduction=args.reduction, source=source, matrix_type=args.type or default_matrix_type(gates))
    log(f"wrote {out} ({os.path.getsize(out)} bytes); total {time.time() - started:.0f}s, "
        f"training {time.time() - t_train:.0f}s")


if __name__ == "__main__":
    main()
