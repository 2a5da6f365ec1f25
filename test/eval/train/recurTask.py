"""The recurrence task: a short question, a long thought that reads its own lines far back.

A problem (the user message) gives the first two values of a sequence and asks for a later one:

    AA=3,AB=7
    f(n)=f(n-1)+f(n/2)
    DX?

Values are one digit; line ``n`` (named by its index in two letters, ``AA`` = 0, ``AB`` = 1, ...) is the last digit of
the previous value plus the value at half its index (rounded down). The thinking writes one line per value from
``AC`` on: the line's name, the previous line's name with its value, the half's name with its value, and the
two-digit sum, whose last digit is the line's value, and after ``/`` a countdown of names, from the asked name on
the first line to ``AC`` on the asked line, the last:

    AC=AB:7+AB:7=14/DX
    AD=AC:4+AB:7=11/DW
    AE=AD:1+AC:4=05/DV
    ...
    DX=DW:2+BX:9=11/AC

and the answer after ``</think>`` is that line's value (``1``). Where the questions of the other tasks hold every
step (a program, two lists), this one holds two values and a name: over 90% of what the model reads is its own
thought. The previous value is at the end of the line above; the half's value is next to its name where the thought
wrote it as a previous value (line ``n/2 + 1``, about ``n/2`` lines back) or in the question, so a value written on
line ``k`` is read again up to ``k`` lines later: a cache that keeps the recent lines loses the far half, and one
that keeps the right tokens holds about one value a line of the far half.

The countdown makes the end a fixed-offset read (the first line copies the asked name, each line after writes the name
before the one above): with a mark on the asked line instead (``DX?`` for ``DX=``), which needs the name
just written matched with the question's, the model had learned the rest and still wrote ``=`` there after 3,000
steps that weighed the mark 3 and then 20 times. Every line is 15 tokens with the tokenizer of task.py (names are one
token). The generator is a pure function of (seed, options), using mulberry32, so that its TypeScript port (test/eval/recurTask.ts) reproduces the same problems
from the same seeds. Training uses seeds below 2^31; held-out evaluation uses seeds >= 2^31 (``EVAL_SEED_BASE + i``)
and the long end of the sizes (--min-steps).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from task import (EVAL_SEED_BASE, Mulberry32, conversation, print_problems, print_stats, print_token_prompts, step_name,
                  tokenize)

NAME = "recur"
DEFAULT_MIN_LINES = 60
DEFAULT_MAX_LINES = 120
MAX_LINES_LIMIT = 26 * 26
ASKED = "?"  # after the asked name in the question
COUNT = "/"  # before a countdown of names: the asked name on the first line, one name less a line, "AC" on the asked line
# The training tool's size knobs (train.py --min-steps ... --max-vars): the index of the asked line; no variables.
DEFAULT_MIN_SIZE, DEFAULT_MAX_SIZE = DEFAULT_MIN_LINES, DEFAULT_MAX_LINES
DEFAULT_MIN_VARS = DEFAULT_MAX_VARS = 0


@dataclass
class TaskOptions:
    min_lines: int = DEFAULT_MIN_LINES
    max_lines: int = DEFAULT_MAX_LINES


@dataclass
class Problem:
    seed: int
    question: str
    thinking: str
    answer: str
    lines: int


def options(min_size: int, max_size: int, min_vars: int = 0, max_vars: int = 0) -> TaskOptions:
    """The training tool's size knobs: the size is the number of thought lines; this task has no variables."""
    return TaskOptions(min_size, max_size)


def generate_problem(seed: int, opts: TaskOptions = TaskOptions()) -> Problem:
    if not (1 <= opts.min_lines <= opts.max_lines <= MAX_LINES_LIMIT - 2):
        raise ValueError("need 1 <= min_lines <= max_lines <= 674")
    rng = Mulberry32(seed)
    n = opts.min_lines + rng.int(opts.max_lines - opts.min_lines + 1)
    values = [rng.int(10), rng.int(10)]
    last = n + 1  # the asked line's index: lines 2 .. n + 1
    lines: list[str] = []
    for i in range(2, last + 1):
        a, b = values[i - 1], values[i // 2]
        values.append((a + b) % 10)
        lines.append(f"{step_name(i)}={step_name(i - 1)}:{a}+{step_name(i // 2)}:{b}={a + b:02d}{COUNT}{step_name(last + 2 - i)}")
    question = f"{step_name(0)}={values[0]},{step_name(1)}={values[1]}\nf(n)=f(n-1)+f(n/2)\n{step_name(last)}{ASKED}"
    return Problem(seed=seed, question=question, thinking="\n".join(lines), answer=str(values[last]), lines=n)


def answer_slots(problem: Problem) -> list[int]:
    """Offsets in the thought of the characters that decide the answer, on every line: the half's value (the far read)
    and the countdown (where the thought ends); the training tool weighs them as it weighs the answer (--answer-loss)."""
    slots, start = [], 0
    for line in problem.thinking.split("\n"):
        slots += [start + 11, start + 16]
        start += len(line) + 1
    return slots


def main():
    parser = argparse.ArgumentParser(description="Print recurrence-task problems (JSON lines).")
    parser.add_argument("--seed", type=int, default=EVAL_SEED_BASE, help="first problem seed")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--min-lines", type=int, default=DEFAULT_MIN_LINES)
    parser.add_argument("--max-lines", type=int, default=DEFAULT_MAX_LINES)
    parser.add_argument("--text", action="store_true", help="print the rendered chat text instead of JSON")
    parser.add_argument("--stats", type=int, default=0, help="print token-length statistics over this many problems")
    parser.add_argument("--prompts", action="store_true",
                        help="print the questions alone, as a calibration prompts file (JSON Lines of {\"prompt\": ...})")
    parser.add_argument("--token-prompts", action="store_true",
                        help="print prompts for scripts/retention/train.py --prompts (tokens, and the completion to check)")
    args = parser.parse_args()
    opts = TaskOptions(args.min_lines, args.max_lines)
    if args.token_prompts:
        print_token_prompts(lambda seed: generate_problem(seed, opts), args.seed, args.count)
        return
    if args.prompts:
        for i in range(args.count):
            print(json.dumps({"prompt": generate_problem(args.seed + i, opts).question}))
        return
    if args.stats:
        problems = [generate_problem(args.seed + i, opts) for i in range(args.stats)]
        question = [len(tokenize(p.question)) / len(tokenize(conversation(p))) for p in problems]
        print_stats(problems, question_share=[round(min(question), 3), round(max(question), 3)])
        return
    print_problems(lambda seed: generate_problem(seed, opts), args.seed, args.count, args.text)


if __name__ == "__main__":
    main()
