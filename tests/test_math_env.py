"""Task format, carries, answer parsing and the held-out split.  Run: python -m pytest tests/test_math_env.py"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rl.math_env import OPERATIONS, MathEnvironment, is_test_pair, operation


def text(env, a, b):
    prompt, answer = env.encode([a], [b])
    return env.decode_text(prompt[0]), env.decode_text(answer[0])


def test_worked_examples_of_the_docstring():
    assert text(MathEnvironment("adder", 3), 123, 45) == ("123+045=", "8610$")
    assert text(MathEnvironment("adder", 3, reverse_answer=False), 123, 45) == ("123+045=", "0168$")
    assert text(MathEnvironment("multiplier", 2), 12, 34) == ("12*34=", "8040$")
    assert text(MathEnvironment("subtractor", 3), 123, 45) == ("123-045=", "870$")
    assert text(MathEnvironment("adder", 3, use_format=False), 123, 45) == ("123045", "8610$")


def test_carries_reach_the_extra_digit():
    env = MathEnvironment("adder", 3)
    assert text(env, 999, 1) == ("999+001=", "0001$")  # 1000, reversed
    assert text(env, 999, 999) == ("999+999=", "8991$")  # 1998, reversed
    assert text(MathEnvironment("multiplier", 2), 99, 99) == ("99*99=", "1089$")  # 9801


def test_lengths_and_vocabulary():
    env = MathEnvironment("adder", 3)
    assert (env.prompt_len, env.answer_len, env.seq_len) == (8, 5, 13)
    assert env.vocab_size == 14 and env.itos[env.end_token] == "$" and env.itos[env.pad_token] == "."
    mul = MathEnvironment("multiplier", 2)
    assert (mul.prompt_len, mul.answer_len, mul.seq_len) == (6, 5, 11)


@pytest.mark.parametrize("task,ndigit,reverse", [("adder", 3, True), ("adder", 4, False), ("multiplier", 2, True),
                                                 ("subtractor", 3, True), ("multiplier", 3, False)])
def test_decode_inverts_encode(task, ndigit, reverse):
    env = MathEnvironment(task, ndigit, reverse_answer=reverse)
    a, b = env.sample_operands(500, np.random.default_rng(0))
    _, answers = env.encode(a, b)
    for x, y, tokens in zip(a, b, answers):
        assert env.decode_answer(tokens) == OPERATIONS[task].fn(int(x), int(y))


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


def test_split_is_symmetric_and_near_the_requested_share():
    a, b = np.divmod(np.arange(1000 * 1000), 1000)
    test = is_test_pair(a, b, 0.1)
    assert abs(test.mean() - 0.1) < 0.005
    assert (test == is_test_pair(b, a, 0.1)).all()


@pytest.mark.parametrize("task,ndigit", [("adder", 3), ("multiplier", 2), ("subtractor", 2)])
def test_training_never_samples_held_out_problems(task, ndigit):
    env = MathEnvironment(task, ndigit)
    a, b = env.sample_operands(20000, np.random.default_rng(2))
    assert not is_test_pair(a, b, env.test_fraction).any()
    ea, eb = env.eval_operands(1000)
    assert is_test_pair(ea, eb, env.test_fraction).all()
    train = set(zip(a.tolist(), b.tolist()))
    assert not train & set(zip(ea.tolist(), eb.tolist()))


def test_eval_set_is_fixed_whatever_the_run_seed():
    first = MathEnvironment("adder", 3, seed=1).eval_operands(1000)
    second = MathEnvironment("adder", 3, seed=2).eval_operands(1000)
    assert len(first[0]) == 1000
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert len(set(zip(first[0].tolist(), first[1].tolist()))) == 1000  # no duplicates


def test_small_space_evaluates_every_held_out_pair():
    env = MathEnvironment("multiplier", 2)
    a, b = env.eval_operands(10 ** 6)
    x, y = np.divmod(np.arange(10 ** 4), 100)
    assert len(a) == is_test_pair(x, y, 0.1).sum()


def test_a_new_operation_is_one_function():
    @operation("test_max", symbol="m", answer_digits=lambda n: n)
    def biggest(a, b):
        return max(a, b)
    try:
        assert text(MathEnvironment("test_max", 2), 7, 42) == ("07m42=", "24$")
    finally:
        del OPERATIONS["test_max"]


def test_bad_environment_arguments():
    with pytest.raises(ValueError, match="unknown task 'divider'; known tasks: adder, multiplier, subtractor"):
        MathEnvironment("divider", 2)
    with pytest.raises(ValueError, match="symbol must be one character"):
        operation("bad", symbol="=", answer_digits=lambda n: n)


def test_original_debug_command_prints_a_problem():
    cmd = "from rl.math_env import MathEnvironment; env = MathEnvironment('adder', 3); print(env.generate_problem())"
    out = subprocess.run([sys.executable, "-c", cmd], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    a_b, result = out.split("=")[0], int(out.split("=")[1].split()[0])
    a, b = map(int, a_b.split("+"))
    assert a + b == result and "prompt" in out and "target" in out
