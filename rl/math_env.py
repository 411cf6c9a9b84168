"""The arithmetic task: operations, token format, the fixed train / validation / test split, answer parsing.

Everything about how a problem is written as tokens lives here; rewards and the trainer only
compare token tensors that this module produced, at positions it names.

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

Showing the work (`show_work=True`, for operations that define steps): the answer first writes
the steps, then "=" and the final answer. Multiplication writes the school method, each number
reversed like the answer: the partial products a * b_i * 10^i (b_i the i-th lowest digit of b),
each added to a running sum that is written out after every addition but the last (the last sum
is the answer itself):

    12 * 34 = 408      "12*34="  ->  "840+0630=8040$"
                       840 = 48 (12*4) in 3 digits, 0630 = 360 (12*3*10) in 4, then = and 408 in 4
    123 * 456 = 56088  "123*456="  ->  "8370+05160=88860+002940=880650$"
                       738 (123*6), 6150 (123*5*10), their sum 6888, 49200 (123*4*100), = 56088

Every sub-problem a held-out pair needs (a times one digit, a digit-local sum) also occurs in
training pairs, so what the policy learns transfers; the bare product makes each middle digit a
function of all four input digits, which small models memorise rather than learn. Every answer of
a task has the same length, so batched sampling needs no padding.

An answer is correct only if its final answer is exactly the target's: the "=" before it (when the
work is shown), its digits, then the end token. Whether the steps are right is scored separately.

The split: a fixed hash u in [0, 1) of the unordered operand pair {a, b} puts a pair in the test
split when u < test_fraction, in the validation split when u < test_fraction + validation_fraction,
and in the train split otherwise. Training never samples a validation or test pair (nor its mirror
b, a); choices (when the warm start stops, sweeps) look at validation; reported accuracies are on
test. The evaluation sets are drawn from their split with fixed seeds of their own, so they are the
same in every run, for every seed, on every rank, and the first n of a larger set for any size n.

A new operation is one function (see configs/ and docs/tasks.md "Adding an arithmetic task"):

    @operation("modulo", symbol="%", answer_digits=lambda n: n)
    def modulo(a, b):
        return a % b if b else 0

Its steps, if it has any, are a second function passed as `steps=`: (a, b, ndigit) -> a list of
(separator, value, width), written in order before the final "=" (see `long_multiplication`).
`vectorized=True` says both also take int64 arrays and work elementwise, as + - * // % do on numpy's arrays
(no max, no str, no `x += y` that would change an array in place): encode then calls them once a batch, not
once a problem (the built-in operations: 4,096 worked multiplications took 17 ms one by one on a 2-core CPU).

TaskSettings: the task's settings as a run sets them, each with its reason (MathEnvironment checks them).
"""

import operator as _operator
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

DIGITS = "0123456789"
EQUALS, END, PAD = "=", "$", "."
SPLITS = ("train", "validation", "test")
# Each evaluation set's own seed: never the run seed, so it never moves. The test seed is the one
# every earlier result was measured with.
EVAL_SEEDS = {"test": 20240601, "validation": 20240602,
              "train": 20240603}  # train: the fixed pool of worked examples a scarce warm start sees
ENUMERATE_LIMIT = 4_000_000  # operand spaces up to this many ordered pairs are enumerated exactly
_ENUMERATED = {}  # the last enumerated space's pairs and splits (MathEnvironment._enumerated)
EVAL_CHUNK = 4096  # larger spaces are drawn in chunks of this many pairs, so any prefix is stable


@dataclass(frozen=True)
class Operation:
    name: str
    symbol: str
    fn: Callable[[int, int], int]
    answer_digits: Callable[[int], int]  # answer width for ndigit-digit operands
    ordered: bool = False  # pose only a >= b (subtraction: keeps results non-negative)
    steps: Optional[Callable[[int, int, int], list]] = None  # (a, b, ndigit) -> [(separator, value, width)]
    vectorized: bool = False  # fn and steps take int64 arrays too, elementwise: encode calls them once a batch


OPERATIONS: dict = {}


def operation(name: str, symbol: str, answer_digits: Callable[[int], int], ordered: bool = False,
              steps: Optional[Callable[[int, int, int], list]] = None, vectorized: bool = False):
    """Register fn(a, b) -> int as the task `name`, written with the one-character `symbol`;
    `steps` writes its work for show_work=True (see `long_multiplication`); vectorized: fn and steps also take
    int64 arrays (module docstring)."""
    if len(symbol) != 1 or symbol in DIGITS + EQUALS + END + PAD:
        raise ValueError(f"operation symbol must be one character other than digits and '{EQUALS}{END}{PAD}', "
                         f"got {symbol!r}")

    def register(fn):
        OPERATIONS[name] = Operation(name, symbol, fn, answer_digits, ordered, steps, vectorized)
        return fn
    return register


def long_multiplication(a: int, b: int, ndigit: int) -> list:
    """The school method's steps for a * b: the partial product a * b_i * 10^i for each digit b_i of
    b (lowest first, n + 1 + i digits wide), each added to the running sum, which is written after
    every addition but the last. 12*34 -> [("", 48, 3), ("+", 360, 4)]; the answer then follows. a, b: ints, or
    int64 arrays (B,) (vectorized: every value then (B,))."""
    n = ndigit
    parts = [a * (b // 10 ** i % 10) * 10 ** i for i in range(n)]
    steps, total = [("", parts[0], n + 1)], parts[0]
    for i in range(1, n):
        total = total + parts[i]  # (not +=: on an array that would change parts[0], already a step, in place)
        steps.append(("+", parts[i], n + 1 + i))
        if i < n - 1:
            steps.append((EQUALS, total, n + 1 + i))
    return steps


# (ndigit <= 9: every result and step fits in int64, so an array's values are the ints' exactly)
operation("adder", "+", answer_digits=lambda n: n + 1, vectorized=True)(_operator.add)
operation("subtractor", "-", answer_digits=lambda n: n, ordered=True, vectorized=True)(_operator.sub)
operation("multiplier", "*", answer_digits=lambda n: 2 * n, steps=long_multiplication, vectorized=True)(_operator.mul)


def rows(values, shape: tuple) -> np.ndarray:
    """A vectorized operation's value as one int64 per pair: its array, or a constant (a step that does not depend
    on the operands) broadcast to every pair."""
    return np.broadcast_to(np.asarray(values, dtype=np.int64), shape)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A fixed 64-bit integer hash (splitmix64's finalizer): the same on every machine and Python."""
    x = x.astype(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def pair_hash(a, b) -> np.ndarray:
    """u in [0, 1) for each unordered pair {a, b}: a fixed function of the pair. a, b: int arrays (B,)."""
    a, b = np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64)
    key = (np.minimum(a, b) << np.uint64(32)) | np.maximum(a, b)
    return (_splitmix64(key ^ np.uint64(0x5DEECE66D)) >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


def split_of(a, b, test_fraction: float, validation_fraction: float) -> np.ndarray:
    """The split of each pair as an index into SPLITS (0 train, 1 validation, 2 test). (B,) -> (B,)."""
    u = pair_hash(a, b)
    return np.where(u < test_fraction, 2, np.where(u < test_fraction + validation_fraction, 1, 0))


def sample_split(env, n: int, rng: np.random.Generator, split: str):
    """n pairs from env._draw(k, rng) that env.split_of puts in `split`, by rejection, in draw order."""
    want = SPLITS.index(split)
    a_out, b_out, have = [], [], 0
    while have < n:
        k = 2 * (n - have) + 16  # oversample: rejection keeps about 85% of draws for train
        a, b = env._draw(k, rng)
        keep = env.split_of(a, b) == want
        a_out.append(a[keep]), b_out.append(b[keep])
        have += int(keep.sum())
    return np.concatenate(a_out)[:n], np.concatenate(b_out)[:n]


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
    """n-digit problems of one operation: sampling, encoding, decoding and the three splits.

    Positions in an answer (A = answer_len tokens): the steps (when shown) and their closing "=" come
    first, the final answer's digits start at `final_start`, the end token is last. `final_slice`
    covers what exact match compares (the closing "=", the final digits, the end token) and
    `steps_slice` the steps."""

    def __init__(self, task: str = "adder", ndigit: int = 3, *, reverse_answer: bool = True,
                 use_format: bool = True, test_fraction: float = 0.1, validation_fraction: float = 0.05,
                 show_work: bool = False, seed: int = 0):
        if task not in OPERATIONS:
            raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(sorted(OPERATIONS))}")
        if not 1 <= ndigit <= 9:
            raise ValueError(f"ndigit must be between 1 and 9, got {ndigit}")
        if not (0.0 < test_fraction and 0.0 < validation_fraction and test_fraction + validation_fraction < 1.0):
            raise ValueError(f"test_fraction and validation_fraction must be positive and leave a train split, "
                             f"got {test_fraction} and {validation_fraction}")
        self.task, self.op, self.ndigit = task, OPERATIONS[task], ndigit
        if show_work and self.op.steps is None:
            raise ValueError(f"task {task} defines no steps to show; use show_work=false "
                             f"(tasks with steps: {', '.join(n for n, o in OPERATIONS.items() if o.steps)})")
        self.reverse_answer, self.use_format, self.show_work = reverse_answer, use_format, show_work
        self.test_fraction, self.validation_fraction = test_fraction, validation_fraction
        self.answer_digits = self.op.answer_digits(ndigit)
        self.layout = [(sep, width) for sep, _, width in self.op.steps(0, 0, ndigit)] if show_work else []
        separators = [sep for sep, _ in self.layout if sep not in ("", self.op.symbol, EQUALS)]
        if any(len(sep) != 1 or sep in DIGITS + END + PAD for sep in separators):
            raise ValueError(f"{task}: a step separator must be '' or one character other than digits and "
                             f"'{END}{PAD}', got {separators}")
        self.itos = list(DIGITS) + [self.op.symbol, EQUALS, END, PAD] + sorted(set(separators))
        self.stoi = {ch: i for i, ch in enumerate(self.itos)}
        self.end_token, self.pad_token = self.stoi[END], self.stoi[PAD]
        self.vocab_size = len(self.itos)
        self.prompt_len = 2 * ndigit + (2 if use_format else 0)
        steps_len = sum(len(sep) + width for sep, width in self.layout)
        self.final_start = steps_len + (1 if show_work else 0)  # the steps, then "="
        self.answer_len = self.final_start + self.answer_digits + 1  # then the digits and the end token
        self.seq_len = self.prompt_len + self.answer_len
        self.final_slice = slice(steps_len, self.answer_len)
        self.steps_slice = slice(0, steps_len)
        self._rng = np.random.default_rng(seed)  # only for generate_problem() without an rng
        self._check_results_fit()

    def _check_results_fit(self):
        """Find an operation whose results (or steps) do not fit its declared widths now, not mid-run:
        every pair when there are few, else the corners and a fixed sample."""
        space = 10 ** self.ndigit
        if space <= 100:
            a, b = np.divmod(np.arange(space * space, dtype=np.int64), space)
        else:
            rng = np.random.default_rng(0)
            corners = np.array([0, 1, space - 1], dtype=np.int64)
            a = np.concatenate([np.repeat(corners, 3), rng.integers(0, space, 1000)])
            b = np.concatenate([np.tile(corners, 3), rng.integers(0, space, 1000)])
        if self.op.ordered:
            a, b = np.maximum(a, b), np.minimum(a, b)
        if self.show_work:
            for x, y in zip(a.tolist(), b.tolist()):
                layout = [(sep, width) for sep, _, width in self.op.steps(x, y, self.ndigit)]
                if layout != self.layout:
                    raise ValueError(f"{self.task}: the steps of {x}{self.op.symbol}{y} are laid out as {layout}, "
                                     f"those of 0{self.op.symbol}0 as {self.layout}; every answer needs the same")
        self.encode(a, b)

    def position_ids(self, n: int, rng: Optional[np.random.Generator] = None) -> None:
        """None: the model reads its own positions 0, 1, 2, ... (rl/long_env.py's coupled ids are the other kind)."""
        return None

    # ---- sampling -------------------------------------------------------------------------
    def split_of(self, a, b) -> np.ndarray:
        """The split of each pair (a, b): an index into SPLITS. (B,) -> (B,)."""
        return split_of(a, b, self.test_fraction, self.validation_fraction)

    def sample_operands(self, n: int, rng: np.random.Generator, split: str = "train"):
        """n operand pairs (a, b), each an int64 array (n,), drawn uniformly from one split."""
        return sample_split(self, n, rng, split)

    def _draw(self, k: int, rng: np.random.Generator):
        a = rng.integers(0, 10 ** self.ndigit, size=k)
        b = rng.integers(0, 10 ** self.ndigit, size=k)
        return (np.maximum(a, b), np.minimum(a, b)) if self.op.ordered else (a, b)

    def all_pairs(self):
        """Every operand pair (a, b), int64 arrays in the order a * 10^ndigit + b (a >= b for an ordered
        operation): the enumerated space of eval_operands, split_size and the prioritized sampler."""
        space = 10 ** self.ndigit
        a, b = np.divmod(np.arange(space * space, dtype=np.int64), space)
        return (a[a >= b], b[a >= b]) if self.op.ordered else (a, b)

    def eval_operands(self, num: int, split: str = "test"):
        """The fixed evaluation set of `split`: up to `num` distinct pairs, identical in every run, and
        the first `num` of any larger set (an evaluation of 500 problems checks the first 500 of 1000)."""
        want, rng, space = SPLITS.index(split), np.random.default_rng(EVAL_SEEDS[split]), 10 ** self.ndigit
        if space * space <= ENUMERATE_LIMIT:  # take every pair of the split, in a fixed random order
            a, b, split = self._enumerated()
            keep = split == want
            order = rng.permutation(int(keep.sum()))[:num]
            return a[keep][order], b[keep][order]
        seen, a_out, b_out = set(), [], []
        while len(a_out) < num:  # fixed-size chunks: what is drawn never depends on num
            a, b = self._draw(EVAL_CHUNK, rng)
            keep = self.split_of(a, b) == want
            for x, y in zip(a[keep].tolist(), b[keep].tolist()):
                if (x, y) not in seen and len(a_out) < num:
                    seen.add((x, y)), a_out.append(x), b_out.append(y)
        return np.array(a_out, dtype=np.int64), np.array(b_out, dtype=np.int64)

    def split_size(self, split: str) -> Optional[int]:
        """The number of distinct pairs in `split`, counted exactly where eval_operands enumerates the
        operand space (at most ENUMERATE_LIMIT ordered pairs); None for a larger space."""
        space = 10 ** self.ndigit
        if space * space > ENUMERATE_LIMIT:
            return None
        return int((self._enumerated()[2] == SPLITS.index(split)).sum())

    def _enumerated(self):
        """Every pair of the enumerated space (all_pairs) and its split (B,), computed once a process for this space
        and these split fractions: a run's evaluation sets (each split's, the warm start's) and split_size read them,
        where each call enumerated and hashed every pair again (45-55 ms at 3 digits on a 2-core CPU, three a run).
        Read-only."""
        key = (self.ndigit, self.op.ordered, self.test_fraction, self.validation_fraction)
        if key not in _ENUMERATED:
            a, b = self.all_pairs()
            arrays = (a, b, self.split_of(a, b))
            for t in arrays:
                t.flags.writeable = False
            _ENUMERATED.clear()  # (one space at a time: up to ENUMERATE_LIMIT pairs, 96 MB)
            _ENUMERATED[key] = arrays
        return _ENUMERATED[key]

    def generate_problem(self, rng: Optional[np.random.Generator] = None, split: str = "train") -> MathProblem:
        a, b = self.sample_operands(1, rng if rng is not None else self._rng, split)
        return self.problem(int(a[0]), int(b[0]))

    def problem(self, a: int, b: int) -> MathProblem:
        prompt, answer = self.encode(np.array([a]), np.array([b]))
        return MathProblem(a, b, self.op.symbol, self.op.fn(a, b), self.decode_text(prompt[0]),
                           self.decode_text(answer[0]))

    # ---- encoding -------------------------------------------------------------------------
    def _number(self, x: np.ndarray, width: int, what: str) -> np.ndarray:
        """x (B,) -> (B, width) digit ids, reversed when reverse_answer; ValueError if x does not fit."""
        if (x < 0).any() or (x >= 10 ** width).any():
            bad = int(np.nonzero((x < 0) | (x >= 10 ** width))[0][0])
            raise ValueError(f"{self.task} with ndigit={self.ndigit}: {what} {int(x[bad])} does not fit "
                             f"{width} non-negative digits; widen it in the operation's definition")
        digits = self._digits(x, width)
        return digits[:, ::-1] if self.reverse_answer else digits

    def encode(self, a, b):
        """Operands (B,) -> prompt tokens (B, prompt_len) and answer tokens (B, answer_len), int64."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        B, n = len(a), self.ndigit
        column = lambda ch: np.full((B, 1), self.stoi[ch])
        fmt = [column(self.op.symbol)] if self.use_format else []
        prompt = [self._digits(a, n), *fmt, self._digits(b, n), *([column(EQUALS)] if self.use_format else [])]
        answer = []
        if self.show_work:
            for (sep, width), values in zip(self.layout, self._step_values(a, b)):
                answer += [column(sep)] if sep else []
                answer.append(self._number(values, width, "a step"))
            answer.append(column(EQUALS))
        results = self._results(a, b)
        answer += [self._number(results, self.answer_digits, "a result"), column(END)]
        return (torch.from_numpy(np.concatenate(prompt, axis=1)),
                torch.from_numpy(np.ascontiguousarray(np.concatenate(answer, axis=1))))

    def _results(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The operation's result of every pair (B,) -> (B,) int64: one call on the arrays for a vectorized
        operation, else one a pair, on Python's ints."""
        if self.op.vectorized:
            return rows(self.op.fn(a, b), a.shape)
        return np.array([self.op.fn(int(x), int(y)) for x, y in zip(a, b)], dtype=np.int64)

    def _step_values(self, a: np.ndarray, b: np.ndarray) -> list:
        """The value of every step (the layout's order) of every pair: one (B,) int64 array a step."""
        if self.op.vectorized:
            return [rows(v, a.shape) for _, v, _ in self.op.steps(a, b, self.ndigit)]
        steps = [self.op.steps(int(x), int(y), self.ndigit) for x, y in zip(a, b)]
        return [np.array([s[k][1] for s in steps], dtype=np.int64) for k in range(len(self.layout))]

    @staticmethod
    def _digits(x: np.ndarray, width: int) -> np.ndarray:
        """x (B,) non-negative ints -> (B, width) digit ids, most significant first."""
        return (x[:, None] // 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)) % 10

    @staticmethod
    def is_digit(tokens: torch.Tensor) -> torch.Tensor:
        """Which tokens are digits (ids 0-9 are the digits 0-9 in every task's vocabulary)."""
        return tokens < len(DIGITS)

    def decode_text(self, tokens) -> str:
        return "".join(self.itos[int(t)] for t in tokens)

    def decode_answer(self, tokens) -> Optional[int]:
        """Generated answer tokens (answer_len,) -> the final answer they state, or None if it is
        malformed (a non-digit among its digits, no "=" before it when the work is shown, or no end
        token right after it). The steps are not read."""
        tokens = [int(t) for t in tokens]
        digits, end = tokens[self.final_start:-1], tokens[-1]
        if any(t > 9 for t in digits) or end != self.end_token:
            return None
        if self.show_work and tokens[self.final_start - 1] != self.stoi[EQUALS]:
            return None
        return int("".join(map(str, digits[::-1] if self.reverse_answer else digits)))

    def describe_mistake(self, a: int, b: int, tokens) -> str:
        """One line in minGPT's style: 'claims 123+45=169, truth 168' (and what it wrote, with steps)."""
        value = self.decode_answer(tokens)
        claim = value if value is not None else f"malformed {self.decode_text(tokens)!r}"
        line = f"claims {a}{self.op.symbol}{b}={claim}, truth {self.op.fn(a, b)}"
        return line + (f"; wrote {self.decode_text(tokens)!r}" if self.show_work and value is not None else "")


MATH_ENV_KEYS = ("task", "ndigit", "reverse_answer", "use_format", "show_work", "test_fraction", "validation_fraction")


@dataclass
class TaskSettings:
    """What a run learns and is measured on: the operation, how its problems are written, the held-out splits."""
    task: str = "adder"
    """operation to learn: a name registered in rl/math_env.py (adder, subtractor, multiplier)"""
    ndigit: int = 3
    """digits per operand; operands are drawn uniformly from 0 .. 10^ndigit - 1 (1 to 9)"""
    reverse_answer: bool = True
    """write the answer least-significant digit first, so carries flow in writing order"""
    use_format: bool = True
    """write the operator and '=' in the prompt ('123+045='); False gives bare digits ('123045')"""
    show_work: bool = False
    """write the operation's steps before the final answer ('12*34=840+0630=8040$'), for tasks that define them"""
    test_fraction: float = 0.1
    """share of operand pairs in the test split: held out, never trained on, every reported accuracy
    (in (0, 1); with validation_fraction below 1)"""
    validation_fraction: float = 0.05
    """share of operand pairs in the validation split: held out, what choices (warm-start stopping, sweeps) look at
    (in (0, 1); with test_fraction below 1)"""
    num_eval: int = 1000
    """problems in each fixed evaluation set, test and validation (all of a split when it has fewer) (> 0)"""

    def task_environment(self) -> MathEnvironment:
        """The environment of task and ndigit (ValueError, one line, from its own checks)."""
        return MathEnvironment(**{k: getattr(self, k) for k in MATH_ENV_KEYS})
