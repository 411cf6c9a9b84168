"""Reward cases on hand-written answers.  Run: python -m pytest tests/test_reward.py"""

import pytest
import torch

from rl.math_env import MathEnvironment
from rl.math_reward import compute_rewards, digit_match, exact_match, format_reward, parse_reward_spec

ENV = MathEnvironment("adder", 3)


def tok(*answers):
    return torch.tensor([[ENV.stoi[c] for c in s] for s in answers])


TARGET = "8610$"  # 123 + 45 = 168, reversed and terminated
CASES = {  # generated: (exact_match, digit_match, format)
    "8610$": (1.0, 1.0, 1.0),
    "8611$": (0.0, 0.75, 1.0),   # one wrong digit
    "8610.": (0.0, 1.0, 0.0),    # right digits, never terminated
    "861$.": (0.0, 0.75, 0.0),   # stopped one digit early
    "0000$": (0.0, 0.25, 1.0),   # well formed, one digit right by chance
    "=+$..": (0.0, 0.0, 0.0),
}


@pytest.mark.parametrize("generated", list(CASES))
def test_each_reward_on_hand_made_answers(generated):
    target, gen = tok(TARGET), tok(generated)
    expected = CASES[generated]
    assert exact_match(target, gen).item() == expected[0]
    assert digit_match(target, gen).item() == expected[1]
    assert format_reward(target, gen).item() == expected[2]


def test_weighted_sum_and_components():
    gens = list(CASES)
    target, gen = tok(*[TARGET] * len(gens)), tok(*gens)
    total, parts = compute_rewards({"exact_match": 1.0, "format": 0.5}, target, gen)
    expected = torch.tensor([CASES[g][0] + 0.5 * CASES[g][2] for g in gens])
    assert torch.equal(total, expected)
    assert set(parts) == {"exact_match", "format"}
    assert torch.equal(parts["format"], torch.tensor([CASES[g][2] for g in gens]))


def test_reward_spec_parsing():
    assert parse_reward_spec("exact_match") == {"exact_match": 1.0}
    assert parse_reward_spec("exact_match:1.0, digit_match:0.25") == {"exact_match": 1.0, "digit_match": 0.25}
    with pytest.raises(ValueError, match="unknown reward 'exact' in rewards='exact:1'; known rewards: exact_match, digit_match, format"):
        parse_reward_spec("exact:1")
    with pytest.raises(ValueError, match="reward weight for 'format' must be a number, got 'x'"):
        parse_reward_spec("format:x")
    with pytest.raises(ValueError, match="must be finite"):
        parse_reward_spec("format:nan")
