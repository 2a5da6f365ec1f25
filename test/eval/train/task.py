"""The demo reasoning task: evaluate a straight-line program whose steps refer far back.

A problem (the user message) gives variables with one-digit values and a program of additions modulo 10. Each step
adds two operands; an operand is a variable of the question or the result of ANY earlier step (chosen uniformly, so
usually far back). Step names count up and the last step is always ``ZZ``; the question asks for ``ZZ``:

    k=7,a=3,q=5,m=0,u=9,e=2
    YZ=k+a
    ZA=YZ+q
    ...
    ZZ=YZ+a
    ZZ?

The thinking executes the program one line per step in a fixed format: the step's name, each operand with its value
(looked up: a variable's in the question, a step's at the end of that step's line or next to an earlier use of it),
and the two-digit sum, whose last digit is the step's value:

    YZ=k:7+a:3=10
    ZA=YZ:0+q:5=05
    ...
    ZZ=YZ:0+a:3=03

and the answer after ``</think>`` is the value of ZZ (``3``). The last step always reads a step from the first
quarter of the program, so the answer combines early and late values. Getting it right needs, at every step, tokens
that are hundreds or thousands of tokens back (the question's program and variables, and the line of the referenced
step); a cache that keeps only attention sinks and the most recent quarter of the tokens loses them.

Variables are single lowercase letters and steps two uppercase letters; with the tokenizer below every name is one
token and every thinking line 13 tokens. (Two-letter variable names drawn from 676 were each too rare in training
for the model to learn to tell them apart. The sum is written with both digits because its tens digit carries information about each operand alone; with
only "(a+b) mod 10", which is independent of each operand, training sat on a long plateau.)

The generator is a pure function of (seed, options), using mulberry32, so that test/eval/demoTask.ts reproduces the
same problems from the same seeds. Training uses seeds below 2^31; held-out evaluation uses seeds >= 2^31
(``EVAL_SEED_BASE + i``).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, asdict

EVAL_SEED_BASE = 0x80000000

NAME = "demo"
DEFAULT_MIN_STEPS = 10
DEFAULT_MAX_STEPS = 110
DEFAULT_MIN_VARS = 6
DEFAULT_MAX_VARS = 16
# The training tool's size knobs (train.py --min-steps ... --max-vars): program steps and variables.
DEFAULT_MIN_SIZE, DEFAULT_MAX_SIZE = DEFAULT_MIN_STEPS, DEFAULT_MAX_STEPS
# Probability that an operand is an earlier step's result (rather than a question variable).
P_STEP_OPERAND_1 = 0.7
P_STEP_OPERAND_2 = 0.3

LETTERS_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LETTERS_LOWER = "abcdefghijklmnopqrstuvwxyz"
LAST_STEP_INDEX = 26 * 26 - 1  # "ZZ"
MAX_STEPS_LIMIT = 26 * 26

# Tokenizer: byte-level BPE ("gpt2" in llama.cpp) whose only merges join two ASCII letters of the same case, so
# every two-letter name of the task ("ZA", "kd") is ONE token; digits and punctuation are single bytes.
# Ids: 0..255 the GPT-2 byte symbols in byte order (id == byte value), then the merged pairs in merge order
# (uppercase pairs "AA".."ZZ", then lowercase "aa".."zz"), then the special tokens (same order as
# test/fixtures/gguf/tokenizer.ts SPECIAL_TOKENS).
MERGE_PAIRS = [a + b for a in LETTERS_UPPER for b in LETTERS_UPPER] + [a + b for a in LETTERS_LOWER for b in LETTERS_LOWER]
MERGE_RANK = {pair: i for i, pair in enumerate(MERGE_PAIRS)}
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
SPECIAL_BASE = 256 + len(MERGE_PAIRS)
SPECIAL_IDS = {text: SPECIAL_BASE + i for i, text in enumerate(SPECIAL_TOKENS)}
VOCAB_SIZE = SPECIAL_BASE + len(SPECIAL_TOKENS)
TOKEN_TEXT = [bytes([b]) for b in range(256)] + [p.encode() for p in MERGE_PAIRS] + [t.encode() for t in SPECIAL_TOKENS]


class Mulberry32:
    """mulberry32, bit-exact with the JavaScript version (Math.imul / >>> on uint32)."""

    def __init__(self, seed: int):
        self.state = seed & 0xFFFFFFFF

    def uniform(self) -> float:
        self.state = (self.state + 0x6D2B79F5) & 0xFFFFFFFF
        t = self.state
        t = ((t ^ (t >> 15)) * (t | 1)) & 0xFFFFFFFF
        t = (t ^ ((t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    def int(self, n: int) -> int:
        """Uniform integer in [0, n)."""
        return int(self.uniform() * n)


@dataclass
class TaskOptions:
    min_steps: int = DEFAULT_MIN_STEPS
    max_steps: int = DEFAULT_MAX_STEPS
    min_vars: int = DEFAULT_MIN_VARS
    max_vars: int = DEFAULT_MAX_VARS


@dataclass
class Problem:
    seed: int
    question: str
    thinking: str
    answer: str
    steps: int
    vars: int


def options(min_size: int, max_size: int, min_vars: int, max_vars: int) -> TaskOptions:
    """The training tool's size knobs: the size is the number of program steps."""
    return TaskOptions(min_size, max_size, min_vars, max_vars)


def step_name(index: int) -> str:
    return LETTERS_UPPER[index // 26] + LETTERS_UPPER[index % 26]


def generate_problem(seed: int, opts: TaskOptions = TaskOptions()) -> Problem:
    if not (1 <= opts.min_steps <= opts.max_steps <= MAX_STEPS_LIMIT):
        raise ValueError("need 1 <= min_steps <= max_steps <= 676")
    if not (1 <= opts.min_vars <= opts.max_vars <= 26):
        raise ValueError("need 1 <= min_vars <= max_vars <= 26")
    rng = Mulberry32(seed)
    n_steps = opts.min_steps + rng.int(opts.max_steps - opts.min_steps + 1)
    n_vars = opts.min_vars + rng.int(opts.max_vars - opts.min_vars + 1)

    var_names: list[str] = []
    while len(var_names) < n_vars:
        name = LETTERS_LOWER[rng.int(26)]
        if name not in var_names:
            var_names.append(name)
    values = {name: rng.int(10) for name in var_names}

    first = LAST_STEP_INDEX - (n_steps - 1)
    names = [step_name(first + k) for k in range(n_steps)]
    program: list[tuple[str, str, str]] = []
    lines: list[str] = []
    for k, name in enumerate(names):
        if k == n_steps - 1 and k > 0:
            # The answer step reads an early result (first quarter of the program) and a variable.
            op1 = names[rng.int(max(1, (n_steps + 3) // 4))]
            op2 = var_names[rng.int(n_vars)]
        else:
            op1 = names[rng.int(k)] if k > 0 and rng.uniform() < P_STEP_OPERAND_1 else var_names[rng.int(n_vars)]
            op2 = names[rng.int(k)] if k > 0 and rng.uniform() < P_STEP_OPERAND_2 else var_names[rng.int(n_vars)]
        v1, v2 = values[op1], values[op2]
        values[name] = (v1 + v2) % 10
        program.append((name, op1, op2))
        lines.append(f"{name}={op1}:{v1}+{op2}:{v2}={v1 + v2:02d}")

    question = ",".join(f"{v}={values[v]}" for v in var_names) + "\n"
    question += "\n".join(f"{n}={a}+{b}" for n, a, b in program) + "\n"
    question += f"{names[-1]}?"
    return Problem(seed=seed, question=question, thinking="\n".join(lines), answer=str(values[names[-1]]),
                   steps=n_steps, vars=n_vars)


# ---------------------------------------------------------------------------------------------------------------
# Chat rendering: exactly what tokenizer.chat_template (test/fixtures/gguf/chatTemplate.ts) renders for
# [system?, user, assistant-with-reasoning]; the generation prompt ends with "<|im_start|>assistant\n<think>\n".

def render_prompt(question: str, system: str | None = None) -> str:
    text = ""
    if system:
        text += f"<|im_start|>system\n{system}<|im_end|>\n"
    return text + f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n<think>\n"


def render_completion(thinking: str, answer: str) -> str:
    """The assistant's generated part: thinking, the template's thought suffix, the answer, and the EOS token."""
    return thinking.strip("\n") + "\n</think>\n\n" + answer + "<|im_end|>"


def conversation(problem) -> str:
    """A problem of any task as the chat text a model is trained on: the prompt, the thought and the answer."""
    return render_prompt(problem.question) + render_completion(problem.thinking, problem.answer)


def order_statistics(values: list[int], *names: str) -> dict[str, int]:
    """The named order statistics of values (``min``, ``median``, ``p90``, ``max``), in the order named."""
    ordered = sorted(values)
    share = {"min": 0.0, "median": 0.5, "p90": 0.9, "max": 1.0}
    return {name: ordered[min(len(ordered) - 1, int(share[name] * len(ordered)))] for name in names}


def print_stats(problems: list, **extra) -> None:
    """The task tools' --stats printout, one JSON line: the problems' thinking and conversation lengths in tokens,
    and any task-specific statistics given as keywords."""
    think = [len(tokenize(p.thinking)) for p in problems]
    total = [len(tokenize(conversation(p))) for p in problems]
    print(json.dumps({"problems": len(problems),
                      "thinking_tokens": order_statistics(think, "min", "median", "p90", "max"),
                      "total_tokens": order_statistics(total, "median", "max"), **extra}))


def print_token_prompts(generate, first_seed: int, count: int) -> None:
    """Prompts for scripts/retention/train.py --prompts, one JSON line each: the rendered prompt's tokens and, as the
    "proposal" its tracing checks first, the generator's completion's."""
    for i in range(count):
        p = generate(first_seed + i)
        print(json.dumps({"tokens": tokenize(render_prompt(p.question)),
                          "proposal": tokenize(render_completion(p.thinking, p.answer))}))


def print_problems(generate, first_seed: int, count: int, text: bool) -> None:
    """The task tools' printout: generate(seed) for count seeds from first_seed, one JSON line each, or with text
    each conversation's chat text followed by an empty line."""
    for i in range(count):
        p = generate(first_seed + i)
        if text:
            print(conversation(p))
            print()
        else:
            print(json.dumps(asdict(p)))


def _bpe_letter_run(run: str) -> list[int]:
    """BPE of a run of ASCII letters: repeatedly merge the adjacent same-case letter pair of lowest rank (leftmost
    first); merged pairs never merge again (no such merges exist)."""
    symbols: list[str] = list(run)
    while True:
        best, best_rank = -1, None
        for i in range(len(symbols) - 1):
            rank = MERGE_RANK.get(symbols[i] + symbols[i + 1]) if len(symbols[i]) == 1 and len(symbols[i + 1]) == 1 else None
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = i, rank
        if best < 0:
            break
        symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
    return [256 + MERGE_RANK[s] if len(s) == 2 else ord(s) for s in symbols]


def _is_ascii_letter(ch: str) -> bool:
    return ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _tokenize_plain(text: str) -> list[int]:
    ids: list[int] = []
    i = 0
    while i < len(text):
        if _is_ascii_letter(text[i]):
            j = i
            while j < len(text) and _is_ascii_letter(text[j]):
                j += 1
            ids.extend(_bpe_letter_run(text[i:j]))
            i = j
        else:
            ids.extend(text[i].encode("utf-8"))
            i += 1
    return ids


def tokenize(text: str) -> list[int]:
    """llama.cpp's tokenization of `text` (special tokens parsed) with this vocabulary. Exact for texts without
    apostrophe contractions ("it's"), which llama.cpp's pre-tokenizer splits off; verify.py checks it against
    llama.cpp."""
    ids: list[int] = []
    start = 0
    i = 0
    while i < len(text):
        special = next((t for t in SPECIAL_TOKENS if text.startswith(t, i)), None) if text[i] == "<" else None
        if special is None:
            i += 1
            continue
        ids.extend(_tokenize_plain(text[start:i]))
        ids.append(SPECIAL_IDS[special])
        i += len(special)
        start = i
    ids.extend(_tokenize_plain(text[start:]))
    return ids


def detokenize(ids: list[int]) -> str:
    return b"".join(TOKEN_TEXT[t] for t in ids).decode("utf-8", errors="replace")


def extract_answer(completion: str) -> str:
    """The answer part of a completion (text after the last </think>, without the EOS), trimmed."""
    text = completion.split("</think>")[-1]
    return text.replace("<|im_end|>", "").strip()


def check_answer(problem: Problem, answer_text: str) -> bool:
    return answer_text.strip() == problem.answer


def main():
    parser = argparse.ArgumentParser(description="Print demo-task problems (JSON lines).")
    parser.add_argument("--seed", type=int, default=EVAL_SEED_BASE, help="first problem seed")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--min-steps", type=int, default=DEFAULT_MIN_STEPS)
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    parser.add_argument("--min-vars", type=int, default=DEFAULT_MIN_VARS)
    parser.add_argument("--max-vars", type=int, default=DEFAULT_MAX_VARS)
    parser.add_argument("--text", action="store_true", help="print the rendered chat text instead of JSON")
    parser.add_argument("--stats", type=int, default=0, help="print token-length statistics over this many problems")
    args = parser.parse_args()
    opts = TaskOptions(args.min_steps, args.max_steps, args.min_vars, args.max_vars)
    if args.stats:
        problems = [generate_problem(args.seed + i, opts) for i in range(args.stats)]
        print_stats(problems, over_1000=sum(len(tokenize(p.thinking)) > 1000 for p in problems) / len(problems))
        return
    print_problems(lambda seed: generate_problem(seed, opts), args.seed, args.count, args.text)


if __name__ == "__main__":
    main()
