"""Rule rewards: pure functions of (environment, target answer tokens, generated answer tokens).

Both token tensors have shape (B, A), made by `MathEnvironment` (A = env.answer_len); a reward
returns a float tensor (B,). Nothing here parses numbers: the environment wrote the target in the
token format the policy must produce and names the positions of each part (`final_slice`,
`steps_slice`), so comparing tokens position by position is comparing answers.

    exact_match    1 if the final answer is right: its digits and the end token, and the "=" before
                   it when the work is shown; the steps are not read (the default, and the headline)
    steps          1 if every token of the shown work is right (needs show_work=true)
    digit_match    share of the final answer's digits that are right (partial credit)
    format         1 if every position holds the kind of token the target has there (a digit where
                   a digit belongs, each separator and the end token in its place), whatever the values

A config names the rewards it uses with weights, e.g. "exact_match:1.0,format:0.1"; the
trainer's reward is the weighted sum, and each component's mean is logged as reward/<name>.
"""

import torch


def exact_match(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    final = env.final_slice
    return (generated[:, final] == target[:, final]).all(dim=1).float()


def steps_match(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    steps = env.steps_slice
    return (generated[:, steps] == target[:, steps]).all(dim=1).float()


def digit_match(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    digits = slice(env.final_start, env.answer_len - 1)
    return (generated[:, digits] == target[:, digits]).float().mean(dim=1)


def format_reward(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    digit_wanted = env.is_digit(target)
    right_kind = torch.where(digit_wanted, env.is_digit(generated), generated == target)
    return right_kind.all(dim=1).float()


REWARDS = {"exact_match": exact_match, "steps": steps_match, "digit_match": digit_match, "format": format_reward}


def parse_reward_spec(spec: str, show_work: bool = True) -> dict:
    """'exact_match:1.0,format:0.1' -> {'exact_match': 1.0, 'format': 0.1}; ValueError if malformed."""
    weights = {}
    for item in spec.split(","):
        name, _, weight = item.strip().partition(":")
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r} in rewards={spec!r}; known rewards: {', '.join(REWARDS)}")
        if name == "steps" and not show_work:
            raise ValueError(f"reward 'steps' scores the shown work, but show_work is false; "
                             f"drop it from rewards={spec!r} or set --show_work=true")
        try:
            weights[name] = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"reward weight for {name!r} must be a number, got {weight!r}") from None
        if not torch.isfinite(torch.tensor(weights[name])):
            raise ValueError(f"reward weight for {name!r} must be finite, got {weight!r}")
    return weights


def compute_rewards(weights: dict, env, target: torch.Tensor, generated: torch.Tensor):
    """Weighted sum of the named rewards (B,), and each component (B,) by name for logging."""
    components = {name: REWARDS[name](env, target, generated) for name in weights}
    total = sum(w * components[name] for name, w in weights.items())
    return total, components
