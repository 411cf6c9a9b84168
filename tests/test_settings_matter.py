"""Every setting matters or is refused: for every algorithm row and every option that shapes the
update, either the config is refused before start (one line naming the option), or changing the
option changes the gradients of the first three RL steps (a KL term's gradient is 0 while the
policy still equals the reference it starts from, so step 1 cannot show it; the moving-average
baseline starts at step 1's mean reward and is that mean at step 2 whatever its momentum, so only
step 3 shows baseline_momentum). A new algorithm or option that is
silently ignored fails here. Run: python -m pytest tests/test_settings_matter.py"""

import pytest
import torch

from configs.base import ConfigError
from helpers import capture_gradients, make_config, make_trainer
from rl.algorithms import AGGREGATIONS, ALGORITHMS

BASE = {name: dict(rl_algorithm=name) for name in ALGORITHMS}
# rft learns only from exactly right answers: a policy that writes some (trained below) on a task it can
BASE["rft"].update(ndigit=1, n_embed=64, rewards="exact_match:1.0")


def other(value, choices):
    return next(c for c in choices if c != value)


def changes(algorithm: str) -> dict:
    """Each option, set to a value that differs from the row's (or the default)."""
    row = ALGORITHMS[algorithm]
    return {
        "kl k1": dict(kl_coef=0.5, kl_estimator="k1"), "kl k2": dict(kl_coef=0.5, kl_estimator="k2"),
        "kl k3": dict(kl_coef=0.5, kl_estimator="k3"), "entropy_coef": dict(entropy_coef=0.1),
        "clip_low": dict(clip_low=0.001), "clip_high": dict(clip_high=0.001), "ppo_epochs": dict(ppo_epochs=3),
        "ppo_minibatches": dict(ppo_minibatches=4),
        "loss_aggregation": dict(loss_aggregation=other(row["loss_aggregation"], AGGREGATIONS)),
        "advantage_mode": dict(advantage_mode=other(row["advantage_mode"], ("baseline", "group_mean"))),
        "rewards": dict(rewards="digit_match:1.0,format:1.0"),
        "baseline_momentum": dict(baseline_momentum=0.5), "dpo_beta": dict(dpo_beta=0.5),
        "gamma": dict(gamma=0.5), "gae_lambda": dict(gae_lambda=0.5), "value_clip": dict(value_clip=0.001),
        "critic_learning_rate": dict(critic_learning_rate=1e-2),
    }


_rft_weights = {}


def gradients(algorithm: str, **option) -> list:
    """The gradients (policy and critic) of every optimizer step of the first three RL steps."""
    trainer = make_trainer(**{**BASE[algorithm], **option})
    if algorithm == "rft":
        if not _rft_weights:
            from test_trainer import supervised
            supervised(trainer, steps=300)
            _rft_weights.update({k: v.clone() for k, v in trainer.model.state_dict().items()})
        trainer.model.load_state_dict(_rft_weights)
    grads = capture_gradients(trainer)
    for _ in range(3):
        trainer.train_step()
    return grads


def differ(a: list, b: list) -> bool:
    return len(a) != len(b) or any(not torch.equal(x, y) for step_a, step_b in zip(a, b) for x, y in zip(step_a, step_b))


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_every_option_changes_the_update_or_is_refused(algorithm):
    base = gradients(algorithm)
    assert any(g.abs().sum() > 0 for step in base for g in step), "the base case trains on nothing"
    silent, refused = [], []
    for name, option in changes(algorithm).items():
        try:
            make_config(**{**BASE[algorithm], **option})
        except ConfigError as e:
            assert any(key in str(e) for key in option), f"{name}: the refusal does not name it: {e}"
            refused.append(name)
            continue
        if not differ(base, gradients(algorithm, **option)):
            silent.append(name)
    assert silent == [], f"{algorithm}: accepted but changed nothing: {silent} (refused: {refused})"
