"""Reward cases on hand-written answers.  Run: python -m pytest tests/test_reward.py"""

import pytest
import torch

from rl.math_env import MathEnvironment
from rl.math_reward import compute_rewards, digit_match, exact_match, format_reward, parse_reward_spec, steps_match

ENV = MathEnvironment("adder", 3)
WORK = MathEnvironment("multiplier", 2, show_work=True)


def tok(env, *answers):
    return torch.tensor([[env.stoi[c] for c in s] for s in answers])


TARGET = "8610$"  # 123 + 45 = 168, reversed and terminated
CASES = {  # generated: (exact_match, digit_match, format)
    "8610$": (1.0, 1.0, 1.0),
    "8611$": (0.0, 0.75, 1.0),   # one wrong digit
    "8610.": (0.0, 1.0, 0.0),    # right digits, never terminated
    "861$.": (0.0, 0.75, 0.0),   # stopped one digit early
    "0000$": (0.0, 0.25, 1.0),   # well formed, one digit right by chance
    "86+0$": (0.0, 0.75, 0.0),   # a symbol where a digit belongs, everything else in place
    "=+$..": (0.0, 0.0, 0.0),
}


@pytest.mark.parametrize("generated", list(CASES))
def test_each_reward_on_hand_made_answers(generated):
    target, gen = tok(ENV, TARGET), tok(ENV, generated)
    expected = CASES[generated]
    assert exact_match(ENV, target, gen).item() == expected[0]
    assert digit_match(ENV, target, gen).item() == expected[1]
    assert format_reward(ENV, target, gen).item() == expected[2]


WORK_TARGET = "840+0630=8040$"  # 12 * 34: 48, 360, then 408
WORK_CASES = {  # generated: (exact_match, steps, digit_match, format)
    "840+0630=8040$": (1.0, 1.0, 1.0, 1.0),
    "840+0730=8040$": (1.0, 0.0, 1.0, 1.0),   # a wrong step, the right final answer: exact match reads only the answer
    "840+0630=8140$": (0.0, 1.0, 0.75, 1.0),  # every step right, a wrong final answer
    "840+0630+8040$": (0.0, 1.0, 1.0, 0.0),   # the final answer's digits, but no '=' before them
    "8400+630=8040$": (1.0, 0.0, 1.0, 0.0),   # the separator misplaced inside the work: a format error
    "840+0630=8040.": (0.0, 1.0, 1.0, 0.0),   # never ended
}


@pytest.mark.parametrize("generated", list(WORK_CASES))
def test_rewards_with_shown_work(generated):
    target, gen = tok(WORK, WORK_TARGET), tok(WORK, generated)
    expected = WORK_CASES[generated]
    got = tuple(f(WORK, target, gen).item() for f in (exact_match, steps_match, digit_match, format_reward))
    assert got == expected


def test_weighted_sum_and_components():
    gens = list(CASES)
    target, gen = tok(ENV, *[TARGET] * len(gens)), tok(ENV, *gens)
    total, parts = compute_rewards({"exact_match": 1.0, "format": 0.5}, ENV, target, gen)
    expected = torch.tensor([CASES[g][0] + 0.5 * CASES[g][2] for g in gens])
    assert torch.equal(total, expected)
    assert set(parts) == {"exact_match", "format"}
    assert torch.equal(parts["format"], torch.tensor([CASES[g][2] for g in gens]))


def test_reward_spec_parsing():
    assert parse_reward_spec("exact_match") == {"exact_match": 1.0}
    assert parse_reward_spec("exact_match:1.0, digit_match:0.25") == {"exact_match": 1.0, "digit_match": 0.25}
    assert parse_reward_spec("exact_match,steps:0.2", show_work=True) == {"exact_match": 1.0, "steps": 0.2}
    with pytest.raises(ValueError, match="unknown reward 'exact' in rewards='exact:1'; known rewards: exact_match, "
                                         "steps, digit_match, format"):
        parse_reward_spec("exact:1")
    with pytest.raises(ValueError, match="reward weight for 'format' must be a number, got 'x'"):
        parse_reward_spec("format:x")
    with pytest.raises(ValueError, match="must be finite"):
        parse_reward_spec("format:nan")
    with pytest.raises(ValueError, match="reward 'steps' scores the shown work, but show_work is false"):
        parse_reward_spec("exact_match,steps", show_work=False)
    assert parse_reward_spec(" exact_match : 0.5 ") == {"exact_match": 0.5}  # spaces around a name or weight


@pytest.mark.parametrize("spec,message", [
    ("exact_match:1.0,", "rewards='exact_match:1.0,' has an empty item; remove the extra comma"),
    ("exact_match,,format", "rewards='exact_match,,format' has an empty item; remove the extra comma"),
    ("", "rewards is empty; name at least one reward, e.g. rewards=exact_match:1.0"),
    ("exact_match:1.0,exact_match:0.5", "reward 'exact_match' is named twice in rewards='exact_match:1.0,"
                                        "exact_match:0.5'; name each reward once, with its weight"),
    ("exact_match,format:0.1,exact_match", "reward 'exact_match' is named twice in rewards='exact_match,format:0.1,"
                                           "exact_match'; name each reward once, with its weight"),
    ("exact_match:1.0,format:0", "reward weight for 'format' must be positive, got '0' in rewards='exact_match:1.0,"
                                 "format:0'; to turn a reward off, drop it from rewards"),
    ("exact_match:-1", "reward weight for 'exact_match' must be positive, got '-1' in rewards='exact_match:-1'; "
                       "to turn a reward off, drop it from rewards"),
    ("exact_match:", "reward weight for 'exact_match' is empty in rewards='exact_match:'; write "
                     "exact_match:WEIGHT, or exact_match alone for 1.0"),
])
def test_a_malformed_reward_spec_is_one_line(spec, message):
    """Each reward named once with a positive weight: a repeat would silently replace the first weight, a
    zero weight turns the reward off unseen, a trailing comma is a typo."""
    with pytest.raises(ValueError) as e:
        parse_reward_spec(spec)
    assert str(e.value) == message
