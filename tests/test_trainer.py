"""The RL step under every algorithm switch, in-process on a tiny model.
Run: python -m pytest tests/test_trainer.py"""

import math

import pytest
import torch

from helpers import make_trainer
from rl.algorithms import ALGORITHMS, answer_mask
from rl.math_trainer import group_all_equal, lr_lambda


def weights(trainer):
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def test_learning_rate_schedule_by_hand():
    f = lambda s: lr_lambda(s, warmup_steps=4, total_steps=12, min_lr_ratio=0.1)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert math.isclose(f(8), 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # halfway through the decay
    assert math.isclose(f(12), 0.1) and math.isclose(f(50), 0.1)
    trainer = make_trainer(warmup_steps=4, rl_train_steps=12, learning_rate=1e-3)
    lrs = [trainer.train_step()["train/lr"] for _ in range(5)]
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3 * f(4)])


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_each_algorithm_resolves_its_settings_and_learns_something(algorithm):
    trainer = make_trainer(rl_algorithm=algorithm)
    for key, value in ALGORITHMS[algorithm].items():
        assert getattr(trainer.config, key) == value, key
    before = weights(trainer)
    metrics = trainer.train_step()
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert all(math.isfinite(v) for v in metrics.values())
    assert trainer.optimizer.state_dict()["state"][0]["step"].item() == trainer.config.ppo_epochs * trainer.config.ppo_minibatches


def test_explicit_settings_win_over_the_algorithm_table():
    trainer = make_trainer(rl_algorithm="dapo", clip_high=0.5, advantage_mode="rloo")
    assert (trainer.config.clip_high, trainer.config.advantage_mode, trainer.config.clip_low) == (0.5, "rloo", 0.2)


def test_micro_batches_do_not_change_the_update():
    one, two = make_trainer(rl_ga_steps=1), make_trainer(rl_ga_steps=4)
    m1, m2 = one.train_step(), two.train_step()
    for k, v in weights(one).items():
        assert torch.allclose(v, two.model.state_dict()[k], atol=1e-6), k
    assert m1["train/policy_loss"] == pytest.approx(m2["train/policy_loss"], abs=1e-6)


def test_skipping_zero_advantage_answers_does_not_change_the_update():
    # digit_match from scratch: some groups' answers all score the same (advantage 0), some not
    skip, full = make_trainer(rl_algorithm="grpo"), make_trainer(rl_algorithm="grpo")
    full.skip_zero_advantage = False
    ms, mf = skip.train_step(), full.train_step()
    assert 0.0 < ms["train/skipped_share"] < 1.0 and mf["train/skipped_share"] == 0.0
    for k, v in weights(skip).items():
        assert torch.allclose(v, full.model.state_dict()[k], atol=1e-6), k


def test_ppo_takes_epochs_times_minibatches_updates_off_policy():
    trainer = make_trainer(rl_algorithm="ppo", ppo_epochs=3, ppo_minibatches=2, learning_rate=3e-3)
    metrics = trainer.train_step()
    assert trainer.optimizer.state_dict()["state"][0]["step"].item() == 6
    # after the first minibatch the policy has moved, so ratios leave 1 and clipping can engage
    assert metrics["train/ratio_mean"] != 1.0
    single = make_trainer(rl_algorithm="ppo", ppo_epochs=1, ppo_minibatches=1).train_step()
    assert single["train/ratio_mean"] == 1.0 and single["train/clip_high_frac"] == 0.0


def test_dynamic_sampling_refills_groups_without_signal():
    trainer = make_trainer(rl_algorithm="dapo", rewards="digit_match:1.0", dynamic_sampling_max_rounds=10)
    G = trainer.config.rl_rollout_size
    first, batch, rounds = trainer.rollout(0)
    assert len(batch["rewards"]) == len(first["rewards"])  # refilled to the full batch
    assert group_all_equal(first["rewards"], G).sum() > 0 and rounds > 1
    assert group_all_equal(batch["rewards"], G).sum() == 0
    # Each refill asks for as many prompts as the share kept so far says it needs, plus 25%.
    asked, sample_operands = [], trainer.env.sample_operands
    trainer.env.sample_operands = lambda n, rng: asked.append(n) or sample_operands(n, rng)
    first, _, _ = trainer.rollout(1)
    P, kept = trainer.local_prompts, int((~group_all_equal(first["rewards"], G)).sum())
    assert asked[:2] == [P, min(math.ceil(1.25 * (P - kept) * P / kept), 4 * P)]
    # From scratch every exact-match reward is 0: no group has signal, the rounds run out and the
    # batch is topped up with dropped groups (advantage 0), keeping its size.
    hopeless = make_trainer(rl_algorithm="dapo", rewards="exact_match:1.0", dynamic_sampling_max_rounds=2)
    first, batch, rounds = hopeless.rollout(0)
    assert rounds == 3 and len(batch["rewards"]) == len(first["rewards"])


def test_kl_penalty_keeps_a_frozen_reference_and_starts_at_zero():
    trainer = make_trainer(rl_algorithm="grpo", kl_coef=0.1, rewards="digit_match:1.0")
    first = trainer.train_step()
    assert trainer.ref_model is not None and first["train/kl"] == pytest.approx(0.0, abs=1e-7)
    second = trainer.train_step()
    assert second["train/kl"] > 0
    assert "ref_model" in trainer.state_dict()
    assert make_trainer(rl_algorithm="grpo").ref_model is None  # no KL, no reference model


def test_entropy_bonus_changes_the_update():
    plain, bonus = make_trainer(), make_trainer(entropy_coef=0.5)
    plain.train_step(), bonus.train_step()
    assert not torch.allclose(plain.model.wte.weight, bonus.model.wte.weight)


def test_first_minibatch_ratio_comes_from_its_own_forward():
    # Before the first optimizer step of a rollout the policy is the sampling policy, so PPO's
    # ratio there is exactly 1 and "own" (its own forward, detached) must equal a separate pass.
    trainer = make_trainer(rl_algorithm="ppo", rewards="digit_match:1.0")
    _, batch, _ = trainer.rollout(0)
    generated = batch["generated"]
    sequences = torch.cat([batch["prompts"], generated], dim=1)
    mask = answer_mask(generated, trainer.env.end_token)
    advantages = torch.linspace(-1.0, 1.0, len(generated))
    norm = dict(num_tokens=mask.sum().item(), num_sequences=len(generated), max_len=trainer.env.answer_len)
    with torch.no_grad():
        separate = trainer.logprobs(trainer.model, sequences, generated)
    results = []
    for old in ("own", separate):
        trainer.model.zero_grad()
        out = trainer.micro_loss(sequences, generated, mask, advantages, old, None, norm)
        out["loss"].backward()
        results.append((out, [p.grad.clone() for p in trainer.model.parameters()]))
    (own, own_grads), (sep, sep_grads) = results
    assert own["ratio_sum"].item() == own["tokens"].item() == mask.sum().item()
    assert own["clip_low"].item() == own["clip_high"].item() == 0
    torch.testing.assert_close(own["loss"], sep["loss"])
    for a, b in zip(own_grads, sep_grads):
        torch.testing.assert_close(a, b)


def test_ppo_ratios_stay_near_one_when_the_policy_barely_moves():
    # With a negligible learning rate the policy after each minibatch is the sampling policy, so
    # every ratio of every epoch and minibatch must be ~1; a missing or stale old log-prob
    # (say, zeros for rows of the first minibatch in the second epoch) would show here.
    trainer = make_trainer(rl_algorithm="ppo", rewards="digit_match:1.0", learning_rate=1e-9)
    assert (trainer.config.ppo_epochs, trainer.config.ppo_minibatches) == (2, 2)
    metrics = trainer.train_step()
    assert metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["train/clip_low_frac"] == metrics["train/clip_high_frac"] == 0
