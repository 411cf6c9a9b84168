"""The arithmetic task: operations, token format, the fixed held-out split and answer parsing.

Everything about how a problem is written as tokens lives here; rewards and the trainer only
compare token tensors that this module produced.

Token format for `MathEnvironment('adder', 3)` (reverse_answer=True, the default):

    123 + 45 = 168
    prompt  "123+045="    both operands zero-padded to ndigit digits
    answer  "8610$"       168 zero-padded to ndigit+1 = 4 digits ("0168"), written least-significant
                          digit first ("8610"), then the end token "$"
    whole sequence "123+045=8610$" (13 tokens); a finished row is padded with "."

Multiplication of ndigit=2 writes the product in 2*ndigit digits: 12*34=408 -> "12*34=8040$".
Subtraction poses only a >= b, so 045-123 never appears: 123-45=78 -> "123-045=870$".

Why reversed (as in minGPT's adder): the model writes the answer left to right, and a carry flows
from the low digits to the high ones, so writing low digits first lets every digit depend on
digits already written. `reverse_answer=False` writes the answer normally ("0168$").

An answer is correct only if it is exactly the target: the right digits, then the end token.

Held-out split: a fixed hash of the unordered operand pair {a, b} marks a `test_fraction` share of
all problems as test. Training never samples them (nor their mirror b, a); the evaluation set is
drawn from them with a fixed seed, so it is the same in every run, for every seed and on every rank.

A new operation is one function:

    @operation("modulo", symbol="%", answer_digits=lambda n: n)
    def modulo(a, b):
        return a % b if b else 0
"""

import operator as _operator
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

DIGITS = "0123456789"
EQUALS, END, PAD = "=", "$", "."
EVAL_SEED = 20240601  # the evaluation set's own seed: never the run seed, so it never moves


@dataclass(frozen=True)
class Operation:
    name: str
    symbol: str
    fn: Callable[[int, int], int]
    answer_digits: Callable[[int], int]  # answer width for ndigit-digit operands
    ordered: bool  # pose only a >= b (subtraction: keeps results non-negative)


OPERATIONS: dict = {}


def operation(name: str, symbol: str, answer_digits: Callable[[int], int], ordered: bool = False):
    """Register fn(a, b) -> int as the task `name`, written with the one-character `symbol`."""
    if len(symbol) != 1 or symbol in DIGITS + EQUALS + END + PAD:
        raise ValueError(f"operation symbol must be one character other than digits and '{EQUALS}{END}{PAD}', got {symbol!r}")

    def register(fn):
        OPERATIONS[name] = Operation(name, symbol, fn, answer_digits, ordered)
        return fn
    return register


operation("adder", "+", answer_digits=lambda n: n + 1)(_operator.add)
operation("subtractor", "-", answer_digits=lambda n: n, ordered=True)(_operator.sub)
operation("multiplier", "*", answer_digits=lambda n: 2 * n)(_operator.mul)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A fixed 64-bit integer hash (splitmix64's finalizer): the same on every machine and Python."""
    x = x.astype(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def is_test_pair(a, b, test_fraction: float) -> np.ndarray:
    """True where the unordered pair {a, b} belongs to the held-out split. a, b: int arrays (B,)."""
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    key = (np.minimum(a, b) << np.uint64(32)) | np.maximum(a, b)
    u = (_splitmix64(key ^ np.uint64(0x5DEECE66D)) >> np.uint64(11)).astype(np.float64) / 2.0**53
    return u < test_fraction


@dataclass(frozen=True)
class MathProblem:
    a: int
    b: int
    symbol: str
    result: int
    prompt: str  # what the policy is shown, e.g. "123+045="
    target: str  # what it must write, e.g. "8610$"

    def __str__(self):
        return f"{self.a}{self.symbol}{self.b}={self.result}  (prompt {self.prompt!r}, target {self.target!r})"


class MathEnvironment:
    """n-digit problems of one operation: sampling, encoding, decoding and the held-out split."""

    def __init__(self, task: str = "adder", ndigit: int = 3, reverse_answer: bool = True,
                 use_format: bool = True, test_fraction: float = 0.1, seed: int = 0):
        if task not in OPERATIONS:
            raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(sorted(OPERATIONS))}")
        if not 1 <= ndigit <= 9:
            raise ValueError(f"ndigit must be between 1 and 9, got {ndigit}")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction}")
        self.task, self.op, self.ndigit = task, OPERATIONS[task], ndigit
        self.reverse_answer, self.use_format, self.test_fraction = reverse_answer, use_format, test_fraction
        self.answer_digits = self.op.answer_digits(ndigit)
        self.itos = list(DIGITS) + [self.op.symbol, EQUALS, END, PAD]
        self.stoi = {ch: i for i, ch in enumerate(self.itos)}
        self.end_token, self.pad_token = self.stoi[END], self.stoi[PAD]
        self.vocab_size = len(self.itos)
        self.prompt_len = 2 * ndigit + (2 if use_format else 0)
        self.answer_len = self.answer_digits + 1  # digits, then the end token
        self.seq_len = self.prompt_len + self.answer_len
        self._rng = np.random.default_rng(seed)  # only for generate_problem() without an rng

    # ---- sampling -------------------------------------------------------------------------
    def sample_operands(self, n: int, rng: np.random.Generator, split: str = "train"):
        """n operand pairs (a, b), each an int64 array (n,), drawn uniformly from one split."""
        want_test = {"train": False, "test": True}[split]
        a_out, b_out, have = [], [], 0
        while have < n:
            k = 2 * (n - have) + 16  # oversample: rejection keeps (1 - test_fraction) of draws
            a = rng.integers(0, 10 ** self.ndigit, size=k)
            b = rng.integers(0, 10 ** self.ndigit, size=k)
            if self.op.ordered:
                a, b = np.maximum(a, b), np.minimum(a, b)
            keep = is_test_pair(a, b, self.test_fraction) == want_test
            a_out.append(a[keep]), b_out.append(b[keep])
            have += int(keep.sum())
        return np.concatenate(a_out)[:n], np.concatenate(b_out)[:n]

    def eval_operands(self, num: int):
        """The fixed evaluation set: up to `num` held-out pairs, identical in every run."""
        rng = np.random.default_rng(EVAL_SEED)
        space = 10 ** self.ndigit
        if space * space <= 4_000_000:  # small enough to enumerate: take all test pairs, then subsample
            a, b = np.divmod(np.arange(space * space, dtype=np.int64), space)
            if self.op.ordered:
                a, b = a[a >= b], b[a >= b]
            test = is_test_pair(a, b, self.test_fraction)
            a, b = a[test], b[test]
            if len(a) > num:
                pick = rng.permutation(len(a))[:num]
                a, b = a[pick], b[pick]
            return a, b
        a, b = self.sample_operands(2 * num, rng, split="test")
        _, first = np.unique(a * space + b, return_index=True)
        first = np.sort(first)[:num]
        return a[first], b[first]

    def generate_problem(self, rng: Optional[np.random.Generator] = None, split: str = "train") -> MathProblem:
        a, b = self.sample_operands(1, rng if rng is not None else self._rng, split)
        return self.problem(int(a[0]), int(b[0]))

    def problem(self, a: int, b: int) -> MathProblem:
        prompt, answer = self.encode(np.array([a]), np.array([b]))
        return MathProblem(a, b, self.op.symbol, self.op.fn(a, b), self.decode_text(prompt[0]), self.decode_text(answer[0]))

    # ---- encoding -------------------------------------------------------------------------
    def _digits(self, x: np.ndarray, width: int) -> np.ndarray:
        """x (B,) non-negative ints -> (B, width) digit ids, most significant first."""
        powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
        return (x[:, None] // powers) % 10

    def encode(self, a, b):
        """Operands (B,) -> prompt tokens (B, prompt_len) and answer tokens (B, answer_len), int64."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        results = np.array([self.op.fn(int(x), int(y)) for x, y in zip(a, b)], dtype=np.int64)
        if (results < 0).any() or (results >= 10 ** self.answer_digits).any():
            raise ValueError(f"{self.task}: a result does not fit {self.answer_digits} non-negative digits")
        B, n = len(a), self.ndigit
        parts = [self._digits(a, n)]
        if self.use_format:
            parts.append(np.full((B, 1), self.stoi[self.op.symbol]))
        parts.append(self._digits(b, n))
        if self.use_format:
            parts.append(np.full((B, 1), self.stoi[EQUALS]))
        answer = self._digits(results, self.answer_digits)
        if self.reverse_answer:
            answer = answer[:, ::-1]
        answer = np.concatenate([answer, np.full((B, 1), self.end_token)], axis=1)
        return torch.from_numpy(np.concatenate(parts, axis=1)), torch.from_numpy(np.ascontiguousarray(answer))

    def decode_text(self, tokens) -> str:
        return "".join(self.itos[int(t)] for t in tokens)

    def decode_answer(self, tokens) -> Optional[int]:
        """Generated answer tokens (answer_len,) -> the number they state, or None if malformed
        (a non-digit among the digits, or no end token right after them)."""
        tokens = [int(t) for t in tokens]
        digits, rest = tokens[: self.answer_digits], tokens[self.answer_digits:]
        if any(t > 9 for t in digits) or not rest or rest[0] != self.end_token:
            return None
        if self.reverse_answer:
            digits = digits[::-1]
        return int("".join(map(str, digits)))

    def describe_mistake(self, a: int, b: int, tokens) -> str:
        """One line in minGPT's style: 'claims 123+45=169, truth 168'."""
        value = self.decode_answer(tokens)
        truth = self.op.fn(a, b)
        claim = value if value is not None else f"malformed {self.decode_text(tokens)!r}"
        return f"claims {a}{self.op.symbol}{b}={claim}, truth {truth}"
