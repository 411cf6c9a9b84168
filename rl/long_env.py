"""Addition of numbers of many lengths in one task, up to 100 digits and more, and the coupled
position ids that let a model add numbers longer than those it was trained on.

    env = LongAdditionEnvironment((1, 20), positions="coupled", max_position_offset=80)
    a, b = env.sample_operands(64, rng)          # digit arrays (64, 20) uint8, column i = 10^i
    prompts, answers = env.encode(a, b)          # (64, 42), (64, 22) tokens, as MathEnvironment's
    pos = env.position_ids(64, rng)              # (64, 64) coupled ids, a random offset per problem

Token format: that of `MathEnvironment('adder', W)` at the current width W (the vocabulary too), so a
3-digit problem written at width 5 reads as at ndigit=5:

    12 + 345 = 357        prompt "00012+00345="     answer "753000$" (357 in W + 1 = 6 digits, reversed)

With `known_length` the answer is its W + 1 digits alone, "753000": every answer at width W has W + 1 digits, so
where it ends follows from the prompt, and generation stops there. With the end token, the model must find the
end itself, from the absence of operand digits at the next column; past the trained widths that failed more
often than any digit (results/study/probes/, "where-long-sums-go-wrong"); yet without it a warm start went wrong
more often at every column (one seed, docs/results.md). The vocabulary keeps the end token: an answer that writes
one early is malformed. With `carry_column` each operand gets one more leading zero,
"000012+000345=": the sum's top digit, the last carry, then has operand digits at its column as every other
answer digit has (ids below), rather than none.

Lengths: a number's length is its count of digits (0 has one). Each operand's length is drawn
independently, uniformly over the range, then the operand uniformly over the numbers of that length
(10..99 for two digits). Independent lengths, as Cho et al. 2024 draw them: the pairs of unequal
lengths (3 + 17 digits, where a carry runs through the longer one's zeros-free top digits) are
trained too, and lengths stay uniform for each operand rather than skewed towards the long end as
the longer of two draws would be. An evaluation at one length L uses the range (L, L): both operands
of exactly L digits.

Width: a batch is written at one width w (zero-padded, as today), its problems' longest operand:
every problem drawn at width w has max(len a, len b) = w. Training draws w per step (`draw_width`,
then `set_width`) from the distribution of the longer of two independent lengths, P(w) ~ 2(w - lo) + 1,
so that over steps each operand's length is uniform over the range, as above, while the model sees
every width: a problem of L digits is written at width L in training as in an evaluation at length L,
and a longer evaluation only extends a layout the model has seen at every shorter width. (One width
for the whole range would teach "the answer has hi + 1 digits" and nothing else.) prompt_len and
answer_len are those of the current width, read by every consumer at the time of use. Each phase has
its own environment object (warm start, RL, and one per evaluated length, fixed at its width); they
share the split, which depends on the pair only.

Padding (`pad_ndigits`, the settings rl_pad_ndigits and sft_pad_ndigits): a step's problems, whose longer
operand has w digits, are written at a width drawn uniformly from w to pad_ndigits (`draw_written`; in a share
`pad_share` of steps, the others at w), their leading columns zero, so that layouts as long as an
evaluation's are trained with short numbers. `width` is then the written width (what prompt_len, answer_len
and the ids read) and `number_width` the numbers' own. A model trained at its numbers' own widths learns
those layouts and not a rule for any width (a probe in results/study/probes/: 10-digit sums written 5
columns wider went from 0.965 right to 0.165).

Operands are digit arrays (B, D) uint8, least-significant digit first (column i holds the digit of
10^i), any D: 100-digit numbers do not fit an int64, digit arrays vectorise, and the answer, being
written least-significant first, is the sum's digit array itself. `to_digits` and `to_int` convert
from and to Python ints.

The split: as MathEnvironment's, a fixed hash u in [0, 1) of the unordered pair, through splitmix64,
extended to any length: the pair's 9-digit limbs (least significant first) are folded in one at a
time, h <- splitmix64(h ^ (min_limb << 32 | max_limb)), stopping after the highest nonzero limb. A
pair of numbers below 10^9 has one limb, and its u is exactly `pair_hash(a, b)` of rl/math_env.py:
a pair held out of the 3-digit task is held out here too. The hash depends on the numbers, not on
the width they are written at.

Position ids (`positions="coupled"`, Cho et al. 2024, "Position Coupling", arXiv 2405.20671): the
digit of significance i of a, of b and of the sum all get the id 2 + offset + i; "+" and "=" get the id
of significance -1 (1 + offset), and the end token 0, which no other token has. 12+345 at W = 3, offset 0:

    tokens  0  1  2  +  3  4  5  =  7  5  3  0  $
    ids     4  3  2  1  4  3  2  1  2  3  4  5  0      (known_length: the same, without the last column)

    carry_column:   0  0  1  2  +  0  3  4  5  =  7  5  3  0  $
              ids   5  4  3  2  1  5  4  3  2  1  2  3  4  5  0

A token predicts the next one, so the token of id s predicts the sum's digit of id s + 1, whose operand
digits also read s + 1: one rule for every answer token, "=" included (the last digit, the carry, finds
operand digits there only with carry_column). (With "=" at the end token's
id 0, the first answer digit had no column to read: a warm start wrote it right 40% of the time,
teacher-forced, against 93-99% for every later digit, and that alone held 10-digit sums under 0.5.)

Training draws the offset of each problem uniformly from 0 .. max_position_offset (`rng`; padded, from
0 .. max_position_offset + hi - W at written width W, so every layout reaches the same top id), so the
ids of long numbers are trained by short ones; a warm start on shorter numbers than RL's draws up
to the offset that reaches the same top id (`environments`): it trains every id RL and evaluation
read. An evaluation (`rng=None`) draws them the same way
from a fixed seed (EVAL_OFFSETS), so that it is a fixed function of the weights: problem i of a batch
has the same offset at every evaluation. An environment of one evaluated length L gets the
max_position_offset that keeps its ids within those training reaches (`environments`), so it reads
ids as training does. (At offset 0 alone, ids near 1 are at the edge training rarely visits: a warm
start that wrote 66% of 5-digit validation sums right at trained offsets wrote 8% at offset 0.)
With `positions="absolute"`, position_ids returns
None: the model's own 0, 1, 2, ... (learned absolute positions, as every other task).

LongTaskSettings: the task's settings, TaskSettings (rl/math_env.py) and those of the task of many lengths,
with what a run builds from them (`task_args`, `environments`) and their checks.
"""

import copy
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from rl.errors import ConfigError
from rl.math_env import (DIGITS, END, ENUMERATE_LIMIT, EQUALS, EVAL_CHUNK, EVAL_SEEDS, MATH_ENV_KEYS, OPERATIONS, PAD,
                         SPLITS, MathEnvironment, TaskSettings, _splitmix64, sample_split)

POSITIONS = ("absolute", "coupled")
LIMB = 9  # digits per limb of the split hash: 10^9 < 2^32, so two limbs fit one 64-bit key
HASH_SEED = 0x5DEECE66D  # pair_hash's, so that one limb gives pair_hash's value
EVAL_OFFSETS = 20240530  # the fixed seed of an evaluation's position offsets


def to_digits(values, width: int) -> np.ndarray:
    """Non-negative Python ints (B,) -> digit arrays (B, width) uint8, least-significant first."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "i":
        return _int64_digits(values.astype(np.int64, copy=False), width)
    out = np.zeros((len(values), width), dtype=np.uint8)
    for row, x in enumerate(values):
        x = int(x)
        if x < 0 or len(str(x)) > width:
            raise ValueError(f"{x} does not fit {width} non-negative digits")
        digits = str(x)[::-1]
        out[row, :len(digits)] = np.frombuffer(digits.encode(), dtype=np.uint8) - ord("0")
    return out


def _int64_digits(values: np.ndarray, width: int) -> np.ndarray:
    """to_digits of an int64 array (B,), column by column: an enumerated evaluation set is 10^6 pairs or more, which
    the loop over Python ints takes seconds to write."""
    too_wide = values >= 10 ** width if width < 19 else np.zeros(len(values), dtype=bool)  # (an int64 has <= 19)
    bad = np.nonzero((values < 0) | too_wide)[0]
    if len(bad):
        raise ValueError(f"{int(values[bad[0]])} does not fit {width} non-negative digits")
    out = np.zeros((len(values), width), dtype=np.uint8)
    columns = min(width, 19)
    out[:, :columns] = values[:, None] // 10 ** np.arange(columns, dtype=np.int64) % 10
    return out


def to_int(digits) -> int:
    """A digit array (D,), least-significant first -> the Python int it writes."""
    return int("".join(str(int(d)) for d in np.asarray(digits)[::-1]) or "0")


def number_lengths(digits: np.ndarray) -> np.ndarray:
    """(B, D) digit arrays -> (B,) the count of digits of each number (0 has one)."""
    nonzero = digits[:, ::-1] != 0
    return np.where(nonzero.any(axis=1), digits.shape[1] - nonzero.argmax(axis=1), 1)


def add_digits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b on digit arrays (B, D) -> (B, D + 1), exact at any length: the school method, column by column."""
    out = np.zeros((a.shape[0], a.shape[1] + 1), dtype=np.uint8)
    carry = np.zeros(a.shape[0], dtype=np.uint8)
    for i in range(a.shape[1]):
        column = a[:, i] + b[:, i] + carry
        out[:, i], carry = column % 10, column // 10
    out[:, -1] = carry
    return out


def _widen(digits: np.ndarray, width: int) -> np.ndarray:
    """(B, D) -> (B, width) with zero columns above (D <= width)."""
    return np.pad(digits, ((0, 0), (0, width - digits.shape[1])))


def _less(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(B,) a < b for digit arrays of one width: decided by their highest differing digit."""
    differ = (a != b)[:, ::-1]
    top = a.shape[1] - 1 - differ.argmax(axis=1)
    rows = np.arange(len(a))
    return differ.any(axis=1) & (a[rows, top] < b[rows, top])


def long_pair_hash(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """u in [0, 1) for each unordered pair {a, b} of digit arrays (B, D): pair_hash extended to any
    length (the module docstring says how); the same u at every width the pair is written at."""
    width = max(a.shape[1], b.shape[1], 1)
    width = -(-width // LIMB) * LIMB
    a, b = _widen(a, width), _widen(b, width)
    swap = _less(b, a)[:, None]
    low, high = np.where(swap, b, a), np.where(swap, a, b)
    scale = 10 ** np.arange(LIMB, dtype=np.uint64)
    limbs = lambda x: (x.reshape(len(x), -1, LIMB).astype(np.uint64) * scale).sum(axis=2)  # (B, L)
    keys = (limbs(low) << np.uint64(32)) | limbs(high)
    nonzero = keys != 0
    # limbs folded in: up to the highest nonzero one, at least one
    used = np.where(nonzero.any(axis=1), keys.shape[1] - nonzero[:, ::-1].argmax(axis=1), 1)
    h = np.full(len(a), HASH_SEED, dtype=np.uint64)
    final = h.copy()
    for k in range(keys.shape[1]):
        h = _splitmix64(h ^ keys[:, k])
        final = np.where(used == k + 1, h, final)
    return (final >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


class LongAdditionEnvironment:
    """Addition with operands of lo to hi digits (`ndigits`): sampling, encoding at the current width, decoding,
    the three splits, and the position ids the model reads. The interface of MathEnvironment's that the
    trainer, rewards and evaluation use, with digit arrays (B, D) as operands, plus `position_ids`."""

    task, show_work, reverse_answer, use_format = "adder", False, True, True

    def __init__(self, ndigits: tuple = (1, 10), *, positions: str = "absolute", max_position_offset: int = 0,
                 pad_ndigits: int = 0, test_fraction: float = 0.1, validation_fraction: float = 0.05,
                 pad_name: str = "pad_ndigits", pad_share: float = 1.0, known_length: bool = False,
                 carry_column: bool = False):
        lo, hi = ndigits
        if not 1 <= lo <= hi:
            raise ValueError(f"a range of lengths needs 1 <= lo <= hi, got {lo}-{hi}")
        if positions not in POSITIONS:
            raise ValueError(f"unknown positions {positions!r}; known: {', '.join(POSITIONS)}")
        if max_position_offset < 0 or (positions == "absolute" and max_position_offset):
            raise ValueError(f"max_position_offset must be 0 (absolute positions) or >= 0 (coupled), "
                             f"got {max_position_offset} with positions={positions}")
        if not (0.0 < test_fraction and 0.0 < validation_fraction and test_fraction + validation_fraction < 1.0):
            raise ValueError(f"test_fraction and validation_fraction must be positive and leave a train split, "
                             f"got {test_fraction} and {validation_fraction}")
        if pad_ndigits and (positions != "coupled" or not hi <= pad_ndigits <= hi + max_position_offset):
            raise ValueError(f"{pad_name} must be 0, or from the range's longest ({hi}) to that plus "
                             f"max_position_offset ({hi + max_position_offset}) with coupled positions, "
                             f"got {pad_ndigits} with positions={positions}")
        self.lo, self.hi, self.width = lo, hi, hi
        if not 0.0 < pad_share <= 1.0:
            raise ValueError(f"pad_share must be in (0, 1], got {pad_share}")
        self.pad_ndigits, self.pad_share, self.known_length = pad_ndigits, pad_share, known_length
        self.carry_column = carry_column
        self.positions, self.max_position_offset = positions, max_position_offset
        self.test_fraction, self.validation_fraction = test_fraction, validation_fraction
        self.op = OPERATIONS["adder"]
        self.itos = list(DIGITS) + [self.op.symbol, EQUALS, END, PAD]  # MathEnvironment('adder')'s vocabulary
        self.stoi = {ch: i for i, ch in enumerate(self.itos)}
        self.end_token, self.pad_token, self.vocab_size = self.stoi[END], self.stoi[PAD], len(self.itos)
        self.final_start, self.steps_slice = 0, slice(0, 0)
        self.widest = max(hi, pad_ndigits)  # the widest a problem is written at
        # the longest sequence, a problem written at the widest (set_width's lengths), and the position embeddings a
        # model needs (n_position >= this)
        self.set_width(hi, self.widest)
        self.seq_len = self.prompt_len + self.answer_len
        self.num_position_ids = self.seq_len if positions == "absolute" else hi + 3 + max_position_offset
        self.set_width(hi)

    def set_width(self, width: int, written: Optional[int] = None):
        """Draw problems whose longer operand has `width` digits (lo <= width <= hi), written at `written` digits
        (width <= written <= pad_ndigits; default: width), from now on (the module docstring)."""
        written = width if written is None else written
        if not self.lo <= width <= self.hi:
            raise ValueError(f"width {width} outside the range {self.lo}-{self.hi}")
        if not width <= written <= self.widest:
            raise ValueError(f"problems of {width} digits cannot be written at {written}: "
                             f"from {width} to pad_ndigits={self.widest}")
        self.number_width, self.width, self.answer_digits = width, written, written + 1
        # operands of written (+ 1: the carry column) digits, the answer's written + 1 digits and the end token, or not
        self.prompt_len, self.answer_len = 2 * (written + self.carry_column) + 2, written + 2 - self.known_length
        self.final_slice = slice(0, self.answer_len)

    def unpadded(self) -> "LongAdditionEnvironment":
        """This environment without its padding, at the range's longest width (the warm start's first phase)."""
        return self.with_pad_share(0.0)

    def with_pad_share(self, pad_share: float) -> "LongAdditionEnvironment":
        """This environment at the range's longest width, padding a share pad_share of steps as this one pads them
        (0: none, unpadded(); the warm start's first phase with sft_first_pad_share)."""
        return LongAdditionEnvironment((self.lo, self.hi), positions=self.positions,
                                       max_position_offset=self.max_position_offset, test_fraction=self.test_fraction,
                                       validation_fraction=self.validation_fraction, known_length=self.known_length,
                                       carry_column=self.carry_column, pad_ndigits=self.pad_ndigits if pad_share else 0,
                                       pad_share=pad_share or 1.0)

    def draw_written(self, width: int, rng: np.random.Generator) -> int:
        """The width a step's problems of `width` digits are written at: uniform over width .. pad_ndigits (their
        leading columns zeros, so long layouts are trained with short numbers) in a share pad_share of steps, else
        width itself; width itself without padding (and then no draw, so the width stream is the unpadded one)."""
        if self.pad_ndigits <= width or (self.pad_share < 1.0 and rng.random() >= self.pad_share):
            return width
        return int(rng.integers(width, self.pad_ndigits + 1))

    def draw_width(self, rng: np.random.Generator, weights: Optional[np.ndarray] = None) -> int:
        """A step's width: the longer of two lengths drawn uniformly over the range, P(w) ~ 2(w - lo) + 1;
        or from weights (hi - lo + 1,), a distribution over lo..hi (a length curriculum's)."""
        if weights is not None:
            return self.lo + int(rng.choice(self.hi - self.lo + 1, p=weights))
        return int(max(rng.integers(self.lo, self.hi + 1, size=2)))

    # ---- position ids ---------------------------------------------------------------------
    def position_ids(self, n: int, rng: Optional[np.random.Generator] = None) -> Optional[torch.Tensor]:
        """(n, prompt_len + answer_len) int64 ids of every token of n problems (coupled), each problem's
        offset drawn from rng (training) or from the fixed seed EVAL_OFFSETS (rng None: an evaluation);
        None for absolute positions."""
        if self.positions == "absolute":
            return None
        W = self.width
        significance = np.arange(W - 1 + self.carry_column, -1, -1) + 2  # an operand's digits, most significant first
        end = [] if self.known_length else [0]
        row = np.concatenate([significance, [1], significance, [1], np.arange(W + 1) + 2, end])
        rng = np.random.default_rng(EVAL_OFFSETS) if rng is None else rng  # an evaluation's: the same every time
        # padded: every layout reaches the same top id, hi + 2 + max_position_offset, the unpadded one's: a wider one
        # is shifted less, and the numbers' own digits, written narrower, train every id below it
        reach = self.max_position_offset + (self.hi - W if self.pad_ndigits else 0)
        offsets = rng.integers(0, reach + 1, size=n)
        return torch.from_numpy(np.where(row > 0, row + offsets[:, None], 0).astype(np.int64))

    # ---- sampling -------------------------------------------------------------------------
    def split_of(self, a, b) -> np.ndarray:
        """The split of each pair (a, b) of digit arrays: an index into SPLITS. (B,) -> (B,)."""
        u = long_pair_hash(self._as_digits(a), self._as_digits(b))
        return np.where(u < self.test_fraction, 2, np.where(u < self.test_fraction + self.validation_fraction, 1, 0))

    def _draw(self, k: int, rng: np.random.Generator):
        """k pairs at the current width w: the two lengths as two uniform draws over lo..hi whose longer is w
        (one of them w, or both), then each number uniform over the numbers of its length."""
        w = self.number_width
        n = w - self.lo + 1  # lengths lo..w
        both = rng.random(k) < 1.0 / (2 * n - 1)  # P(both are w | the longer is w); else one is, each side alike
        a_long = both | (rng.random(k) < 0.5)
        other = rng.integers(self.lo, w, size=k) if n > 1 else np.full(k, w)  # lo..w-1
        lengths_a = np.where(a_long, w, other)
        lengths_b = np.where(both | ~a_long, w, other)

        def operand(lengths):
            digits = rng.integers(0, 10, size=(k, w), dtype=np.uint8)
            top = rng.integers(1, 10, size=k, dtype=np.uint8)  # a leading digit is not 0 (but 0 has length 1)
            digits[np.arange(w) >= lengths[:, None]] = 0
            rows = np.nonzero(lengths > 1)[0]
            digits[rows, lengths[rows] - 1] = top[rows]
            return _widen(digits, self.width)
        return operand(lengths_a), operand(lengths_b)

    def pair_keys(self, a, b) -> np.ndarray:
        """(B,) int64 keys naming each unordered pair, its 53-bit split hash: what rl/rollout.py records of a
        group (the uniform problem sampler reads none; the others need invertible keys and are refused)."""
        u = long_pair_hash(self._as_digits(a), self._as_digits(b))
        return (u * 2.0 ** 53).astype(np.int64)

    def sample_operands(self, n: int, rng: np.random.Generator, split: str = "train"):
        """n operand pairs (a, b), digit arrays (n, width), drawn from the length distribution within one split."""
        return sample_split(self, n, rng, split)

    def eval_operands(self, num: int, split: str = "test"):
        """The fixed evaluation set of `split`: up to `num` distinct pairs, the same in every run and the
        first `num` of any larger set. Every pair of the split in a fixed order when the range holds at
        most ENUMERATE_LIMIT ordered pairs, else drawn from the length distribution in fixed chunks."""
        want, rng = SPLITS.index(split), np.random.default_rng(EVAL_SEEDS[split])
        if 10 ** (2 * self.hi) <= ENUMERATE_LIMIT:
            values = np.arange(0 if self.lo == 1 else 10 ** (self.lo - 1), 10 ** self.hi, dtype=np.int64)
            a, b = (v.ravel() for v in np.meshgrid(values, values, indexing="ij"))
            a, b = to_digits(a, self.width), to_digits(b, self.width)
            keep = np.nonzero(self.split_of(a, b) == want)[0]
            order = keep[rng.permutation(len(keep))[:num]]
            return a[order], b[order]
        seen, a_out, b_out = set(), [], []
        while len(a_out) < num:  # fixed-size chunks: what is drawn never depends on num
            a, b = self._draw(EVAL_CHUNK, rng)
            for i in np.nonzero(self.split_of(a, b) == want)[0]:
                key = a[i].tobytes() + b[i].tobytes()
                if key not in seen and len(a_out) < num:
                    seen.add(key), a_out.append(a[i]), b_out.append(b[i])
        as_array = lambda rows: np.array(rows, dtype=np.uint8).reshape(-1, self.width)
        return as_array(a_out), as_array(b_out)

    # ---- encoding -------------------------------------------------------------------------
    def _as_digits(self, x) -> np.ndarray:
        """Digit arrays (B, D) as they are, or Python ints (B,) made into digit arrays of this width."""
        if isinstance(x, np.ndarray) and x.ndim == 2:
            return x.astype(np.uint8, copy=False)
        values = [int(v) for v in x]
        return to_digits(values, max([self.width] + [len(str(v)) for v in values]))

    def encode(self, a, b):
        """Operands (digit arrays (B, D <= width), or Python ints) -> prompt tokens (B, prompt_len) and
        answer tokens (B, answer_len), int64; ValueError for an operand longer than the width."""
        a, b = self._as_digits(a), self._as_digits(b)
        for x in (a, b):
            if x.shape[1] > self.width and x[:, self.width:].any():
                raise ValueError(f"an operand of {int(number_lengths(x).max())} digits does not fit the range "
                                 f"{self.lo}-{self.hi}")
        a, b = _widen(a[:, :self.width], self.width), _widen(b[:, :self.width], self.width)
        column = lambda ch: np.full((len(a), 1), self.stoi[ch])
        top = lambda x: _widen(x, self.width + self.carry_column)[:, ::-1]  # most significant first
        prompt = [top(a), column(self.op.symbol), top(b), column(EQUALS)]
        answer = [add_digits(a, b)] + ([] if self.known_length else [column(END)])  # least-significant first
        as_tokens = lambda parts: torch.from_numpy(np.concatenate([p.astype(np.int64) for p in parts], axis=1))
        return as_tokens(prompt), as_tokens(answer)

    is_digit, decode_text = staticmethod(MathEnvironment.is_digit), MathEnvironment.decode_text

    def decode_answer(self, tokens) -> Optional[int]:
        """Generated answer tokens (answer_len,) -> the sum they state (a Python int), or None if malformed."""
        tokens = [int(t) for t in tokens]
        digits, end = (tokens, self.end_token) if self.known_length else (tokens[:-1], tokens[-1])
        if any(t > 9 for t in digits) or end != self.end_token:
            return None
        return int("".join(map(str, digits[::-1])))

    def describe_mistake(self, a, b, tokens) -> str:
        """'claims 12+345=358, truth 357'; a and b: Python ints or digit arrays (D,)."""
        a, b = (x if isinstance(x, int) else to_int(x) for x in (a, b))
        value = self.decode_answer(tokens)
        claim = value if value is not None else f"malformed {self.decode_text(tokens)!r}"
        return f"claims {a}{self.op.symbol}{b}={claim}, truth {a + b}"


# ---- the environments a config (or a file's task_args) describes ----------------------------------
def parse_range(name: str, text: str) -> tuple:
    """'lo-hi' (or one length 'L') -> (lo, hi), 1 <= lo <= hi; ValueError (one line) for anything else."""
    parts = text.split("-")
    if len(parts) in (1, 2) and all(p.strip().isdigit() for p in parts):
        lo, hi = int(parts[0]), int(parts[-1])
        if 1 <= lo <= hi:
            return lo, hi
    raise ValueError(f"{name}={text!r} is not a range of operand lengths 'lo-hi' with 1 <= lo <= hi; write e.g. '1-20'")


def parse_lengths(text: str) -> list:
    """eval_ndigits '5,10,20' -> [5, 10, 20] (sorted, distinct; [] for ""); ValueError (one line) for anything else."""
    parts = [p.strip() for p in text.split(",")] if text else []
    if not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"eval_ndigits={text!r} is not a list of operand lengths of 1 or more; "
                         f"write e.g. '5,10,20,40,100'")
    return sorted({int(p) for p in parts})


def environments(task: dict, eval_lengths=()) -> dict:
    """{"sft": warm start, "rl": RL, "eval": {length: env}} from a config's task_args() (what a snapshot stores):
    one MathEnvironment for all three without rl_ndigits; else the task of many lengths, an environment per phase
    and per evaluated length ({None: a copy of RL's} without any), each length's evaluation offsets kept within
    the ids RL's training reaches. ValueError (one line) from the environments' own checks."""
    if not task.get("rl_ndigits"):
        env = MathEnvironment(**{k: task[k] for k in MATH_ENV_KEYS})
        return {"sft": env, "rl": env, "eval": {None: env}}
    offset = task.get("max_position_offset", 0)
    long = lambda lengths, max_offset=offset, pad_key="": LongAdditionEnvironment(  # pad_key: the phase's setting
        lengths, positions=task.get("positions", "absolute"), max_position_offset=max_offset,
        pad_ndigits=task.get(pad_key, 0), pad_name=pad_key or "pad_ndigits", pad_share=task.get("pad_share", 1.0),
        known_length=task.get("known_length", False), carry_column=task.get("carry_column", False),
        test_fraction=task["test_fraction"], validation_fraction=task["validation_fraction"])
    rl = long(parse_range("rl_ndigits", task["rl_ndigits"]), pad_key="rl_pad_ndigits")
    top = rl.hi + 2 + offset  # the largest id RL's training reads (its sum's top digit at the largest offset)
    # shorter warm-start problems get larger offsets, up to the same top id, so that every id an evaluation reads
    # is trained before RL too (at RL's offsets, 1-10 digits stop at id 117 of 127: 8-9% of the evaluation's
    # 5- and 10-digit problems read ids the warm start never trained)
    if task.get("sft_ndigits"):
        lo, hi = parse_range("sft_ndigits", task["sft_ndigits"])
        coupled = task.get("positions") == "coupled"  # (absolute positions have no offsets to widen)
        sft = long((lo, hi), max(offset, top - (hi + 2)) if coupled else offset, pad_key="sft_pad_ndigits")
    else:  # (each phase its own padding)
        padded = task.get("rl_pad_ndigits") or task.get("sft_pad_ndigits")
        sft = long((rl.lo, rl.hi), pad_key="sft_pad_ndigits") if padded else rl
    evals = {L: long((L, L), max(0, top - (L + 2))) for L in eval_lengths}
    # (a copy: RL sets its environment's width every step, an evaluation's stays at the range's longest)
    return {"sft": sft, "rl": rl, "eval": evals or {None: copy.copy(rl)}}


# task_args()'s keys of the task of many lengths, each only when set
LONG_TASK_KEYS = ("rl_ndigits", "sft_ndigits", "positions", "max_position_offset", "rl_pad_ndigits", "sft_pad_ndigits",
                  "pad_share", "known_length", "carry_column")
# nothing reads these alone
LONG_TASK_FIELDS = ("sft_ndigits", "eval_ndigits", "positions", "max_position_offset", "rl_pad_ndigits",
                    "sft_pad_ndigits", "pad_share", "known_length", "carry_column")


@dataclass
class LongTaskSettings(TaskSettings):
    """The task (TaskSettings), and addition of many lengths with the position ids that reach past them."""
    rl_ndigits: str = ""
    """'lo-hi': RL on addition of operands of lo to hi digits each, a step's problems written at one width, their
    longer operand's (rl/long_env.py; task=adder, show_work=false); "" = the fixed ndigit task"""
    sft_ndigits: str = ""
    """'lo-hi': operand lengths of the warm start's problems (with rl_ndigits); "" = rl_ndigits's"""
    eval_ndigits: str = ""
    """operand lengths evaluated, each on its own fixed sets, e.g. '5,10,20,40,100' (with rl_ndigits):
    eval/accuracy_len<L> each, eval/accuracy their mean; "" = the rl_ndigits range alone"""
    positions: str = "absolute"
    """with rl_ndigits: absolute (the model's 0, 1, 2, ...) or coupled (digit i of a, b and the sum share one id,
    Cho et al. 2024), which can extrapolate to longer numbers"""
    max_position_offset: int = 0
    """positions=coupled: each training problem's ids shifted by a random offset of up to this, so the ids of long
    numbers are trained by short ones (an evaluation draws its offsets from a fixed seed, within the ids training
    reaches) (>= 0)"""
    rl_pad_ndigits: int = 0
    """positions=coupled: each step of RL (and of the supervised arm, rl/tools/lengths.py) writes its problems at a
    width drawn uniformly from their longer operand's length to this, leading columns zero: layouts as long as an
    evaluation's, with numbers of rl_ndigits; 0 = no padding, else rl_ndigits's longest .. that + max_position_offset
    (>= 0)"""
    sft_pad_ndigits: int = 0
    """positions=coupled: once the warm start is done, sft_pad_steps more supervised steps on its lengths, padded
    likewise up to this many digits (rl_pad_ndigits), so RL starts from a model that has read long layouts (rl/
    warm_start.py); 0 = none, else sft_ndigits's longest .. that + its offsets (>= 0)"""
    pad_share: float = 1.0
    """with rl_pad_ndigits or sft_pad_ndigits: the share of steps padded (each step drawn); the others write their
    numbers at their own width, so the trained lengths keep practising their own layouts (in (0, 1])"""
    known_length: bool = False
    """with rl_ndigits: the answer is the sum's W + 1 digits alone, without the end token: its length follows from
    the prompt's width W, so generation stops there and the model need not find where a long sum ends"""
    carry_column: bool = False
    """with rl_ndigits: each operand written with one more leading zero, so the sum's top digit (the last carry)
    reads both operands' digits at its column, as every other answer digit does"""

    def task_args(self) -> dict:
        """What defines the problems, as MathEnvironment(**config.task_args()) takes it, and the task of many
        lengths' settings only when set (so the snapshots and warm starts made before them stay valid); a snapshot
        of another task cannot be resumed under this one."""
        long = {k: getattr(self, k) for k in LONG_TASK_KEYS if getattr(self, k) != getattr(LongTaskSettings, k)}
        return {**{k: getattr(self, k) for k in MATH_ENV_KEYS}, **long}

    def environments(self) -> dict:
        """The environment of each phase: {"sft": warm start, "rl": RL, "eval": {length: env}} (`environments`,
        from task_args(): the same environments a file's task builds). ValueError from an environment's own
        checks."""
        return environments(self.task_args(), parse_lengths(self.eval_ndigits))

    def check_task(self):
        """The task of many lengths (rl_ndigits): well-formed ranges, and addition as the adder writes it;
        ValueError (one line) otherwise."""
        for name in ("rl_ndigits", "sft_ndigits"):
            if getattr(self, name):
                parse_range(name, getattr(self, name))
        parse_lengths(self.eval_ndigits)
        if self.rl_ndigits and (self.task, self.show_work, self.reverse_answer, self.use_format) != (
                "adder", False, True, True):
            raise ConfigError("rl_ndigits needs task=adder with show_work=false, reverse_answer=true and "
                              "use_format=true (addition of many lengths, rl/long_env.py); set those, or rl_ndigits=''")

    def check_positions(self, env: MathEnvironment, envs: dict):
        """The model reads every position a problem of any phase needs (n_position, ModelSettings)."""
        if not self.rl_ndigits and env.seq_len > self.n_position:
            raise ConfigError(f"{self.task} with ndigit={self.ndigit} needs {env.seq_len} positions "
                              f"(prompt {env.prompt_len} + answer {env.answer_len}) but n_position={self.n_position}; "
                              f"raise n_position to at least {env.seq_len}")
        every = [envs["sft"], envs["rl"], *envs["eval"].values()]
        need = max(e.num_position_ids for e in every) if self.rl_ndigits else 0
        if need > self.n_position:
            raise ConfigError(f"positions={self.positions} at lengths up to {max(e.hi for e in every)} digits"
                              f"{f' and offsets up to {self.max_position_offset}' if self.max_position_offset else ''} "
                              f"need {need} position ids but n_position={self.n_position}; raise n_position to {need}")

    def task_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]"""
        return [(LONG_TASK_FIELDS, not self.rl_ndigits, "belongs to the task of many lengths (rl_ndigits)"),
                (("pad_share",), not (self.rl_pad_ndigits or self.sft_pad_ndigits),
                 "belongs to padding (rl_pad_ndigits, sft_pad_ndigits)")]
