"""Teacher-forced accuracy of the operand values, by operand kind (diagnostic).

Usage: python3 test/eval/train/diag2.py <checkpoint> <min steps> <max steps> <min vars> <max vars> <problems>
"""
import os
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import collections
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from task import EVAL_SEED_BASE, TaskOptions, generate_problem, render_prompt, render_completion, tokenize
from export import load_model

torch.set_num_threads(1)
model = load_model(sys.argv[1])
lo, hi, vlo, vhi, n = map(int, sys.argv[2:7])
acc = collections.defaultdict(lambda: [0, 0])
with torch.no_grad():
    for i in range(n):
        p = generate_problem(EVAL_SEED_BASE + 5_000_000 + i, TaskOptions(lo, hi, vlo, vhi))
        prompt = tokenize(render_prompt(p.question))
        comp = tokenize(render_completion(p.thinking, p.answer))
        toks = torch.tensor([prompt + comp])
        pred = model(toks[:, :-1])[0].argmax(-1)
        lines = p.thinking.split("\n")
        for k, line in enumerate(lines):
            base = len(prompt) + 13 * k  # 13 tokens per line
            name, op1, op2 = re.match(r"(\w+)=(\w+):\d\+(\w+):\d=\d\d", line).groups()
            for col, op, which in [(4, op1, "1"), (8, op2, "2")]:
                if op.isupper():
                    back = k - next(j for j, l in enumerate(lines) if l.startswith(op + "="))
                    kind = f"step{which} {'>=10' if back >= 10 else '<10'} lines back"
                else:
                    kind = f"var{which}"
                a = acc[kind]
                a[0] += int(pred[base + col - 1] == toks[0, base + col])
                a[1] += 1
        a = acc["answer"]
        a[0] += int(pred[len(prompt) + len(comp) - 3] == toks[0, len(prompt) + len(comp) - 2])
        a[1] += 1
print(" | ".join(f"{k}: {v[0] / v[1]:.3f} ({v[1]})" for k, v in sorted(acc.items())))
