"""Every setting matters or is refused: for every algorithm row and every option that shapes the
update, either the config is refused before start (one line naming the option), or changing the
option changes the gradients of the first three RL steps (a KL term's gradient is 0 while the
policy still equals the reference it starts from, so step 1 cannot show it; the moving-average
baseline starts at step 1's mean reward and is that mean at step 2 whatever its momentum, so only
step 3 shows baseline_momentum). The same holds for what comes before the update: each problem
sampler's settings change the problems drawn in the first three steps, dynamic sampling's rounds
the answers generated, and the warm start's settings the weights it ends with. A new algorithm or
option that is silently ignored fails here. Run: python -m pytest tests/test_settings_matter.py"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from configs.base import ConfigError
from helpers import capture_gradients, make_config, make_trainer
from rl import warm_start
from rl.algorithms import AGGREGATIONS, ALGORITHMS
from rl.dist import DistInfo
from rl.problem_sampler import PROBLEM_SAMPLERS
from rl.warm_start import WARM_START_FIELDS

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


# ---- before the update: the problems drawn, dynamic sampling's rounds, the warm start -------------
# a task small enough (83 training pairs) for a problem to come back within three steps
SAMPLING = dict(ndigit=1, rl_algorithm="grpo")
SAMPLER_OPTIONS = {"priority_floor": 0.5, "priority_decay": 0.9, "replay_share": 0.0, "replay_capacity": 1,
                   "length_floor": 0.5, "length_decay": 0.0}
OWN = {"uniform": [], "prioritized": ["priority_floor", "priority_decay"],
       "replay": ["replay_share", "replay_capacity"], "lengths": ["length_floor", "length_decay"]}
# the length curriculum draws operand lengths: the task of many lengths, 1-6 digits
TASK_OF = {"lengths": dict(rl_ndigits="1-6", positions="coupled", max_position_offset=9)}


def sampling(**settings) -> tuple:
    """The problems (pair keys) each of the first three RL steps drew, over all its sampling rounds,
    and the answers each generated."""
    trainer = make_trainer(**settings)
    if settings.get("problem_sampler") == "prioritized":
        # as a run would have it some steps in: every training pair seen once, its pass rate one of
        # 0, 1/G, ..., 1 (a policy from scratch solves none, and equal estimates draw uniformly)
        sampler, G = trainer.problem_sampler, trainer.config.rl_rollout_size
        sampler.observe(sampler.keys, sampler.keys % (G + 1), G)
    if settings.get("problem_sampler") == "lengths":
        # likewise: every width seen, some solved, some half, some not at all
        sampler = trainer.problem_sampler
        sampler.right[:] = [40.0, 30.0, 20.0, 10.0, 0.0, 0.0]
        sampler.wrong[:] = 40.0 - sampler.right
        sampler.G = trainer.config.rl_rollout_size
    keys, answers, collect = [], [], trainer.rollouts.collect

    def spy(step, num_prompts):
        first, batch, stats = collect(step, num_prompts)
        keys.append(np.concatenate(stats.keys).tolist()), answers.append(stats.answers)
        return first, batch, stats
    trainer.rollouts.collect = spy
    for _ in range(3):
        trainer.train_step()
    return keys, answers


@pytest.mark.parametrize("sampler", PROBLEM_SAMPLERS)
def test_every_sampler_setting_changes_the_problems_drawn_or_is_refused(sampler):
    base, accepted, silent = None, [], []
    task = TASK_OF.get(sampler, {})
    for name, value in SAMPLER_OPTIONS.items():
        option = {**SAMPLING, **task, "problem_sampler": sampler, name: value}
        try:
            make_config(**option)
        except ConfigError as e:
            assert name in str(e), f"{name}: the refusal does not name it: {e}"
            continue
        accepted.append(name)
        base = base or sampling(**SAMPLING, **task, problem_sampler=sampler)[0]
        if sampling(**option)[0] == base:
            silent.append(name)
    assert accepted == OWN[sampler] and silent == [], f"{sampler}: accepted {accepted}, changed nothing: {silent}"


@pytest.mark.parametrize("algorithm", [*ALGORITHMS, "grpo --dynamic_sampling=true"])
def test_dynamic_sampling_rounds_change_the_answers_generated_or_are_refused(algorithm):
    """From scratch every group is all wrong under exact match, so dynamic sampling refills every round."""
    name, *extra = algorithm.split()
    base = dict(rl_algorithm=name, rewards="exact_match:1.0", dynamic_sampling=True if extra else None,
                rl_batch_size=4)  # refill rounds of 16 prompts
    option = dict(base, dynamic_sampling_max_rounds=0)
    try:
        make_config(**option)
    except ConfigError as e:
        assert not make_config(**base).dynamic_sampling and "dynamic_sampling_max_rounds" in str(e), str(e)
        return
    assert make_config(**base).dynamic_sampling, f"{algorithm}: accepted without dynamic sampling"
    assert sampling(**base)[1] != sampling(**option)[1]


# A warm start that stops at step 5: its scripted validation accuracy climbs 0.1 a step (rounded down
# to what sft_num_eval problems can score), the check every 4 steps finds 0.4, then checks every step
# from half the target 0.5. Each option moves the stop, or what the steps train on.
WARM = dict(init_from="sft", sft_max_steps=12, sft_batch_size=16, sft_eval_interval=4, sft_target_accuracy=0.5,
            sft_num_eval=20, sft_warmup_steps=1)  # (a decaying rate shows only past warmup)
WARM_OPTIONS = {"sft_max_steps": 4, "sft_batch_size": 8, "sft_learning_rate": 3e-3, "sft_warmup_steps": 2,
                "sft_target_accuracy": 0.7, "sft_eval_interval": 6, "sft_num_eval": 3, "sft_patience": 2,
                "sft_worked_examples": 64, "sft_min_lr_ratio": 0.1, "dropout": 0.1, "sft_seed": 3}
# settings of the warm start that by design leave its weights alone (still refused without one)
WARM_RUN_SETTINGS = {"sft_save_interval": "when progress is saved; a continued warm start equals an uninterrupted "
                                          "one (tests/test_warm_start.py)",
                     "sft_pad_steps": "the padded phase's length, refused without sft_pad_ndigits; with it, another "
                                      "length retrains that phase (tests/test_long.py)"}
# settings of the warm start that change its weights only with sft_pad_ndigits (tests/test_long.py), refused without
WARM_PADDED_OPTIONS = {"sft_first_pad_share": 0.5, "sft_first_pad_from": 0.5}


def test_every_warm_start_setting_changes_its_weights_or_is_refused(tmp_path, monkeypatch):
    assert sorted([*WARM_OPTIONS, *WARM_RUN_SETTINGS, *WARM_PADDED_OPTIONS]) == sorted([*WARM_START_FIELDS, "dropout"])
    steps = []
    real_step = warm_start.supervised_step
    monkeypatch.setattr(warm_start, "supervised_step", lambda *a, **kw: steps.append(a[-1]) or real_step(*a, **kw))
    # the accuracy a check on len(a) problems would see after the steps taken: tenths, rounded down
    monkeypatch.setattr(warm_start, "evaluate", lambda model, env, a, b, info, **kw: SimpleNamespace(
        accuracy=len(a) * min(len(steps), 10) // 10 / len(a)))

    def weights(**option):
        steps.clear()
        trainer = make_trainer(out_dir=str(tmp_path / str(len(list(tmp_path.iterdir())))), **{**WARM, **option})
        warm_start.init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
        return trainer.model.state_dict()

    base = weights()
    assert len(steps) == 5
    silent = []
    for name, value in {**WARM_OPTIONS, **{name: 7 for name in WARM_RUN_SETTINGS}, **WARM_PADDED_OPTIONS}.items():
        for start in (dict(init_from="scratch"), dict(init_from="sft", sft_max_steps=0)):  # no warm start: refused
            if name != "sft_max_steps" or start["init_from"] == "scratch":
                with pytest.raises(ConfigError, match=f"^{name}={value} has no effect here: it "):
                    make_config(**start, **{name: value})
        if name in WARM_OPTIONS and all(torch.equal(base[k], v) for k, v in weights(**{name: value}).items()):
            silent.append(name)
    assert silent == [], f"accepted but the warm start's weights did not change: {silent}"
