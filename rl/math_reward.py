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

A config names the rewards it uses with weights, e.g. "exact_match:1.0,format:0.1" (each once, each
weight positive); the trainer's reward is the weighted sum, and each component's mean is logged as
reward/<name>.
"""

import torch


def exact_match(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    final = env.final_slice
    return (generated[:, final] == target[:, final]).all(dim=1).float()


def steps_match(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    steps = env.steps_slice
    return (generated[:, steps] == target[:, steps]).all(dim=1).float()


def final_digits(env) -> slice:
    """The final answer's digits among the answer tokens: from final_start, answer_digits of them (then the end
    token, where the answer has one)."""
    return slice(env.final_start, env.final_start + env.answer_digits)


def digit_match(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    digits = final_digits(env)
    return (generated[:, digits] == target[:, digits]).float().mean(dim=1)


def format_reward(env, target: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    digit_wanted = env.is_digit(target)
    right_kind = torch.where(digit_wanted, env.is_digit(generated), generated == target)
    return right_kind.all(dim=1).float()


REWARDS = {"exact_match": exact_match, "steps": steps_match, "digit_match": digit_match, "format": format_reward}


def parse_reward_spec(spec: str, show_work: bool = True) -> dict:
    """'exact_match:1.0,format:0.1' -> {'exact_match': 1.0, 'format': 0.1} (a bare name weighs 1.0);
    ValueError (one line) if malformed. Each reward is named once, with a positive weight: a second
    mention would silently replace the first, a zero weight turns the reward off (drop it instead),
    and a negative one pays the policy for wrong answers."""
    if not spec.strip():
        raise ValueError("rewards is empty; name at least one reward, e.g. rewards=exact_match:1.0")
    weights = {}
    for item in spec.split(","):
        name, colon, weight = (part.strip() for part in item.partition(":"))
        if not name and not colon:
            raise ValueError(f"rewards={spec!r} has an empty item; remove the extra comma")
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r} in rewards={spec!r}; known rewards: {', '.join(REWARDS)}")
        if name == "steps" and not show_work:
            raise ValueError(f"reward 'steps' scores the shown work, but show_work is false; "
                             f"drop it from rewards={spec!r} or set --show_work=true")
        if name in weights:
            raise ValueError(f"reward {name!r} is named twice in rewards={spec!r}; name each reward once, with "
                             f"its weight")
        if colon and not weight:
            raise ValueError(f"reward weight for {name!r} is empty in rewards={spec!r}; write {name}:WEIGHT, "
                             f"or {name} alone for 1.0")
        try:
            weights[name] = float(weight) if colon else 1.0
        except ValueError:
            raise ValueError(f"reward weight for {name!r} must be a number, got {weight!r}") from None
        if not torch.isfinite(torch.tensor(weights[name])):
            raise ValueError(f"reward weight for {name!r} must be finite, got {weight!r}")
        if weights[name] <= 0:
            raise ValueError(f"reward weight for {name!r} must be positive, got {weight!r} in rewards={spec!r}; "
                             f"to turn a reward off, drop it from rewards")
    return weights


def compute_rewards(weights: dict, env, target: torch.Tensor, generated: torch.Tensor):
    """Weighted sum of the named rewards (B,), and each component (B,) by name for logging."""
    components = {name: REWARDS[name](env, target, generated) for name in weights}
    total = sum(w * components[name] for name, w in weights.items())
    return total, components
