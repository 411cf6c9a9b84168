"""The RL step under every algorithm switch, in-process on a tiny model: gradients against an
independent reference (tests/reference.py), log-probs against the sampler's, and the step's counts.
Run: python -m pytest tests/test_trainer.py"""

import copy
import math

import numpy as np
import pytest
import torch

import reference
from helpers import assert_grads_close, capture_gradients, critic_of, make_config, make_trainer
from model.gpt import KVCache, PromptGroups
from rl import objectives
from rl.algorithms import ALGORITHMS, group_all_equal
from rl.errors import ConfigError
from rl.problem_sampler import pair_keys
from rl.update import lr_lambda


def test_learning_rate_schedule_by_hand():
    f = lambda s: lr_lambda(s, warmup_steps=4, total_steps=12, min_lr_ratio=0.1)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert math.isclose(f(8), 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # halfway through the decay
    assert math.isclose(f(12), 0.1) and math.isclose(f(50), 0.1)
    assert f(4) == 1.0  # the first step of the decay is at the peak: a warmup one step longer would be above it
    trainer = make_trainer(warmup_steps=4, rl_train_steps=12, learning_rate=1e-3)
    lrs = [trainer.train_step()["train/lr"] for _ in range(6)]
    # by hand, not through lr_lambda: four warmup steps, the peak, then the cosine's first step down (1/8 of it)
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi / 8)))])


# ---- gradients against the reference ---------------------------------------------------------
def reference_gradients(trainer, steps: int = 2):
    """Run `steps` RL steps; at every optimizer step, the trainer's gradient (pre-clip) and the
    reference's gradient of the same step's loss, at the same weights."""
    assert trainer.config.grad_clip == 0  # the captured gradients are the raw ones
    state, expected = {}, []
    real_sample = trainer.sample

    def sample(step):
        state["sampler"] = copy.deepcopy(trainer.model)  # the policy that samples this step
        state["critic"] = copy.deepcopy(critic_of(trainer))  # and the critic that scores it
        state["baseline"] = trainer.baseline
        first, batch, sampled = real_sample(step)
        state["first"], state["batch"] = first, batch
        return first, batch, sampled
    trainer.sample = sample

    def on_step(index):
        c, params = trainer.config, trainer_parameters(trainer)
        if "data" not in state or state["data"]["step"] != trainer.step:
            state["data"] = batch_for_reference(trainer, state)
            state["first_index"] = index
        k, data = index - state["first_index"], state["data"]
        order = trainer.updater.minibatch_orders(trainer.step, data["rows"])[k // c.ppo_minibatches]
        rows = torch.tensor_split(order, c.ppo_minibatches)[k % c.ppo_minibatches]
        if c.objective == "dpo":
            loss = reference.dpo_step_loss(trainer.model, trainer.ref_model, c, trainer.env, data, rows)
        else:
            loss = reference.step_loss(trainer.model, c, trainer.env, data, rows)
        if critic_of(trainer) is not None:
            loss = loss + reference.value_loss(critic_of(trainer), c, data, rows)
        expected.append(list(torch.autograd.grad(loss, params, allow_unused=True)))
    grads = capture_gradients(trainer, on_step)
    for p in trainer.model.parameters():  # what a warm start could leave behind must not join the step
        p.grad = torch.randn_like(p)
    for _ in range(steps):
        trainer.train_step()
    expected = [[torch.zeros_like(p) if g is None else g for p, g in zip(trainer_parameters(trainer), step)]
                for step in expected]
    return grads, expected


def trainer_parameters(trainer) -> list:
    return [p for learner in trainer.learners for p in learner.module.parameters()]


def batch_for_reference(trainer, state):
    c, env, batch = trainer.config, trainer.env, state["batch"]
    rewards = batch.rewards
    if c.kl_coef > 0 and c.kl_estimator == "k1":
        rewards = reference.kl_penalised_rewards(rewards, state["sampler"], trainer.ref_model, batch.prompts,
                                                 batch.generated, c, env)
    baseline = state["baseline"] if state["baseline"] is not None else state["first"].rewards.mean().item()
    off_policy = c.ppo_epochs * c.ppo_minibatches > 1
    T = c.rl_temperature
    data = {"step": trainer.step, "prompts": batch.prompts, "generated": batch.generated, "rows": len(batch),
            "end_token": env.end_token,
            "advantages": reference.advantages(rewards, c, baseline) if c.advantage_mode != "gae" else None,
            "old_logp": reference.answer_logprobs(state["sampler"], batch.prompts, batch.generated, T)
            if off_policy else None,
            "ref_logp": reference.answer_logprobs(trainer.ref_model, batch.prompts, batch.generated, T)
            if c.kl_coef > 0 else None}
    if c.objective == "rft":
        assert (batch.generated == batch.solutions).all()  # only exactly right answers are trained on
        data["advantages"] = torch.ones(len(batch))
    if c.advantage_mode == "token_zscore":
        data["advantages"] = reference.token_advantages(batch.generated, batch.solutions, c.rl_rollout_size)
    if c.objective == "dpo":
        data["chosen"], data["rejected"] = reference.pairs(rewards, c.rl_rollout_size)
        data["rows"] = len(data["chosen"])
    if c.advantage_mode == "gae":
        with torch.no_grad():
            values = reference.critic_values(state["critic"], batch.prompts, batch.generated)
        data["advantages"], data["returns"] = reference.gae(rewards, values, reference.mask(batch.generated,
                                                            env.end_token), c.gamma, c.gae_lambda)
        data["old_values"] = values
    return data


CASES = {
    "reinforce": dict(rl_algorithm="reinforce"),
    "reinforce-T": dict(rl_algorithm="reinforce", rl_temperature=1.7),
    "grpo": dict(rl_algorithm="grpo"),
    "rloo": dict(rl_algorithm="rloo"),
    "ppo": dict(rl_algorithm="ppo"),
    "dapo": dict(rl_algorithm="dapo", rl_temperature=0.8),
    "token-credit": dict(rl_algorithm="dapo", advantage_mode="token_zscore"),
    "dr-grpo": dict(rl_algorithm="grpo", advantage_mode="group_mean", loss_aggregation="seq-mean-token-sum-norm"),
    "batch-zscore": dict(rl_algorithm="reinforce", advantage_mode="batch_zscore"),
    "entropy": dict(rl_algorithm="grpo", entropy_coef=0.3, rl_temperature=1.5),
    "kl-k1-reward": dict(rl_algorithm="grpo", kl_coef=0.5, kl_estimator="k1", learning_rate=1e-2),
    "kl-k2-loss": dict(rl_algorithm="ppo", kl_coef=0.5, kl_estimator="k2", learning_rate=1e-2),
    "kl-k3-loss": dict(rl_algorithm="dapo", kl_coef=0.5, kl_estimator="k3", learning_rate=1e-2),
    "ppo-critic": dict(rl_algorithm="ppo_critic", gamma=0.9, gae_lambda=0.8, critic_learning_rate=1e-2),
    "dpo": dict(rl_algorithm="dpo", dpo_beta=0.5, learning_rate=1e-2),
    "dpo-minibatches": dict(rl_algorithm="dpo", ppo_epochs=2, ppo_minibatches=2),
    "rft": dict(rl_algorithm="rft", rewards="exact_match:1.0", ndigit=1, n_embed=64),
    # each prompt read once for its answers in a micro-batch (rows shuffled into two minibatches, two micro-batches)
    "dapo-prefix-sharing": dict(rl_algorithm="dapo", rl_temperature=0.8, prefix_sharing=True),
    "kl-k3-prefix-sharing": dict(rl_algorithm="grpo", kl_coef=0.5, kl_estimator="k3", learning_rate=1e-2,
                                 prefix_sharing=True, ppo_minibatches=2, rl_ga_steps=2),
    "kl-k1-prefix-sharing": dict(rl_algorithm="grpo", kl_coef=0.5, kl_estimator="k1", learning_rate=1e-2,
                                 prefix_sharing=True),  # (the reference's log-probs read each prompt once too)
    "token-credit-prefix-sharing": dict(rl_algorithm="dapo", advantage_mode="token_zscore", prefix_sharing=True),
    "ppo-critic-prefix-sharing": dict(rl_algorithm="ppo_critic", gamma=0.9, gae_lambda=0.8, critic_learning_rate=1e-2,
                                      prefix_sharing=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_optimizer_step_takes_the_reference_gradient(case):
    """Two RL steps (the second has a baseline, a moved policy and, with KL, a reference that
    differs from it), every optimizer step of both compared with the reference's gradient."""
    trainer = make_trainer(grad_clip=0.0, **CASES[case])
    if case == "rft":  # a policy that is sometimes right, so that there is something to keep
        supervised(trainer, steps=300)
    grads, expected = reference_gradients(trainer, steps=2)
    c = trainer.config
    assert len(grads) == 2 * c.ppo_epochs * c.ppo_minibatches
    for actual, want in zip(grads, expected):
        assert_grads_close(actual, want)
    assert any(g.abs().sum() > 0 for g in grads[-1])  # there was something to compare


def supervised(trainer, steps: int):
    import numpy as np
    from rl.warm_start import teacher_forced_step
    optimizer, rng = torch.optim.Adam(trainer.model.parameters(), lr=3e-3), np.random.default_rng(0)
    for _ in range(steps):
        teacher_forced_step(trainer.model, trainer.env, optimizer, *trainer.env.sample_operands(64, rng), "cpu")
    trainer.model.zero_grad(set_to_none=True)


def test_update_logprobs_at_temperature_equal_the_samplers_through_the_kv_cache(monkeypatch):
    """The log-probs the update differentiates are those of the distribution the sampler drew from:
    the same shift (position P-1 predicts the first answer token) and the same temperature."""
    T = 2.0
    trainer = make_trainer(rl_algorithm="reinforce", rl_temperature=T, rl_ga_steps=1)
    seen = {}
    real, real_logprobs = trainer.objective.loss, objectives.token_logprobs

    def spy(policy, part, norm):
        seen.update(sequences=part.sequences, generated=part.generated, mask=part.mask)
        return real(policy, part, norm)

    def spy_logprobs(logits, tokens):  # what the update differentiates
        seen["logp"] = real_logprobs(logits, tokens).detach()
        return real_logprobs(logits, tokens)
    trainer.objective.loss = spy
    monkeypatch.setattr(objectives, "token_logprobs", spy_logprobs)
    model = copy.deepcopy(trainer.model)  # the policy that samples (the step then moves the trainer's)
    trainer.train_step()
    P = trainer.env.prompt_len
    prompts, generated = seen["sequences"][:, :P], seen["generated"]
    with torch.no_grad():  # the sampler's path: prefill the cache with the prompt, then one token at a time
        cache = KVCache(model.config, len(prompts), seen["sequences"].size(1), prompts.device, torch.float32)
        logits = [model(prompts, cache)[:, -1]]
        for t in range(generated.size(1) - 1):
            logits.append(model(generated[:, t:t + 1], cache)[:, -1])
        sampler = torch.log_softmax(torch.stack(logits, 1) / T, -1).gather(-1, generated[..., None])[..., 0]
    m = seen["mask"]
    torch.testing.assert_close(seen["logp"][m], sampler[m], atol=2e-5, rtol=1e-5)


def test_the_baseline_moves_only_after_this_steps_advantages(monkeypatch):
    trainer = make_trainer(rl_algorithm="reinforce")
    used = []
    real = objectives.compute_advantages
    monkeypatch.setattr(objectives, "compute_advantages", lambda *a, **k: used.append(k["baseline"]) or real(*a, **k))
    first = trainer.train_step()
    after_first = trainer.baseline
    second = trainer.train_step()
    # step 1 starts the baseline at its own mean reward; step 2 uses step 1's baseline, then moves it
    assert used[0] == pytest.approx(first["train/avg_reward"]) and used[1] == after_first
    assert trainer.baseline == pytest.approx(0.9 * after_first + 0.1 * second["train/avg_reward"])
    assert second["train/advantage_baseline"] == after_first != trainer.baseline


def test_the_entropy_bonus_pushes_entropy_up():
    """The gradient the bonus adds, followed downhill, raises the sampling policy's entropy."""
    plain = make_trainer(rl_algorithm="grpo", grad_clip=0.0)
    bonus = make_trainer(rl_algorithm="grpo", grad_clip=0.0, entropy_coef=1.0)
    g_plain, g_bonus = capture_gradients(plain), capture_gradients(bonus)
    _, batch, _ = plain.sample(0)
    plain.train_step(), bonus.train_step()
    seq = torch.cat([batch.prompts, batch.generated], 1)
    model = make_trainer(rl_algorithm="grpo").model  # the weights both steps started from

    def entropy():
        with torch.no_grad():
            logits = reference.logits_at_answer(model, batch.prompts, batch.generated, 1.0)
            p = torch.softmax(logits, -1)
            mask = reference.mask(batch.generated, plain.env.end_token)
            return -(p * torch.log_softmax(logits, -1)).sum(-1)[mask].mean()
    before = entropy()
    with torch.no_grad():
        for p, a, b in zip(model.parameters(), g_plain[0], g_bonus[0]):
            p -= 1e-2 * (b - a)  # the bonus's own part of the gradient
    assert seq.size(0) > 0 and entropy() > before + 1e-4


def test_micro_batches_and_skipped_answers_do_not_change_the_gradient():
    base = dict(rl_algorithm="grpo", grad_clip=0.0)
    one, four, full = make_trainer(rl_ga_steps=1, **base), make_trainer(rl_ga_steps=4, **base), make_trainer(**base)
    full.objective.skip_zero = False
    grads = [capture_gradients(t) for t in (one, four, full)]
    metrics = [t.train_step() for t in (one, four, full)]
    assert 0.0 < metrics[0]["train/skipped_share"] < 1.0 and metrics[2]["train/skipped_share"] == 0.0
    assert_grads_close(grads[1][0], grads[0][0], rtol=1e-4)
    assert_grads_close(grads[2][0], grads[0][0], rtol=1e-4)
    assert metrics[0]["train/policy_loss"] == pytest.approx(metrics[1]["train/policy_loss"], abs=1e-6)


def test_prompt_groups_by_hand():
    # rows 9, 8, 2, 11, 3 of a batch of groups of 4: problems 2, 2, 0, 2, 0 -> first rows 2 (problem 0), 0 (problem 2)
    groups = PromptGroups.of_rows(torch.tensor([9, 8, 2, 11, 3]), group_size=4, length=7)
    assert groups.length == 7 and groups.first.tolist() == [2, 0] and groups.inverse.tolist() == [1, 1, 0, 1, 0]


def test_prefix_sharing_reads_fewer_tokens_and_takes_the_same_step():
    # the adder's tiny trainer: 16 prompts x 4 answers, two minibatches of shuffled rows, two micro-batches each
    trainers = [make_trainer(grad_clip=0.0, prefix_sharing=flag) for flag in (False, True)]
    grads = [capture_gradients(t) for t in trainers]
    tokens = [[] for _ in trainers]
    for t, seen in zip(trainers, tokens):
        t.model.register_forward_pre_hook(lambda m, args, kw, seen=seen: seen.append(
            args[0].numel() if kw.get("groups") is None else len(kw["groups"].first) * kw["groups"].length +
            args[0][:, kw["groups"].length:].numel()), with_kwargs=True)
    metrics = [t.train_step() for t in trainers]
    assert len(grads[0]) == len(grads[1]) == 2
    for plain, shared in zip(*grads):
        assert_grads_close(shared, plain, rtol=1e-5)
    for key in ("train/policy_loss", "train/entropy", "train/grad_norm", "train/ratio_mean"):
        assert metrics[1][key] == pytest.approx(metrics[0][key], rel=1e-5, abs=1e-7)
    for p, q in zip(trainers[0].model.parameters(), trainers[1].model.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
    # the update's four micro-batches (after the sampler's prefills): each reads a prompt once for its rows
    update = [seen[-4:] for seen in tokens]
    assert sum(update[1]) < 0.9 * sum(update[0]), update


def test_prefix_sharing_samples_the_same_answers_from_one_copy_of_each_prompts_cache(monkeypatch):
    """The sampler's decode (model/gpt.py KVCache.share_prompts) draws the plain decode's tokens, from the same
    streams, with its log-probs to float rounding, and keeps each prompt's keys and values once for its G rows."""
    shared_caches = []
    real = KVCache.share_prompts
    monkeypatch.setattr(KVCache, "share_prompts", lambda self, n, m: shared_caches.append((len(self.k[0]), n))
                        or real(self, n, m))
    rollouts = [make_trainer(prefix_sharing=flag).sample(0)[1] for flag in (False, True)]
    # the shared trainer's rounds (the first of 16 prompts, then dynamic sampling's refills): one cache row a prompt
    assert shared_caches[0] == (16, 4) and {n for _, n in shared_caches} == {4}
    plain, shared = rollouts
    assert torch.equal(plain.generated, shared.generated) and len(set(plain.generated.flatten().tolist())) > 3
    torch.testing.assert_close(shared.logp, plain.logp, rtol=1e-5, atol=1e-6)
    assert torch.equal(plain.rewards, shared.rewards)


GROUPS_ONLY = "it needs an objective that trains on whole groups of answers (not rft or dpo)"
NOT_GRAPHED = "it needs rl_cuda_graphs=false (a graphed step's shapes are fixed, a grouped pass's follow its prompts)"


def test_with_prefix_sharing_a_minibatchs_micro_batches_share_at_most_one_prompt():
    # its rows are sorted before the split, so each micro-batch holds whole groups' rows (but the one cut in two)
    trainer = make_trainer(prefix_sharing=True, rl_ga_steps=4)
    prompts = []
    trainer.model.register_forward_pre_hook(lambda m, args, kw: prompts.append(
        {tuple(p) for p in args[0][kw["groups"].first, :kw["groups"].length].tolist()})
        if kw.get("groups") is not None else None, with_kwargs=True)
    trainer.train_step()
    assert len(prompts) == 8  # 2 minibatches x 4 micro-batches
    for minibatch in (prompts[:4], prompts[4:]):
        for i, a in enumerate(minibatch):
            assert all(len(a & b) <= 1 for b in minibatch[i + 1:]), minibatch


@pytest.mark.parametrize("overrides, why", [
    (dict(rl_algorithm="rft", rewards="exact_match:1.0"), GROUPS_ONLY), (dict(rl_algorithm="dpo"), GROUPS_ONLY),
    (dict(rl_cuda_graphs=True, rl_ga_steps=1), NOT_GRAPHED),
])
def test_prefix_sharing_is_refused_where_it_cannot_apply(overrides, why):
    with pytest.raises(ConfigError) as e:
        make_config(prefix_sharing=True, **overrides)
    assert str(e.value) == f"prefix_sharing=True has no effect here: {why}; set that, or leave prefix_sharing unset"


def test_gradients_are_clipped_to_grad_clip_by_their_global_norm():
    raw, clipped = make_trainer(grad_clip=0.0), make_trainer(grad_clip=0.01)
    g_raw, g_clipped = capture_gradients(raw), capture_gradients(clipped)
    raw.train_step(), clipped.train_step()
    norm = torch.sqrt(sum((g ** 2).sum() for g in g_raw[0])).item()
    assert norm > 0.02  # so the clip engages
    assert_grads_close(g_clipped[0], [g * 0.01 / norm for g in g_raw[0]], rtol=1e-4)


def test_the_critics_gradient_is_clipped_too(monkeypatch):
    """ppo_critic: the critic's own gradient norm is clipped to grad_clip, like the policy's."""
    trainer = make_trainer(rl_algorithm="ppo_critic", grad_clip=1e-3)
    trainer.start_models()
    norm = lambda m: torch.sqrt(sum((p.grad ** 2).sum() for p in m.parameters() if p.grad is not None)).item()
    clipped, raw = [], []
    trainer.objective.critic.optimizer.register_step_pre_hook(lambda *a: clipped.append(norm(critic_of(trainer))))
    real_clip = torch.nn.utils.clip_grad_norm_

    def clip(params, max_norm):
        params = list(params)
        raw.append(torch.sqrt(sum((p.grad ** 2).sum() for p in params if p.grad is not None)).item())
        return real_clip(params, max_norm)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
    trainer.train_step()
    assert len(clipped) == 4 and all(n <= 1e-3 * (1 + 1e-4) for n in clipped), clipped
    assert min(raw[1::2]) > 1e-2  # the critic's raw norm was far above the clip


def test_every_rank_and_step_draws_its_own_problems_and_samples():
    from rl.dist import DistInfo
    prompts = lambda rank, step: make_trainer(info=DistInfo(rank=rank)).sample(step)[0]
    same, other_rank, other_step = prompts(0, 3), prompts(1, 3), prompts(0, 4)
    assert torch.equal(same.prompts, prompts(0, 3).prompts) and torch.equal(same.generated, prompts(0, 3).generated)
    assert not torch.equal(same.prompts, other_rank.prompts) and not torch.equal(same.prompts, other_step.prompts)


# ---- dynamic sampling and what a step counts -------------------------------------------------
def test_dynamic_sampling_refills_groups_without_signal():
    trainer = make_trainer(rl_algorithm="dapo", rewards="digit_match:1.0", dynamic_sampling_max_rounds=10)
    G, P = trainer.config.rl_rollout_size, trainer.local_prompts
    first, batch, sampled = trainer.sample(0)
    assert len(batch) == len(first)  # refilled to the full batch
    assert group_all_equal(first.rewards, G).sum() > 0 and sampled.rounds > 1
    assert group_all_equal(batch.rewards, G).sum() == 0
    # Each refill asks for as many prompts as the share kept so far says it needs, plus 25%.
    asked, sample_operands = [], trainer.env.sample_operands
    trainer.env.sample_operands = lambda n, rng: asked.append(n) or sample_operands(n, rng)
    first, _, _ = trainer.sample(1)
    kept = int((~group_all_equal(first.rewards, G)).sum())
    assert asked[:2] == [P, min(math.ceil(1.25 * (P - kept) * P / kept), 4 * P)]


@pytest.mark.parametrize("sampler", ["prioritized", "replay"])
def test_no_refill_round_draws_a_problem_already_drawn_in_the_same_step(sampler):
    """What a sampler chooses by its state (every prioritized draw; replay's draws from its buffer) is
    never a problem already asked about in this step: its group's outcome would count twice. (The
    fresh uniform draws are independent, as in the original recipe.)"""
    trainer = make_trainer(rl_algorithm="dapo", problem_sampler=sampler, dynamic_sampling_max_rounds=6, ndigit=1,
                           rl_batch_size=8)
    chosen, draw = [], trainer.problem_sampler.draw

    def recording(n, problems_rng, selection_rng, exclude):
        a, b, selected, estimates = draw(n, problems_rng, selection_rng, exclude)
        chosen.append(pair_keys(trainer.env, a, b)[selected if sampler == "replay" else slice(None)])
        return a, b, selected, estimates
    trainer.problem_sampler.draw = recording
    for step in range(4):  # replay's buffer fills after the first step, and it draws from it after
        _, _, sampled = trainer.sample(step)
        keys = np.concatenate(sampled.keys)
        picked = np.concatenate(chosen[-sampled.rounds:])
        asked_before = [np.isin(c, np.concatenate(sampled.keys[:i])).any() for i, c in
                        enumerate(chosen[-sampled.rounds:]) if i]
        assert sampled.rounds > 1 and not any(asked_before), (step, sampled.rounds)
        assert len(np.unique(picked)) == len(picked)
        if sampler == "prioritized":
            assert len(np.unique(keys)) == len(keys)
        trainer.observe_outcomes(sampled)
    assert sum(len(c) for c in chosen) > 8 * 4  # more than a step's worth were chosen: refills among them


def test_when_refills_run_out_the_step_trains_on_what_was_kept_not_on_filler():
    """From scratch every exact-match reward is 0: no group has signal, the rounds run out, and the
    step has nothing to train on, so the weights and the optimizer stay as they were."""
    trainer = make_trainer(rl_algorithm="dapo", rewards="exact_match:1.0", dynamic_sampling_max_rounds=2)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    metrics = trainer.train_step()
    assert metrics["train/sampling_rounds"] == 3 and metrics["train/batch_answers"] == 0
    assert metrics["train/answers_generated"] == 16 * 4 + 2 * 4 * 16 * 4  # the first round, then 4 batches twice
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert trainer.actor.optimizer.state_dict()["state"] == {}


def test_a_short_batch_is_normalised_by_the_answers_it_trains_on():
    """A batch of 4 groups that kept only 2 is trained like a batch configured for 2 groups: the
    same gradient, not half of it (filler would have diluted it)."""
    short = make_trainer(rl_algorithm="dapo", grad_clip=0.0)
    alone = make_trainer(rl_algorithm="dapo", grad_clip=0.0, rl_batch_size=2)
    first, batch, sampled = short.sample(0)
    kept = batch.select(slice(0, 2 * short.config.rl_rollout_size))
    short.sample = lambda step: (first, kept, sampled)
    alone.sample = lambda step: (first, kept, sampled)
    g_short, g_alone = capture_gradients(short), capture_gradients(alone)
    m = short.train_step()
    alone.train_step()
    assert m["train/batch_answers"] == 8 and m["train/informative_share"] == 1.0
    for a, b in zip(g_short, g_alone):
        assert_grads_close(a, b)


def test_step_metrics_count_what_happened():
    trainer = make_trainer(rl_algorithm="dapo", rewards="digit_match:1.0", dynamic_sampling_max_rounds=10)
    seen = {}
    real = trainer.sample
    trainer.sample = lambda step: seen.setdefault("out", real(step))
    metrics = trainer.train_step()
    first, batch, sampled = seen["out"]
    exact = (first.generated == first.solutions).all(dim=1).float().mean().item()
    assert metrics["train/accuracy"] == pytest.approx(exact)
    assert metrics["train/avg_reward"] == pytest.approx(first.rewards.mean().item())
    assert metrics["train/answers_generated"] == sampled.answers > len(first)  # every round counted
    assert metrics["perf/samples_per_second"] == pytest.approx(sampled.answers / metrics["perf/step_seconds"])
    assert metrics["train/groups_all_equal"] == pytest.approx(group_all_equal(first.rewards, 4).float().mean().item())
    mask = reference.mask(first.generated, trainer.env.end_token)
    assert metrics["train/entropy"] == pytest.approx(first.entropy[mask].mean().item(), rel=1e-5)
    assert metrics["train/answer_tokens"] == pytest.approx(mask.sum().item() / len(first))


def test_policy_loss_is_logged_apart_from_the_kl_and_entropy_terms():
    plain = make_trainer(rl_algorithm="grpo").train_step()
    both = make_trainer(rl_algorithm="grpo", entropy_coef=0.5, kl_coef=0.1, kl_estimator="k2").train_step()
    assert both["train/policy_loss"] == pytest.approx(plain["train/policy_loss"], abs=1e-6)
    assert both["train/entropy_loss"] < 0 and plain["train/entropy_loss"] == 0.0
    assert both["train/kl_loss"] == pytest.approx(0.0, abs=1e-9)  # the policy is the reference at step 1


# ---- PPO and the KL reference ----------------------------------------------------------------
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_each_algorithm_takes_epochs_times_minibatches_optimizer_steps(algorithm):
    # (rft reads only exact match, and refuses the tiny settings' partial credit as a setting it would ignore)
    trainer = make_trainer(rl_algorithm=algorithm, **({"rewards": "exact_match:1.0"} if algorithm == "rft" else {}))
    metrics = trainer.train_step()
    assert all(math.isfinite(v) for v in metrics.values())
    c, state = trainer.config, trainer.actor.optimizer.state_dict()["state"]
    if algorithm == "rft":  # a random policy writes no right answer: nothing to imitate, no step
        assert metrics["train/batch_answers"] == 0 and state == {}
    else:
        assert state[0]["step"].item() == c.ppo_epochs * c.ppo_minibatches


def test_ppo_ratios_are_taken_against_the_samplers_own_logprobs():
    """A rollout that feeds several optimizer steps keeps the log-probs the sampler drew it with:
    they equal the update's log-probs at the sampling weights, so the first minibatch's ratios are 1."""
    trainer = make_trainer(rl_algorithm="ppo", rl_temperature=1.3)
    _, batch, _ = trainer.sample(0)
    mask = reference.mask(batch.generated, trainer.env.end_token)
    full = reference.answer_logprobs(trainer.model, batch.prompts, batch.generated, 1.3)
    torch.testing.assert_close(batch.logp[mask], full[mask], atol=2e-5, rtol=1e-5)
    seen = []
    real = trainer.objective.loss
    trainer.objective.loss = lambda policy, part, norm: seen.append(part.old_logp) or real(policy, part, norm)
    metrics = trainer.train_step()
    assert all(old is not None for old in seen)
    for row in torch.cat(seen):  # each row's old log-probs are the sampler's log-probs of some answer
        assert (batch.logp == row).all(dim=1).any()
    assert metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-2)
    single = make_trainer(rl_algorithm="reinforce")
    real_single = single.objective.loss
    single.objective.loss = lambda policy, part, norm: seen.append(part.old_logp) or real_single(policy, part, norm)
    single.train_step()
    assert seen[-1] is None  # one update per rollout: on-policy, no ratio


def test_ppo_ratios_stay_near_one_when_the_policy_barely_moves():
    # With a negligible learning rate the policy after each minibatch is the sampling policy, so
    # every ratio of every epoch and minibatch must be ~1; a missing or stale old log-prob
    # (say, zeros for rows of the first minibatch in the second epoch) would show here.
    trainer = make_trainer(rl_algorithm="ppo", learning_rate=1e-9)
    assert (trainer.config.ppo_epochs, trainer.config.ppo_minibatches) == (2, 2)
    metrics = trainer.train_step()
    assert metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["train/clip_low_frac"] == metrics["train/clip_high_frac"] == 0
    moved = make_trainer(rl_algorithm="ppo", learning_rate=3e-2).train_step()
    assert moved["train/clip_low_frac"] + moved["train/clip_high_frac"] > 0.01


def test_the_critic_starts_from_the_policy_and_learns_at_its_own_rate():
    trainer = make_trainer(rl_algorithm="ppo_critic", critic_learning_rate=2e-3, learning_rate=5e-4, warmup_steps=4)
    policy_before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    metrics = trainer.train_step()
    critic = critic_of(trainer)
    for name, value in critic.trunk.state_dict().items():  # its trunk started from the policy's weights...
        assert not torch.equal(value, policy_before[name]) or name == "lm_head.weight"  # ...and moved since
    assert trainer.objective.critic.optimizer.param_groups[0]["lr"] == pytest.approx(2e-3 * 2 / 4)  # warmup step 2 of 4
    assert trainer.actor.optimizer.param_groups[0]["lr"] == pytest.approx(5e-4 * 2 / 4)
    assert metrics["train/value_loss"] > 0 and "train/explained_variance" in metrics
    fresh = make_trainer(rl_algorithm="ppo_critic")
    fresh.start_models()
    for name, value in critic_of(fresh).trunk.state_dict().items():
        assert torch.equal(value, fresh.model.state_dict()[name])
    assert critic_of(fresh).value_head.weight.abs().sum() == 0  # every value starts at 0


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_penalty_keeps_a_frozen_reference_and_starts_at_zero(estimator):
    trainer = make_trainer(rl_algorithm="grpo", kl_coef=0.1, kl_estimator=estimator, learning_rate=1e-2)
    first = trainer.train_step()
    assert trainer.ref_model is not None and first["train/kl"] == pytest.approx(0.0, abs=1e-6)
    second = trainer.train_step()
    assert second["train/kl"] > 1e-6
    assert "ref_model" in trainer.state_dict()
    assert make_trainer(rl_algorithm="grpo").ref_model is None  # no KL, no reference model


def test_a_new_objective_is_a_class_and_a_table_entry(monkeypatch):
    """docs/algorithms.md "Adding an algorithm", as written there: an objective class, its OBJECTIVES entry and a
    row; the trainer unchanged dispatches to it. A = r - 1, so exactly the wrong answers teach."""
    class Unlikelihood(objectives.PolicyGradient):
        def advantages(self, rewards, stats):
            return rewards - 1.0
    monkeypatch.setitem(objectives.OBJECTIVES, "unlikelihood", Unlikelihood)
    monkeypatch.setitem(ALGORITHMS, "unlikelihood", dict(ALGORITHMS["reinforce"], objective="unlikelihood"))
    trainer = make_trainer(rl_algorithm="unlikelihood", rewards="digit_match:1.0", grad_clip=0.0)
    assert type(trainer.objective) is Unlikelihood
    # its optimizer steps take the gradient of the reference loss with A = r - 1
    monkeypatch.setattr(reference, "advantages", lambda rewards, config, baseline: rewards - 1.0)
    grads, expected = reference_gradients(trainer)
    assert len(grads) == 2
    for actual, wanted in zip(grads, expected):
        assert_grads_close(actual, wanted)
