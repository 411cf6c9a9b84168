"""Task format, carries, shown work, answer parsing and the three splits.  Run: python -m pytest tests/test_math_env.py"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rl.math_env import OPERATIONS, SPLITS, MathEnvironment, long_multiplication, operation, split_of


def text(env, a, b):
    prompt, answer = env.encode([a], [b])
    return env.decode_text(prompt[0]), env.decode_text(answer[0])


def test_worked_examples_of_the_docstring():
    assert text(MathEnvironment("adder", 3), 123, 45) == ("123+045=", "8610$")
    assert text(MathEnvironment("adder", 3, reverse_answer=False), 123, 45) == ("123+045=", "0168$")
    assert text(MathEnvironment("multiplier", 2), 12, 34) == ("12*34=", "8040$")
    assert text(MathEnvironment("subtractor", 3), 123, 45) == ("123-045=", "870$")
    assert text(MathEnvironment("adder", 3, use_format=False), 123, 45) == ("123045", "8610$")


def test_shown_work_by_worked_example():
    two = MathEnvironment("multiplier", 2, show_work=True)
    # 12*4 = 48 in 3 digits, 12*3*10 = 360 in 4, then = and 408 in 4, each reversed
    assert text(two, 12, 34) == ("12*34=", "840+0630=8040$")
    assert text(two, 99, 99) == ("99*99=", "198+0198=1089$")  # 891 + 8910 = 9801
    assert text(MathEnvironment("multiplier", 2, show_work=True, reverse_answer=False), 12, 34) == (
        "12*34=", "048+0360=0408$")
    three = MathEnvironment("multiplier", 3, show_work=True)
    # 738 (123*6), 6150 (123*5*10), their running sum 6888, 49200 (123*4*100), then 56088
    assert text(three, 123, 456) == ("123*456=", "8370+05160=88860+002940=880650$")
    assert long_multiplication(123, 456, 3) == [("", 738, 4), ("+", 6150, 5), ("=", 6888, 5), ("+", 49200, 6)]
    assert (two.answer_len, two.final_start, two.vocab_size) == (14, 9, 15)  # '+' joins the vocabulary
    assert (three.answer_len, three.final_start) == (31, 24)
    answer = two.decode_text(two.encode([12], [34])[1][0])
    assert answer[two.final_slice] == "=8040$" and answer[two.steps_slice] == "840+0630"


def test_decoding_reads_only_the_final_answer():
    env = MathEnvironment("multiplier", 2, show_work=True)
    enc = lambda s: [env.stoi[c] for c in s]
    assert env.decode_answer(enc("840+0630=8040$")) == 408
    assert env.decode_answer(enc("999+9999=8040$")) == 408  # wrong steps, the final answer still reads 408
    assert env.decode_answer(enc("840+0630+8040$")) is None  # no '=' before the final answer
    assert env.decode_answer(enc("840+0630=80+0$")) is None  # a non-digit in it
    assert env.decode_answer(enc("840+0630=8040.")) is None  # never ended
    assert env.describe_mistake(12, 34, enc("840+0630=8140$")) == "claims 12*34=418, truth 408; wrote '840+0630=8140$'"


def test_carries_reach_the_extra_digit():
    env = MathEnvironment("adder", 3)
    assert text(env, 999, 1) == ("999+001=", "0001$")  # 1000, reversed
    assert text(env, 999, 999) == ("999+999=", "8991$")  # 1998, reversed
    assert text(MathEnvironment("multiplier", 2), 99, 99) == ("99*99=", "1089$")  # 9801


def test_lengths_and_vocabulary():
    env = MathEnvironment("adder", 3)
    assert (env.prompt_len, env.answer_len, env.seq_len) == (8, 5, 13)
    assert env.vocab_size == 14 and env.itos[env.end_token] == "$" and env.itos[env.pad_token] == "."
    assert (env.final_start, env.final_slice, env.steps_slice) == (0, slice(0, 5), slice(0, 0))
    mul = MathEnvironment("multiplier", 2)
    assert (mul.prompt_len, mul.answer_len, mul.seq_len) == (6, 5, 11)


@pytest.mark.parametrize("task,ndigit,reverse,work", [("adder", 3, True, False), ("adder", 4, False, False),
                                                      ("multiplier", 2, True, True), ("subtractor", 3, True, False),
                                                      ("multiplier", 3, False, True), ("multiplier", 3, True, False)])
def test_decode_inverts_encode(task, ndigit, reverse, work):
    env = MathEnvironment(task, ndigit, reverse_answer=reverse, show_work=work)
    a, b = env.sample_operands(500, np.random.default_rng(0))
    _, answers = env.encode(a, b)
    for x, y, tokens in zip(a, b, answers):
        assert env.decode_answer(tokens) == OPERATIONS[task].fn(int(x), int(y))


@pytest.mark.parametrize("task,ndigit,work", [("adder", 1, False), ("adder", 9, False), ("subtractor", 9, False),
                                              ("multiplier", 2, True), ("multiplier", 9, True),
                                              ("multiplier", 9, False), ("multiplier_unshifted", 3, True)])
def test_a_vectorized_operation_encodes_what_it_encodes_one_problem_at_a_time(monkeypatch, task, ndigit, work):
    """The built-in operations (and rl/tools/formats.py's) compute their results and steps on whole arrays at once:
    the tokens are those of the same functions called on each pair's Python ints, at the extremes too (every
    digit 9: the largest steps and results, near int64's limit at 9 digits) and for an empty batch."""
    import dataclasses
    from rl import math_env
    from rl.tools import formats
    monkeypatch.setattr(math_env, "OPERATIONS", dict(OPERATIONS))  # (formats' task registered for this test only)
    formats.register()
    env = MathEnvironment(task, ndigit, show_work=work)
    assert env.op.vectorized
    top = 10 ** ndigit - 1
    a, b = env.sample_operands(300, np.random.default_rng(0))
    a, b = np.concatenate([a, [top, top, 0, top // 2]]), np.concatenate([b, [top, 0, 0, top]])
    if env.op.ordered:
        a, b = np.maximum(a, b), np.minimum(a, b)
    vectorized = env.encode(a, b), env.encode(a[:0], b[:0])
    monkeypatch.setattr(env, "op", dataclasses.replace(env.op, vectorized=False))
    for (prompts, answers), (one_by_one, answers_one_by_one) in zip(vectorized, (env.encode(a, b),
                                                                                 env.encode(a[:0], b[:0]))):
        assert torch.equal(prompts, one_by_one) and torch.equal(answers, answers_one_by_one)
    assert vectorized[1][1].shape == (0, env.answer_len) and len(set(map(tuple, vectorized[0][1].tolist()))) > 10


def test_decode_rejects_malformed_answers():
    env = MathEnvironment("adder", 3)
    enc = lambda s: [env.stoi[c] for c in s]
    assert env.decode_answer(enc("8610$")) == 168
    assert env.decode_answer(enc("8610.")) is None  # no end token
    assert env.decode_answer(enc("861$.")) is None  # ended one digit early
    assert env.decode_answer(enc("86+0$")) is None  # a non-digit among the digits
    assert env.describe_mistake(123, 45, enc("9610$")) == "claims 123+45=169, truth 168"


def test_subtraction_never_poses_a_negative_result():
    env = MathEnvironment("subtractor", 2)
    a, b = env.sample_operands(2000, np.random.default_rng(1))
    assert (a >= b).all() and (a > b).any()


# ---- the three splits ----------------------------------------------------------------------------
def test_splits_are_symmetric_disjoint_and_near_their_shares():
    a, b = np.divmod(np.arange(1000 * 1000), 1000)
    split = split_of(a, b, 0.1, 0.05)
    shares = np.bincount(split, minlength=3) / len(split)
    assert abs(shares[2] - 0.1) < 0.005 and abs(shares[1] - 0.05) < 0.005 and abs(shares[0] - 0.85) < 0.005
    assert (split == split_of(b, a, 0.1, 0.05)).all()  # the unordered pair decides
    # the test split is what it always was: only the validation share is carved out of training
    assert ((split == 2) == (split_of(a, b, 0.1, 0.2) == 2)).all()


@pytest.mark.parametrize("task,ndigit,work", [("adder", 3, False), ("multiplier", 2, True), ("subtractor", 2, False),
                                              ("adder", 5, False)])
def test_training_never_samples_validation_or_test_problems(task, ndigit, work):
    env = MathEnvironment(task, ndigit, show_work=work)
    a, b = env.sample_operands(20000, np.random.default_rng(2))
    assert (env.split_of(a, b) == SPLITS.index("train")).all()
    sets = {split: env.eval_operands(1000, split) for split in ("validation", "test")}
    for split, (x, y) in sets.items():
        assert (env.split_of(x, y) == SPLITS.index(split)).all()
    pairs = {name: set(zip(x.tolist(), y.tolist())) for name, (x, y) in {**sets, "train": (a, b)}.items()}
    assert not pairs["train"] & pairs["test"] and not pairs["train"] & pairs["validation"]
    assert not pairs["validation"] & pairs["test"]
    # nor a mirror of one: b, a is in the same split as a, b
    assert not {(y, x) for x, y in pairs["train"]} & (pairs["test"] | pairs["validation"])


@pytest.mark.parametrize("task,ndigit", [("adder", 3), ("adder", 4), ("multiplier", 2)])
def test_eval_sets_are_fixed_whatever_the_seed_and_the_size(task, ndigit):
    for split in ("test", "validation"):
        first = MathEnvironment(task, ndigit, seed=1).eval_operands(1000, split)
        second = MathEnvironment(task, ndigit, seed=2).eval_operands(1000, split)
        assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
        assert len(set(zip(first[0].tolist(), first[1].tolist()))) == len(first[0])  # no duplicates
        small = MathEnvironment(task, ndigit).eval_operands(300, split)  # any num_eval: a prefix
        assert np.array_equal(small[0], first[0][:300]) and np.array_equal(small[1], first[1][:300])


def test_the_operand_space_is_enumerated_once_a_process_and_each_set_is_what_its_rule_gives(monkeypatch):
    """eval_operands and split_size read one enumeration of the operand space and its splits, made once a process
    (the adder's 2-digit space and the multiplier's are one): each evaluation set is every pair of its split in the
    order of a permutation drawn with the split's own seed, and a caller's copy is its own."""
    from rl import math_env
    from rl.math_env import EVAL_SEEDS
    monkeypatch.setattr(math_env, "_ENUMERATED", {})
    calls, real = [], MathEnvironment.all_pairs
    monkeypatch.setattr(MathEnvironment, "all_pairs", lambda self: calls.append(self.task) or real(self))
    x, y = np.divmod(np.arange(10 ** 4), 100)
    for split, env in zip(SPLITS, (MathEnvironment("adder", 2), MathEnvironment("multiplier", 2),
                                   MathEnvironment("adder", 2))):
        a, b = env.eval_operands(50, split)
        keep = split_of(x, y, 0.1, 0.05) == SPLITS.index(split)
        order = np.random.default_rng(EVAL_SEEDS[split]).permutation(int(keep.sum()))[:50]
        assert np.array_equal(a, x[keep][order]) and np.array_equal(b, y[keep][order]), split
        assert env.split_size(split) == keep.sum()
        a[:] = -1  # the caller's own array
        assert np.array_equal(env.eval_operands(50, split)[0], x[keep][order])
    assert calls == ["adder"]  # one enumeration for all of it...
    MathEnvironment("subtractor", 2).eval_operands(50)
    assert calls == ["adder", "subtractor"]  # ...and one for another space (a >= b)


def test_small_space_evaluates_every_pair_of_the_split():
    env = MathEnvironment("multiplier", 2)
    a, b = env.eval_operands(10 ** 6)
    x, y = np.divmod(np.arange(10 ** 4), 100)
    assert len(a) == (split_of(x, y, 0.1, 0.05) == 2).sum()


# ---- new operations ------------------------------------------------------------------------------
def test_a_new_operation_is_one_function():
    @operation("test_max", symbol="m", answer_digits=lambda n: n)
    def biggest(a, b):
        return max(a, b)
    try:
        assert text(MathEnvironment("test_max", 2), 7, 42) == ("07m42=", "24$")
    finally:
        del OPERATIONS["test_max"]


def test_a_new_operation_states_its_steps_in_the_same_place():
    def steps(a, b, n):  # the digit sum of each operand, then the final answer
        return [("", sum(map(int, str(a))), 2), ("&", sum(map(int, str(b))), 2)]

    @operation("test_digitsum", symbol="#", answer_digits=lambda n: 2, steps=steps)
    def digit_sums(a, b):
        return sum(map(int, str(a))) + sum(map(int, str(b)))
    try:
        env = MathEnvironment("test_digitsum", 2, show_work=True)
        assert text(env, 59, 7) == ("59#07=", "41&70=12$")  # 14 & 07 = 21, each reversed
        assert env.itos[-1] == "&" and env.decode_answer(env.encode([59], [7])[1][0]) == 21
    finally:
        del OPERATIONS["test_digitsum"]


def test_an_operation_that_does_not_fit_its_widths_is_refused_when_the_environment_is_made():
    @operation("test_overflow", symbol="^", answer_digits=lambda n: n)
    def power(a, b):
        return a ** 2
    try:
        with pytest.raises(ValueError, match="test_overflow with ndigit=2: a result 100 does not fit 2 non-negative "
                                             "digits; widen it in the operation's definition"):
            MathEnvironment("test_overflow", 2)
    finally:
        del OPERATIONS["test_overflow"]


def test_bad_environment_arguments():
    with pytest.raises(ValueError, match="unknown task 'divider'; known tasks: adder, multiplier, subtractor"):
        MathEnvironment("divider", 2)
    with pytest.raises(ValueError, match="symbol must be one character"):
        operation("bad", symbol="=", answer_digits=lambda n: n)
    with pytest.raises(ValueError, match="task adder defines no steps to show; use show_work=false "
                                         r"\(tasks with steps: multiplier\)"):
        MathEnvironment("adder", 3, show_work=True)
    with pytest.raises(ValueError, match="test_fraction and validation_fraction must be positive and leave a train"):
        MathEnvironment("adder", 3, test_fraction=0.5, validation_fraction=0.5)


def test_original_debug_command_prints_a_problem():
    cmd = "from rl.math_env import MathEnvironment; env = MathEnvironment('adder', 3); print(env.generate_problem())"
    out = subprocess.run([sys.executable, "-c", cmd], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    a_b, result = out.split("=")[0], int(out.split("=")[1].split()[0])
    a, b = map(int, a_b.split("+"))
    assert a + b == result and "prompt" in out and "target" in out
