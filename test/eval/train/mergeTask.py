"""The second reasoning task: merge two sorted lists step by step, then answer the value at one position.

A problem (the user message) gives two sorted lists of distinct two-digit numbers and asks for the k-th number of
their merge:

    a=05,12,19,33,47,58
    b=02,21,22,30,61
    k=07?

The thinking writes one line per merged number: the line's index, the head of list a, the head of list b, the
comparison, and the smaller head, which is the number at that position of the merge. Line k has ``?`` after its index
instead of ``:`` (as k has in the question) and ``*`` after its number. A list whose numbers are all used has the head
``--``, larger than every number:

    01:a05b02>02
    02:a05b21<05
    03:a12b21<12
    ...
    07?a33b30>30*
    ...
    11:a--b61>61

and the answer after ``</think>`` is the marked number (``30``). Reads follow two pointers through the question:
after a line whose smaller head came from list a, the next line's head of a is the number after it in the question
(the other head is copied from the line above). The marks are where the thought makes the answer, one hop each: as a
line starts, its index just written is matched with k in the question (``?`` copies what follows k there); the line's
end copies the ``?`` from its start into ``*``; the answer copies the two digits before the one ``*``. A first format
without marks left the answer to find line k by its index, three hops back, and the model never learned it; with
``*`` alone, decided at the line's end, it learned the match for k < 10 only. A cache that keeps only attention sinks
and the most recent half of the tokens loses the lists once the thinking is twice as long as the question, and with
them every later head.

The comparison comes after both heads, so that each head is read (copied from the line above, or looked up in the
question) before it is compared. Every line is 13 tokens (12 single-byte characters and the newline; line k 14) with
the tokenizer of task.py, so all problems with the same number of items have the same length.

The generator is a pure function of (seed, options), using mulberry32, so that test/eval/mergeTask.ts reproduces the
same problems from the same seeds. Training uses seeds below 2^31 and asks any position; held-out evaluation uses
seeds >= 2^31 (``EVAL_SEED_BASE + i``), and the app's and bench's held-out sets ask a position in the second half
(``--min-k-share 0.5``): a position early in the merge is answered before the thought needs the far end of the lists.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from task import EVAL_SEED_BASE, Mulberry32, print_problems, print_stats

NAME = "merge"
DEFAULT_MIN_ITEMS = 40
DEFAULT_MAX_ITEMS = 80
MAX_ITEMS_LIMIT = 99  # line indices are two digits
VALUES = 100  # the numbers are 00..99, all distinct
K_SEPARATOR = "?"  # after line k's index, as after k in the question ("k=07?"), instead of ":"
MARKER = "*"  # ends line k: the thought marks the answer where it writes it
LINE_CHARS = 12  # a line's characters before the mark: "04:a19b21<19"
# The training tool's size knobs (train.py --min-steps ... --max-vars): items; this task has no variables.
DEFAULT_MIN_SIZE, DEFAULT_MAX_SIZE = DEFAULT_MIN_ITEMS, DEFAULT_MAX_ITEMS
DEFAULT_MIN_VARS = DEFAULT_MAX_VARS = 0


@dataclass
class TaskOptions:
    min_items: int = DEFAULT_MIN_ITEMS
    max_items: int = DEFAULT_MAX_ITEMS
    min_k_share: float = 0.0  # k > floor(items * min_k_share); the held-out sets of the app and bench use 0.5


@dataclass
class Problem:
    seed: int
    question: str
    thinking: str
    answer: str
    items: int
    k: int


def options(min_size: int, max_size: int, min_vars: int = 0, max_vars: int = 0) -> TaskOptions:
    """The training tool's size knobs: the size is the number of items; this task has no variables."""
    return TaskOptions(min_size, max_size)


def generate_problem(seed: int, opts: TaskOptions = TaskOptions()) -> Problem:
    if not (2 <= opts.min_items <= opts.max_items <= MAX_ITEMS_LIMIT):
        raise ValueError("need 2 <= min_items <= max_items <= 99")
    if not 0 <= opts.min_k_share < 1:
        raise ValueError("need 0 <= min_k_share < 1")
    rng = Mulberry32(seed)
    n = opts.min_items + rng.int(opts.max_items - opts.min_items + 1)
    n_a = max(1, min(n - 1, n // 4 + rng.int(n // 2 + 1)))
    pool = list(range(VALUES))
    for i in range(n):  # partial Fisher-Yates: the first n entries are a uniform sample without replacement
        j = i + rng.int(VALUES - i)
        pool[i], pool[j] = pool[j], pool[i]
    a = sorted(pool[:n_a])
    b = sorted(pool[n_a:n])
    lowest_k = int(n * opts.min_k_share) + 1  # floor: n and the share are non-negative
    k = lowest_k + rng.int(n - lowest_k + 1)

    lines: list[str] = []
    merged: list[int] = []
    i = j = 0
    for index in range(1, n + 1):
        head_a = a[i] if i < len(a) else None
        head_b = b[j] if j < len(b) else None
        take_a = head_b is None or (head_a is not None and head_a < head_b)
        text_a = "--" if head_a is None else f"{head_a:02d}"
        text_b = "--" if head_b is None else f"{head_b:02d}"
        value = head_a if take_a else head_b
        separator, marker = (K_SEPARATOR, MARKER) if index == k else (":", "")
        lines.append(f"{index:02d}{separator}a{text_a}b{text_b}{'<' if take_a else '>'}{value:02d}{marker}")
        merged.append(value)
        if take_a:
            i += 1
        else:
            j += 1

    question = "a=" + ",".join(f"{v:02d}" for v in a) + "\n"
    question += "b=" + ",".join(f"{v:02d}" for v in b) + "\n"
    question += f"k={k:02d}?"
    return Problem(seed=seed, question=question, thinking="\n".join(lines), answer=f"{merged[k - 1]:02d}", items=n, k=k)


def answer_slots(problem: Problem) -> list[int]:
    """Offsets in the thought of the characters that decide the answer, on every line: the one after the index (``?``
    on line k, ``:`` elsewhere) and the one after the number (``*`` on line k, the newline or the thought's end
    elsewhere); the training tool weighs them as it weighs the answer."""
    slots, start = [], 0
    for line in problem.thinking.split("\n"):
        slots += [start + 2, start + LINE_CHARS]
        start += len(line) + 1
    return slots


def main():
    parser = argparse.ArgumentParser(description="Print merge-task problems (JSON lines).")
    parser.add_argument("--seed", type=int, default=EVAL_SEED_BASE, help="first problem seed")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--min-items", type=int, default=DEFAULT_MIN_ITEMS)
    parser.add_argument("--max-items", type=int, default=DEFAULT_MAX_ITEMS)
    parser.add_argument("--min-k-share", type=float, default=0.0,
                        help="ask a position past this share of the merge (held-out sets: 0.5)")
    parser.add_argument("--text", action="store_true", help="print the rendered chat text instead of JSON")
    parser.add_argument("--stats", type=int, default=0, help="print token-length statistics over this many problems")
    args = parser.parse_args()
    opts = TaskOptions(args.min_items, args.max_items, args.min_k_share)
    if args.stats:
        print_stats([generate_problem(args.seed + i, opts) for i in range(args.stats)])
        return
    print_problems(lambda seed: generate_problem(seed, opts), args.seed, args.count, args.text)


if __name__ == "__main__":
    main()
