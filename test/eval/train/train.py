"""Trains a reasoner on a task (task.py: the demo's programs; mergeTask.py: merging sorted lists; multiTask.py: six
families asked in words; recurTask.py: a recurrence whose thought reads its own lines), seeded,
deterministic and resumable.

Every batch holds problems of the same size (program steps and variables, or list items), so all its sequences have
the same length (the formats are fixed-width) and no padding is needed. The size follows a curriculum: it is drawn
uniformly from [min_steps, cap] where cap grows linearly from --curriculum-start to --max-steps over the first
--curriculum-frac of training. The loss is the cross-entropy of the assistant part (thinking, "</think>", answer,
"<|im_end|>"); the question is context only.

Usage: python3 test/eval/train/train.py --out test/eval/train/runs/main [--resume] (see README.md)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

# One core: OpenBLAS/OpenMP would otherwise start a thread per core (must be set before importing torch).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import task as demo_task
import mergeTask as merge_task
import multiTask as multi_task
import recurTask as recur_task
from task import VOCAB_SIZE, SPECIAL_IDS, TOKEN_TEXT, render_prompt, render_completion, tokenize, EVAL_SEED_BASE
from model import ModelConfig, Transformer

TASKS = {demo_task.NAME: demo_task, merge_task.NAME: merge_task, multi_task.NAME: multi_task, recur_task.NAME: recur_task}

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "Think step by step.",
    "You are Ponder, a careful reasoning assistant. Show your work.",
    "Answer with a single digit.",
]


args_task = demo_task  # the module of --task


def mix32(*values: int) -> int:
    """Deterministic 32-bit hash of a tuple of ints (splitmix-style)."""
    h = 0x9E3779B9
    for v in values:
        h ^= (v & 0xFFFFFFFF) + 0x9E3779B9 + ((h << 6) & 0xFFFFFFFF) + (h >> 2)
        h &= 0xFFFFFFFF
        h = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
        h = ((h ^ (h >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
    return h


def encode_example(problem, system: str | None = None):
    prompt = tokenize(render_prompt(problem.question, system))
    completion = tokenize(render_completion(problem.thinking, problem.answer))
    return prompt, completion


def make_batch(seeds, opts, system_rate: float = 0.0, rng_key: int = 0, question_weight: float = 0.0,
               answer_weight: float = 1.0):
    """Returns tokens [B, T] and loss weights [B, T-1]: 1 where the target is a completion token (answer_weight where
    it is a token of the answer or one of the thought's tokens that decide it, a task's answer_slots), question_weight
    where it is a token of the user message."""
    rows, masks = [], []
    for j, seed in enumerate(seeds):
        problem = args_task.generate_problem(seed, opts)
        system = None
        if system_rate > 0:
            h = mix32(rng_key, seed, 7)
            if (h % 1000) / 1000 < system_rate:
                system = SYSTEM_PROMPTS[(h >> 10) % len(SYSTEM_PROMPTS)]
        prompt, completion = encode_example(problem, system)
        rows.append(prompt + completion)
        weights = [0.0] * (len(prompt) - 1) + [1.0] * len(completion)
        if answer_weight != 1.0:
            # the answer's tokens: before the final <|im_end|>
            n_answer = len(tokenize(problem.answer))
            weights[-1 - n_answer:-1] = [answer_weight] * n_answer
            # the thought's tokens that decide the answer (a task's answer_slots: merge's marks, tally's)
            slots = args_task.answer_slots(problem) if hasattr(args_task, "answer_slots") else []
            if slots:
                # character offsets in the thought to token indices: the completion begins with the thought
                token_of_char = [i for i, t in enumerate(completion) for _ in TOKEN_TEXT[t].decode()]
                for offset in slots:
                    weights[len(prompt) - 1 + token_of_char[offset]] = answer_weight
        if question_weight > 0:
            # targets prompt[i + 1] for i in the user message: from its first character to its last
            text = render_prompt(problem.question, system)
            start = len(tokenize(text[:text.index(problem.question)]))
            end = start + len(tokenize(problem.question))
            if args_task is multi_task:
                end += 1  # and the user turn's <|im_end|>: a model that writes a question ends it
            for i in range(start - 1, end - 1):
                weights[i] = question_weight
        masks.append(weights)
    if args_task is multi_task:
        return pack_rows(rows, masks)
    T = max(len(r) for r in rows)
    tokens = torch.full((len(rows), T), SPECIAL_IDS["<|endoftext|>"], dtype=torch.long)  # padding, masked out
    loss_mask = torch.zeros((len(rows), T - 1))
    for i, (r, m) in enumerate(zip(rows, masks)):
        tokens[i, :len(r)] = torch.tensor(r)
        loss_mask[i, :len(m)] = torch.tensor(m, dtype=torch.float)
    return tokens, loss_mask


def pack_rows(rows, masks):
    """Packs examples of different lengths into rows of the longest one's length (first fit, longest first), each row
    with a block-diagonal causal mask so that no example attends to another (RoPE is relative: an example's offset in
    its row does not change its attention). Returns tokens [B, T], loss weights [B, T-1] and the additive mask
    [B, 1, T-1, T-1]."""
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    T = len(rows[order[0]])
    packed: list[list[int]] = []
    for i in order:
        for row in packed:
            if sum(len(rows[j]) for j in row) + len(rows[i]) <= T:
                row.append(i)
                break
        else:
            packed.append([i])
    tokens = torch.full((len(packed), T), SPECIAL_IDS["<|endoftext|>"], dtype=torch.long)
    loss_mask = torch.zeros((len(packed), T - 1))
    mask = torch.full((len(packed), 1, T - 1, T - 1), float("-inf"))
    causal = torch.full((T, T), float("-inf")).triu(1)
    for b, row in enumerate(packed):
        at = 0
        for j in row:
            n = len(rows[j])
            tokens[b, at:at + n] = torch.tensor(rows[j])
            loss_mask[b, at:at + n - 1] = torch.tensor(masks[j], dtype=torch.float)
            end = min(at + n, T - 1)  # the inputs are tokens[:, :-1]
            mask[b, 0, at:end, at:end] = causal[:end - at, :end - at]
            at += n
        if at < T - 1:  # padding attends to itself only (no NaN rows)
            idx = torch.arange(at, T - 1)
            mask[b, 0, idx, idx] = 0.0
    return tokens, loss_mask, mask


def batch_spec(args, step: int):
    """(task options, seeds, size) for a training step; a pure function of (args.seed, step)."""
    h = mix32(args.seed, step, 1)
    ramp = max(1, int(args.curriculum_frac * args.steps))
    progress = min(1.0, max(0, step - args.curriculum_hold) / ramp)
    cap = args.curriculum_start + (args.max_steps - args.curriculum_start) * progress
    cap = max(args.train_min_steps, int(round(cap)))
    n_steps = args.train_min_steps + h % (cap - args.train_min_steps + 1)
    vcap = args.vars_curriculum_start + (args.max_vars - args.vars_curriculum_start) * progress
    vcap = max(args.train_min_vars, int(round(vcap)))
    n_vars = args.train_min_vars + mix32(h, 2) % (vcap - args.train_min_vars + 1)
    if args_task is multi_task:
        # a scale range up to the curriculum's cap, every family; batch size from the longest problem it can draw
        opts = multi_task.options(args.train_min_steps, max(args.train_min_steps, n_steps))
        opts.families = family_draws(args.family_weights)
        cached = _LENGTHS.get(n_steps)
        if cached is None:
            cached = _LENGTHS[n_steps] = multi_task.length_estimate(opts)
        seeds = [mix32(args.seed, step, 3, j) & 0x7FFFFFFF for j in range(args.batch_tokens // (cached // 2 + 1))]
        return opts, seeds, n_steps
    opts = args_task.options(n_steps, n_steps, n_vars, n_vars)
    length = sum(len(x) for x in encode_example(args_task.generate_problem(0, opts)))
    batch_size = max(1, args.batch_tokens // length)
    seeds = [mix32(args.seed, step, 3, j) & 0x7FFFFFFF for j in range(batch_size)]  # training seeds < 2^31
    return opts, seeds, n_steps


_LENGTHS: dict[int, int] = {}


def family_draws(weights: str | None) -> list[str]:
    """The many-task families a training problem is drawn from, each as often as its weight says ("sum=3,reverse=4";
    a family not named weighs 1): a list with repeats, which the problem's seed draws one entry of."""
    draws = {family: 1 for family in multi_task.FAMILIES}
    for part in filter(None, (weights or "").split(",")):
        family, _, weight = part.partition("=")
        if family not in draws or not weight.isdigit():
            raise SystemExit(f"--family-weights: {part!r} is not family=whole number (families: {', '.join(draws)})")
        draws[family] = int(weight)
    if sum(draws.values()) == 0:
        raise SystemExit("--family-weights: every family weighs 0")
    return [family for family, weight in draws.items() for _ in range(weight)]


def lr_at(args, step: int) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    decay_start = max(args.warmup, int(args.decay_start * args.steps))
    if step < decay_start:
        return args.lr
    progress = (step - decay_start) / max(1, args.steps - decay_start)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


@torch.no_grad()
def teacher_forced_eval(model, args, count: int, opts, seed_base: int = EVAL_SEED_BASE + 10_000_000):
    """Held-out problems under teacher forcing: token accuracy on the completion, and the fraction of problems whose
    completion is predicted entirely right (then greedy decoding reproduces it exactly)."""
    model.eval()
    exact, correct, total, answer_ok = 0, 0, 0, 0
    for i in range(count):
        problem = args_task.generate_problem(seed_base + i, opts)
        prompt, completion = encode_example(problem)
        tokens = torch.tensor([prompt + completion])
        logits = model(tokens[:, :-1])
        pred = logits[0, len(prompt) - 1:].argmax(-1)
        target = tokens[0, len(prompt):]
        ok = (pred == target)
        correct += int(ok.sum())
        total += len(target)
        exact += int(ok.all())
        answer_ok += int(ok[-1 - len(tokenize(problem.answer)):-1].all())  # the answer (followed by <|im_end|>)
    model.train()
    return {"token_acc": correct / total, "exact": exact / count, "answer_tf": answer_ok / count}


def save_checkpoint(path, model, optimizer, step, args, cfg, cpu):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                "args": vars(args), "config": cfg.to_dict(), "cpu": cpu}, tmp)
    os.replace(tmp, path)


def save_weights(path, model, step, cfg, cpu):
    """The weights alone (F32) with the step and the CPU seconds so far: what a later session goes on from
    (--resume-weights) when the run folder, optimizer included, is gone."""
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "step": step, "config": cfg.to_dict(), "cpu": cpu}, tmp)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="run directory (checkpoints, log)")
    p.add_argument("--task", choices=sorted(TASKS), default=demo_task.NAME, help="the task to train on")
    p.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint.pt if it exists")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=3000, help="optimizer steps")
    p.add_argument("--batch-tokens", type=int, default=6144, help="tokens per batch (sequences of equal length)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.05)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--decay-start", type=float, default=0.0,
                   help="fraction of training after which the learning rate follows a cosine down to --min-lr-frac")
    p.add_argument("--init-from", help="start from the weights of this checkpoint (fresh optimizer and schedule)")
    p.add_argument("--resume-weights",
                   help="with --resume and no checkpoint.pt in --out: go on from this weights file (save_weights: the model and "
                        "its step; a fresh optimizer, its learning rate ramped up again over --rewarm steps)")
    p.add_argument("--rewarm", type=int, default=100, help="steps over which --resume-weights ramps the learning rate up")
    p.add_argument("--save-weights", help="also write the weights and the step here at every checkpoint (a file small enough to keep)")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--grad-clip", type=float, default=1.0)
    # task
    p.add_argument("--min-steps", type=int, help="smallest size (program steps, list items) of eval problems; the task's default")
    p.add_argument("--max-steps", type=int, help="largest size (training and eval); the task's default")
    p.add_argument("--min-vars", type=int, help="fewest variables of eval problems (tasks without variables ignore it)")
    p.add_argument("--max-vars", type=int)
    p.add_argument("--train-min-steps", type=int, default=2, help="smallest size of training problems")
    p.add_argument("--train-min-vars", type=int, default=2, help="fewest variables in training problems")
    p.add_argument("--vars-curriculum-start", type=int, default=4, help="initial cap on the number of variables")
    p.add_argument("--question-loss", type=float, default=0.3,
                   help="loss weight of the user message tokens (random, but they train copy/induction heads)")
    p.add_argument("--family-weights",
                   help="many-task model: how often each family is drawn for training, e.g. sum=3,reverse=4 (others 1)")
    p.add_argument("--answer-loss", type=float, default=1.0,
                   help="loss weight of the answer's tokens and of the thought's tokens that decide it (a task's answer_slots; "
                        "a two-token answer is a tiny share of a long completion)")
    p.add_argument("--answer-loss-from", type=int, default=0, help="training step from which --answer-loss applies")
    p.add_argument("--curriculum-start", type=int, default=16, help="initial cap on the number of steps")
    p.add_argument("--curriculum-frac", type=float, default=0.4, help="fraction of training to reach --max-steps")
    p.add_argument("--curriculum-hold", type=int, default=0, help="steps at the initial caps before the ramp")
    p.add_argument("--system-rate", type=float, default=0.1, help="fraction of examples with a system message")
    # model
    p.add_argument("--arch", choices=["llama", "qwen2", "qwen3"], default="llama")
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-head-kv", type=int, default=0, help="key/value heads (grouped-query attention); 0: --n-head")
    p.add_argument("--n-embd-head", type=int, default=0, help="dimension of a head; 0: n_embd / n_head")
    p.add_argument("--n-ff", type=int, default=384)
    p.add_argument("--context-length", type=int, default=4096)
    # bookkeeping
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-count", type=int, default=40)
    p.add_argument("--ckpt-every", type=int, default=50)
    p.add_argument("--bf16", action="store_true",
                   help="matrix products in bfloat16 (CPU autocast; weights, optimizer and loss stay float32)")
    p.add_argument("--stop-after", type=int, default=0, help="exit after this many steps in this invocation (testing)")
    args = p.parse_args()
    global args_task
    args_task = TASKS[args.task]
    for name, default in [("min_steps", args_task.DEFAULT_MIN_SIZE), ("max_steps", args_task.DEFAULT_MAX_SIZE),
                          ("min_vars", args_task.DEFAULT_MIN_VARS), ("max_vars", args_task.DEFAULT_MAX_VARS)]:
        if getattr(args, name) is None:
            setattr(args, name, default)

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    log_path = os.path.join(args.out, "log.jsonl")

    cfg = ModelConfig(vocab_size=VOCAB_SIZE, n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head, n_ff=args.n_ff,
                      context_length=args.context_length, arch=args.arch, n_head_kv=args.n_head_kv,
                      n_embd_head=args.n_embd_head)
    torch.manual_seed(args.seed)
    model = Transformer(cfg)
    decay = [p_ for n, p_ in model.named_parameters() if p_.dim() >= 2]
    no_decay = [p_ for n, p_ in model.named_parameters() if p_.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    start = 0
    if args.init_from and not (args.resume and os.path.exists(ckpt_path)):
        model.load_state_dict(torch.load(args.init_from)["model"])
        print(f"initialised from {args.init_from}", flush=True)
    rewarm_until = 0
    if args.resume and os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start = ckpt["step"]
        print(f"resumed from step {start}", flush=True)
    elif args.resume and args.resume_weights and os.path.exists(args.resume_weights):
        ckpt = torch.load(args.resume_weights)
        model.load_state_dict({name: tensor.float() for name, tensor in ckpt["model"].items()})
        start = ckpt["step"]
        rewarm_until = start + args.rewarm
        print(f"resumed the weights of step {start} (fresh optimizer, learning rate ramped up to step {rewarm_until})", flush=True)
    print(f"model: {model.num_params()} parameters, config {cfg.to_dict()}", flush=True)
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=1)

    eval_opts = args_task.options(args.min_steps, args.max_steps, args.min_vars, args.max_vars)
    log = open(log_path, "a")
    model.train()
    t_run = time.time()
    cpu_run = time.process_time()
    cpu_before = ckpt.get("cpu", 0.0) if start else 0.0  # CPU seconds spent before a resume
    window_loss, window_tokens, window_time = 0.0, 0, 0.0
    steps_this_run = 0
    for step in range(start, args.steps):
        t0 = time.time()
        opts, seeds, size = batch_spec(args, step)
        answer_weight = args.answer_loss if step >= args.answer_loss_from else 1.0
        batch = make_batch(seeds, opts, args.system_rate, mix32(args.seed, step, 5), args.question_loss, answer_weight)
        tokens, loss_mask = batch[0], batch[1]
        lr = lr_at(args, step)
        if step < rewarm_until:
            lr *= (step - (rewarm_until - args.rewarm) + 1) / args.rewarm
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(tokens[:, :-1], 0, batch[2] if len(batch) > 2 else None)
        losses = F.cross_entropy(logits.float().reshape(-1, cfg.vocab_size), tokens[:, 1:].reshape(-1), reduction="none")
        completion_mask = (loss_mask >= 1).float()
        loss = (losses * loss_mask.reshape(-1)).sum() / completion_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        dt = time.time() - t0
        window_loss += float((losses.detach() * completion_mask.reshape(-1)).sum())
        window_tokens += int(completion_mask.sum())
        window_time += dt
        steps_this_run += 1
        done = step + 1
        if done % args.log_every == 0 or done == args.steps:
            record = {"step": done, "loss": window_loss / max(1, window_tokens), "lr": lr, "grad_norm": float(grad_norm),
                      "n_steps": size, "batch": len(seeds), "seq": tokens.shape[1],
                      "sec_per_step": window_time / args.log_every, "elapsed": time.time() - t_run,
                      "cpu": time.process_time() - cpu_run + cpu_before}
            print(json.dumps(record), flush=True)
            log.write(json.dumps(record) + "\n")
            log.flush()
            window_loss, window_tokens, window_time = 0.0, 0, 0.0
        if done % args.ckpt_every == 0 or done == args.steps:
            save_checkpoint(ckpt_path, model, optimizer, done, args, cfg, time.process_time() - cpu_run + cpu_before)
            if args.save_weights:
                save_weights(args.save_weights, model, done, cfg, time.process_time() - cpu_run + cpu_before)
        if (done % args.eval_every == 0 or done == args.steps) and args_task is multi_task:
            for family in multi_task.FAMILIES:
                o = multi_task.held_out_options([family])
                result = teacher_forced_eval(model, args, args.eval_count, o)
                record = {"step": done, "eval": family, **result}
                print(json.dumps(record), flush=True)
                log.write(json.dumps(record) + "\n")
                log.flush()
        elif done % args.eval_every == 0 or done == args.steps:
            for name, o in [("short", args_task.options(args.min_steps, max(args.min_steps, 20), args.min_vars, args.max_vars)),
                            ("full", eval_opts)]:
                result = teacher_forced_eval(model, args, args.eval_count, o)
                record = {"step": done, "eval": name, **result}
                print(json.dumps(record), flush=True)
                log.write(json.dumps(record) + "\n")
                log.flush()
        if args.stop_after and steps_this_run >= args.stop_after:
            break
    if done == args.steps:
        torch.save({"model": model.state_dict(), "config": cfg.to_dict(), "args": vars(args), "step": done,
                    "cpu": time.process_time() - cpu_run + cpu_before},
                   os.path.join(args.out, "final.pt"))
    print(f"done: step {done}, {time.time() - t_run:.0f}s this run", flush=True)


if __name__ == "__main__":
    main()
