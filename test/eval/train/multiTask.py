"""The many-task reasoner's problems: six families of synthetic reasoning, each asked in several phrasings.

Every family thinks one fixed-width line per step inside ``<think>...</think>`` and then answers; what differs is what
the thought has to read far back:

- ``program``: the demo task (task.py), a straight-line program of additions mod 10: lookups in the question and in
  the thought's own earlier lines, anywhere.
- ``merge``: two sorted lists merged (mergeTask.py), the k-th number asked: two pointers walking the question, and
  the mark on line k copied into the answer.
- ``sum``: a list of distinct two-digit numbers added one by one, the last two digits of the total asked: a pointer
  walking the question and a running total on the line above.
- ``chase``: arrows between two-digit numbers, listed in shuffled order, followed from a start until a number points
  to itself: lookups of the question by content, hop after hop.
- ``reverse``: a list of distinct two-digit numbers written backwards, then copied into the answer: exact copies of
  the question in reverse order, and of the whole thought.
- ``tally``: numbered votes for named candidates, one candidate's total asked: the asked name copied from the
  question into the thought's first line, then a pointer walking the votes, each written beside the asked name (carried
  from the line above) and compared with it, and the asked candidate's running count on the line above.

Each family has several phrasings (a sentence before or after the data, data and words in either order, lists with
different separators), drawn per problem. A problem is a pure function of (seed, options) through mulberry32, so the
TypeScript port (``main/demo/multiTask.ts``) reproduces the same problems from the same seeds. Training uses seeds
below 2^31; held-out sets use seeds from 2^31 (``EVAL_SEED_BASE``) with ``held_out_options``: sizes in the upper
half of each family's range and, for merge, a position in the second half.
"""
from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass, field

import task as program_task
import mergeTask as merge_task
from task import EVAL_SEED_BASE, Mulberry32, conversation, order_statistics, print_problems, tokenize

NAME = "multi"
FAMILIES = ["program", "merge", "sum", "chase", "reverse", "tally"]
# Each family's size range at full scale: program steps, merged numbers, numbers added, arrows, numbers reversed,
# votes. A problem's size is drawn from [lo, lo + (hi - lo) * scale] for the options' scale range.
SIZES = {"program": (6, 50), "merge": (8, 50), "sum": (4, 44), "chase": (4, 48), "reverse": (4, 36), "tally": (6, 48)}
PROGRAM_VARS = (3, 10)
TALLY_NAMES = ["AL", "BO", "CY", "DI", "ED", "FI", "GU", "HO", "IV", "JO", "KI", "LU"]
TALLY_CANDIDATES = (2, 5)
TALLY_MARK_COLUMN = 8  # "07:BO/AL+03": the mark ("+" or ".") after the vote and the asked name
# The training tool's knobs (train.py --min-steps/--max-steps): a scale in percent of each family's range.
DEFAULT_MIN_SIZE, DEFAULT_MAX_SIZE = 50, 100
DEFAULT_MIN_VARS = DEFAULT_MAX_VARS = 0


@dataclass
class TaskOptions:
    min_scale: int = 0  # percent of each family's size range
    max_scale: int = 100
    families: list[str] = field(default_factory=lambda: list(FAMILIES))
    min_k_share: float = 0.0  # merge: ask a position past this share of the merge


@dataclass
class Problem:
    seed: int
    family: str
    question: str
    thinking: str
    answer: str
    size: int


def options(min_size: int, max_size: int, min_vars: int = 0, max_vars: int = 0) -> TaskOptions:
    """The training tool's size knobs: percent of each family's size range."""
    return TaskOptions(min_size, max_size)


def held_out_options(families: list[str] | None = None) -> TaskOptions:
    """The held-out sets of the app, the bench and the tests: the upper half of each family's sizes, merge's k late."""
    return TaskOptions(50, 100, list(families or FAMILIES), 0.5)


def family_size(family: str, rng: Mulberry32, opts: TaskOptions) -> int:
    lo, hi = SIZES[family]
    a = lo + (hi - lo) * opts.min_scale // 100
    b = lo + (hi - lo) * opts.max_scale // 100
    return a + rng.int(b - a + 1)


def distinct_numbers(rng: Mulberry32, n: int) -> list[int]:
    """n distinct numbers of 00..99 in random order (a partial Fisher-Yates shuffle)."""
    pool = list(range(100))
    for i in range(n):
        j = i + rng.int(100 - i)
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:n]


def pick(rng: Mulberry32, items):
    return items[rng.int(len(items))]


LIST_SEPARATORS = [", ", ",", " "]
# The separators each family's listed data is drawn with (merge's and program's lists keep their inner task's form).
SEPARATORS = {"sum": LIST_SEPARATORS, "chase": [", ", "\n", "; "], "reverse": LIST_SEPARATORS, "tally": [", ", "\n"]}
# Each family's phrasings, one drawn per problem (its index from the problem's stream, at the point its generator
# draws it). The slots: program {question} (the inner task's), {variables}, {program}; merge {question}, {a}, {b},
# {k}; sum {listed}, {plus} (the numbers joined by " + "); chase {start}, {pairs}; reverse {listed}; tally {listed},
# {asked}.
PHRASINGS = {
    "program": [
        "{question}",
        "Evaluate this program. Each step adds two values mod 10.\n{variables}\n{program}\nWhat is ZZ?",
        "Variables: {variables}\nSteps:\n{program}\nTell me the value of ZZ.",
        "What does ZZ come to? Additions are mod 10.\n{variables}\n{program}",
        "{program}\nwith {variables}\nWhat is ZZ?",
    ],
    "merge": [
        "{question}",
        "Merge these two sorted lists and give me the number at position k.\n{a}\n{b}\n{k}",
        "{a}\n{b}\nIf you merge a and b in order, which number is at {k}",
        "Which number is at {k} Merge the sorted lists\n{a}\nand\n{b}",
    ],
    "sum": [
        "Add up these numbers: {listed}. What are the last two digits of the total?",
        "What is {plus} mod 100?",
        "Numbers: {listed}\nGive me the last two digits of their sum.",
        "Sum the following list and tell me the total mod 100.\n{listed}",
    ],
    "chase": [
        "Start at {start} and follow the arrows until a number points to itself. Where do you stop?\n{pairs}",
        "{pairs}\nFrom {start}, follow the arrows. Which number points to itself at the end?",
        "Arrows: {pairs}\nBegin at {start}. Where does the path end?",
    ],
    "reverse": [
        "Reverse this list: {listed}",
        "Write these numbers in reverse order: {listed}",
        "{listed}\nWhat is this list backwards?",
        "Please reverse the order of the following numbers.\n{listed}",
    ],
    "tally": [
        "Votes in order: {listed}\nHow many votes did {asked} get?",
        "Count the votes for {asked}.\n{listed}",
        "{listed}\nHow many times was {asked} chosen?",
    ],
}


def join_numbers(values: list[int], separator: str) -> str:
    return separator.join(f"{v:02d}" for v in values)


def program_problem(rng: Mulberry32, opts: TaskOptions) -> tuple[str, str, str, int]:
    steps = family_size("program", rng, opts)
    n_vars = PROGRAM_VARS[0] + rng.int(PROGRAM_VARS[1] - PROGRAM_VARS[0] + 1)
    inner = program_task.generate_problem(rng.int(0x80000000), program_task.TaskOptions(steps, steps, n_vars, n_vars))
    variables, *rest = inner.question.split("\n")
    program = "\n".join(rest[:-1])
    question = pick(rng, PHRASINGS["program"]).format(question=inner.question, variables=variables, program=program)
    return question, inner.thinking, inner.answer, steps


def merge_problem(rng: Mulberry32, opts: TaskOptions) -> tuple[str, str, str, int]:
    items = family_size("merge", rng, opts)
    inner = merge_task.generate_problem(rng.int(0x80000000), merge_task.TaskOptions(items, items, opts.min_k_share))
    a, b, k = inner.question.split("\n")
    question = pick(rng, PHRASINGS["merge"]).format(question=inner.question, a=a, b=b, k=k)
    return question, inner.thinking, inner.answer, items


def sum_problem(rng: Mulberry32, opts: TaskOptions) -> tuple[str, str, str, int]:
    n = family_size("sum", rng, opts)
    values = distinct_numbers(rng, n)
    lines, total = [], 0
    for i, v in enumerate(values):
        lines.append(f"{i + 1:02d}:{v:02d}+{total:02d}={total + v:03d}")
        total = (total + v) % 100
    phrasing = pick(rng, PHRASINGS["sum"])  # drawn before the separator, which it may not use
    separator = pick(rng, SEPARATORS["sum"])
    question = phrasing.format(listed=join_numbers(values, separator), plus=join_numbers(values, " + "))
    return question, "\n".join(lines), f"{total:02d}", n


def chase_problem(rng: Mulberry32, opts: TaskOptions) -> tuple[str, str, str, int]:
    m = family_size("chase", rng, opts)
    nodes = distinct_numbers(rng, m)
    path_length = max(2, m // 2 + rng.int(m - m // 2 + 1))  # nodes on the path from the start, its end included
    path = nodes[:path_length]
    target = {path[i]: path[i + 1] for i in range(path_length - 1)}
    target[path[-1]] = path[-1]  # the path ends where a number points to itself
    for v in nodes[path_length:]:  # the other numbers point anywhere but themselves: dead ends lie off the path
        w = nodes[rng.int(m)]
        target[v] = w if w != v else path[0]
    order = list(nodes)
    for i in range(m - 1, 0, -1):
        j = rng.int(i + 1)
        order[i], order[j] = order[j], order[i]
    separator = pick(rng, SEPARATORS["chase"])
    pairs = separator.join(f"{v:02d}>{target[v]:02d}" for v in order)
    lines = [f"{i + 1:02d}:{v:02d}>{target[v]:02d}" for i, v in enumerate(path)]
    question = pick(rng, PHRASINGS["chase"]).format(start=f"{path[0]:02d}", pairs=pairs)
    return question, "\n".join(lines), f"{path[-1]:02d}", path_length


def reverse_problem(rng: Mulberry32, opts: TaskOptions) -> tuple[str, str, str, int]:
    n = family_size("reverse", rng, opts)
    values = distinct_numbers(rng, n)
    backwards = values[::-1]
    lines = [f"{i + 1:02d}:{v:02d}" for i, v in enumerate(backwards)]
    listed = join_numbers(values, pick(rng, SEPARATORS["reverse"]))
    question = pick(rng, PHRASINGS["reverse"]).format(listed=listed)
    return question, "\n".join(lines), join_numbers(backwards, ","), n


def tally_problem(rng: Mulberry32, opts: TaskOptions) -> tuple[str, str, str, int]:
    n = family_size("tally", rng, opts)
    c = TALLY_CANDIDATES[0] + rng.int(TALLY_CANDIDATES[1] - TALLY_CANDIDATES[0] + 1)
    names = list(TALLY_NAMES)
    for i in range(c):
        j = i + rng.int(len(names) - i)
        names[i], names[j] = names[j], names[i]
    candidates = names[:c]
    votes = [candidates[rng.int(c)] for _ in range(n)]
    asked = votes[rng.int(n)]  # a candidate with at least one vote
    # line 00 names the asked candidate; then each line: the vote, the asked name again (copied from the line above, so
    # the two sit side by side), "+" when they are the same and "." when not, and the asked candidate's count
    count, lines = 0, [f"00:{asked}"]
    for i, name in enumerate(votes):
        count += name == asked
        lines.append(f"{i + 1:02d}:{name}/{asked}{'+' if name == asked else '.'}{count:02d}")
    listed = pick(rng, SEPARATORS["tally"]).join(f"{i + 1:02d} {name}" for i, name in enumerate(votes))
    question = pick(rng, PHRASINGS["tally"]).format(listed=listed, asked=asked)
    return question, "\n".join(lines), f"{count:02d}", n


GENERATORS = {"program": program_problem, "merge": merge_problem, "sum": sum_problem, "chase": chase_problem,
              "reverse": reverse_problem, "tally": tally_problem}


def generate_problem(seed: int, opts: TaskOptions = TaskOptions()) -> Problem:
    if not (0 <= opts.min_scale <= opts.max_scale <= 100):
        raise ValueError("need 0 <= min_scale <= max_scale <= 100")
    if not opts.families or any(f not in GENERATORS for f in opts.families):
        raise ValueError(f"families must be a non-empty subset of {FAMILIES}")
    rng = Mulberry32(seed)
    family = opts.families[rng.int(len(opts.families))]
    question, thinking, answer, size = GENERATORS[family](rng, opts)
    return Problem(seed=seed, family=family, question=question, thinking=thinking, answer=answer, size=size)


def length_estimate(opts: TaskOptions) -> int:
    """Tokens of the longest conversation these options can draw (the training tool sizes its batches by it)."""
    longest = 0
    for family in opts.families:
        o = TaskOptions(opts.max_scale, opts.max_scale, [family], opts.min_k_share)
        for seed in range(4):
            longest = max(longest, len(tokenize(conversation(generate_problem(seed, o)))))
    return longest


# Families whose thought walks the question's list once, a line per item: where it ends is decided by the list's end
ONE_LINE_PER_ITEM = ("sum", "reverse")


def answer_slots(problem: Problem) -> list[int]:
    """Offsets in the thought of the characters that decide the answer: merge's marks, tally's "+" or "." on every
    vote's line (after "07:BO/AL"); for a thought of one line per listed item, where each line after the first starts
    and the offset of `</think>` (the choice between one more item and the end: render_completion puts `</think>`
    after one newline); none elsewhere."""
    if problem.family == "merge":
        return merge_task.answer_slots(problem)
    starts = [0, *itertools.accumulate(len(line) + 1 for line in problem.thinking.split("\n"))]
    if problem.family == "tally":
        return [start + TALLY_MARK_COLUMN for start in starts[1:-1]]
    if problem.family in ONE_LINE_PER_ITEM:
        return starts[1:]  # the last: len(thinking) + 1, the first character of `</think>`
    return []


def main():
    parser = argparse.ArgumentParser(description="Print many-task problems (JSON lines).")
    parser.add_argument("--seed", type=int, default=EVAL_SEED_BASE, help="first problem seed")
    parser.add_argument("--count", type=int, default=6)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--held-out", action="store_true", help="the held-out sets' options (long problems)")
    parser.add_argument("--text", action="store_true", help="print the rendered chat text instead of JSON")
    parser.add_argument("--stats", type=int, default=0, help="print token-length statistics per family over this many problems")
    args = parser.parse_args()
    families = args.families.split(",")
    opts = held_out_options(families) if args.held_out else TaskOptions(families=families)
    if args.stats:
        by_family: dict[str, list[int]] = {}
        shares: dict[str, list[float]] = {}
        for i in range(args.stats):
            p = generate_problem(args.seed + i, opts)
            length = len(tokenize(conversation(p)))
            by_family.setdefault(p.family, []).append(length)
            # the question's share of the conversation: a cache smaller than it loses part of the question while reading it
            shares.setdefault(p.family, []).append(len(tokenize(p.question)) / length)
        for family, lengths in sorted(by_family.items()):
            share = sorted(shares[family])
            print(json.dumps({"family": family, "problems": len(lengths),
                              **order_statistics(lengths, "min", "median", "max"),
                              "question_share": {"min": round(share[0], 3), "median": round(share[len(share) // 2], 3),
                                                 "max": round(share[-1], 3)}}))
        return
    print_problems(lambda seed: generate_problem(seed, opts), args.seed, args.count, args.text)


if __name__ == "__main__":
    main()
