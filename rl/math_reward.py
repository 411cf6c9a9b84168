"""Rule rewards: pure functions of (target answer tokens, generated answer tokens).

Both arguments are token tensors of shape (B, A) made by `MathEnvironment` (A = answer digits + 1
end token); a reward returns a float tensor (B,). Nothing here parses numbers: the environment
wrote the target in the same token format the policy must produce, so comparing tokens position
by position is comparing answers.

    exact_match    1 if every digit and the end token are right, else 0 (the default)
    digit_match    share of the answer's digit positions that are right (partial credit)
    format         1 if the answer is A-1 digits followed by the end token, whatever their values

A config names the rewards it uses with weights, e.g. "exact_match:1.0,format:0.1"; the
trainer's reward is the weighted sum, and each component's mean is logged as reward/<name>.
"""

import torch

NUM_DIGIT_TOKENS = 10  # token ids 0..9 are the digits (see MathEnvironment.itos)


def exact_match(target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    return (generated == target).all(dim=1).float()


def digit_match(target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    return (generated[:, :-1] == target[:, :-1]).float().mean(dim=1)


def format_reward(target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    digits_ok = (generated[:, :-1] < NUM_DIGIT_TOKENS).all(dim=1)
    return (digits_ok & (generated[:, -1] == target[:, -1])).float()


REWARDS = {"exact_match": exact_match, "digit_match": digit_match, "format": format_reward}


def parse_reward_spec(spec: str) -> dict:
    """'exact_match:1.0,format:0.1' -> {'exact_match': 1.0, 'format': 0.1}; ValueError if malformed."""
    weights = {}
    for item in spec.split(","):
        name, _, weight = item.strip().partition(":")
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r} in rewards={spec!r}; known rewards: {', '.join(REWARDS)}")
        try:
            weights[name] = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"reward weight for {name!r} must be a number, got {weight!r}") from None
        if not torch.isfinite(torch.tensor(weights[name])):
            raise ValueError(f"reward weight for {name!r} must be finite, got {weight!r}")
    return weights


def compute_rewards(weights: dict, target: torch.Tensor, generated: torch.Tensor):
    """Weighted sum of the named rewards (B,), and each component (B,) by name for logging."""
    components = {name: REWARDS[name](target, generated) for name in weights}
    total = sum(w * components[name] for name, w in weights.items())
    return total, components
