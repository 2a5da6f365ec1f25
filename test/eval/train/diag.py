"""Teacher-forced accuracy by position within the thinking line (diagnostic)."""
import os
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import sys, torch, collections
sys.path.insert(0, '.')
from task import *
from export import load_model
torch.set_num_threads(1)
model = load_model(sys.argv[1])
lo, hi = int(sys.argv[2]), int(sys.argv[3])
acc = collections.defaultdict(lambda: [0, 0])
with torch.no_grad():
    for i in range(int(sys.argv[4]) if len(sys.argv) > 4 else 20):
        p = generate_problem(EVAL_SEED_BASE + 5_000_000 + i, TaskOptions(lo, hi, *(map(int, sys.argv[5:7]) if len(sys.argv) > 6 else (6, 16))))
        prompt = tokenize(render_prompt(p.question)); comp = tokenize(render_completion(p.thinking, p.answer))
        toks = torch.tensor([prompt + comp])
        pred = model(toks[:, :-1])[0].argmax(-1)
        for j in range(len(comp)):
            pos = len(prompt) + j
            col = j % 13 if j < len(comp) - 5 else 'end%d' % (len(comp) - j)
            a = acc[col]; a[0] += int(pred[pos - 1] == toks[0, pos]); a[1] += 1
print(' '.join(f'{k}:{v[0]/v[1]:.2f}' for k, v in acc.items()))
