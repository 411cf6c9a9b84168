"""The policy-gradient functions against values computed by hand and against the published formulas.
Run: python -m pytest tests/test_algorithms.py"""

import math

import pytest
import torch

from rl.algorithms import (ALGORITHMS, KL_PLACEMENT, aggregate, answer_logits, answer_mask, compute_advantages,
                           compute_entropy, compute_gae, compute_kl, compute_policy_loss, compute_value_loss, dpo_loss,
                           explained_variance, kl_reward_penalty, preference_pairs, resolve, sequence_logprobs,
                           token_group_zscore, token_logprobs, token_rewards, update_baseline, whiten)

R = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # two prompts, G = 4 answers each


def test_baseline_moving_average():
    assert update_baseline(None, 0.3, 0.9) == 0.3  # first step starts at the mean
    assert math.isclose(update_baseline(0.5, 1.0, 0.9), 0.55)  # 0.9 * 0.5 + 0.1 * 1.0
    assert math.isclose(update_baseline(0.55, 0.0, 0.9), 0.495)
    assert update_baseline(0.5, 1.0, 0.0) == 1.0


@pytest.mark.parametrize("mode,expected", [
    ("none", [1, 0, 0, 1, 1, 1, 1, 1]),
    ("group_mean", [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0]),
    # group 1: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735; group 2: std 0 -> 0 / 1e-4 = 0
    ("group_zscore", [0.5 / (0.5773503 + 1e-4), -0.5 / (0.5773503 + 1e-4)] * 1 + [-0.5 / (0.5773503 + 1e-4),
                                                                                  0.5 / (0.5773503 + 1e-4), 0, 0, 0, 0]),
    # r_0 = 1, the others average 1/3: 2/3; r_1 = 0, the others average 2/3: -2/3
    ("rloo", [2 / 3, -2 / 3, -2 / 3, 2 / 3, 0, 0, 0, 0]),
])
def test_advantage_modes_by_hand(mode, expected):
    assert torch.allclose(compute_advantages(R, 4, mode), torch.tensor(expected, dtype=torch.float32), atol=1e-5)


def test_baseline_and_batch_zscore_advantages():
    assert torch.allclose(compute_advantages(R, 4, "baseline", baseline=0.25), R - 0.25)
    # mean 0.75; unbiased variance (6 * 0.25^2 + 2 * 0.75^2) / 7 = 1.5 / 7
    std = math.sqrt(1.5 / 7)
    assert torch.allclose(compute_advantages(R, 4, "batch_zscore"), (R - 0.75) / (std + 1e-4), atol=1e-6)
    # global statistics from other ranks win over this rank's
    assert torch.allclose(compute_advantages(R, 4, "batch_zscore", batch_mean=0.5, batch_std=2.0), (R - 0.5) / 2.0001)


def test_token_zscore_credits_each_place_on_the_solutions_path_by_hand():
    """G = 2, answers of 3 tokens: where one answer is right and the other wrong, mean 0.5 and unbiased std
    sqrt(2 * 0.25 / 1) = 0.70711 give +-0.5 / (0.70711 + 1e-4); a place the group got alike is 0, and so is every
    token after an answer's first wrong one (it has left the solution's path)."""
    correct = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0],    # prompt 1: place 1 differs; place 2 has one left
                            [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])   # prompt 2: place 0 differs, then one is left
    z = 0.5 / (math.sqrt(0.5) + 1e-4)
    expected = torch.tensor([[0, z, 0], [0, -z, 0], [-z, 0, 0], [z, 0, 0]])
    assert torch.allclose(token_group_zscore(correct, 2), expected, atol=1e-6)
    # G = 3: at place 0, [0, 1, 1]: mean 2/3, std sqrt((4/9 + 2/9) / 2) = sqrt(1/3); at place 1 the first has
    # left the path, and the other two, [1, 0], are +-z
    correct = torch.tensor([[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    s3 = math.sqrt(1 / 3) + 1e-4
    expected = torch.tensor([[-2 / 3 / s3, 0], [1 / 3 / s3, z], [1 / 3 / s3, -z]])
    assert torch.allclose(token_group_zscore(correct, 3), expected, atol=1e-6)
    assert token_group_zscore(torch.zeros(0, 3), 2).shape == (0, 3)  # a rank whose dynamic sampling kept nothing


def test_rloo_is_the_leave_one_out_mean():
    torch.manual_seed(0)
    r, G = torch.rand(12), 4
    loo = torch.stack([r[i] - torch.cat([r[(i // G) * G:i], r[i + 1:(i // G + 1) * G]]).mean() for i in range(12)])
    assert torch.allclose(compute_advantages(r, G, "rloo"), loo, atol=1e-6)


def test_mask_keeps_tokens_up_to_the_first_end():
    END = 11
    generated = torch.tensor([[1, 2, 3, 4, END], [1, END, 12, 12, 12], [1, 2, 3, 4, 5], [END, 12, 12, 12, 12]])
    expected = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(answer_mask(generated, END), expected)


def test_token_logprobs_pick_the_chosen_token():
    logits = torch.tensor([[[0.0, math.log(3.0)], [math.log(2.0), 0.0]]])  # probs (1/4, 3/4), (2/3, 1/3)
    assert torch.allclose(token_logprobs(logits, torch.tensor([[1, 1]])), torch.tensor([[math.log(0.75), math.log(1 / 3)]]))


def test_answer_logits_read_the_position_before_each_answer_token_at_the_temperature():
    class Echo(torch.nn.Module):  # logits at position p: (p, 10 * token at p)
        def forward(self, idx):
            pos = torch.arange(idx.size(1)).expand_as(idx).float()
            return torch.stack([pos, 10.0 * idx.float()], dim=-1)
    seq = torch.tensor([[7, 8, 9, 1, 2]])  # prompt of 3, answer of 2
    logits = answer_logits(Echo(), seq, prompt_len=3, temperature=2.0)
    # answer token 0 is predicted at position 2 (the prompt's last), token 1 at position 3; the
    # last token (position 4) is never read
    assert torch.equal(logits, torch.tensor([[[1.0, 45.0], [1.5, 5.0]]]))


# ---- aggregation -------------------------------------------------------------------------------
V = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
M = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])


def test_aggregations_by_hand():
    agg = lambda mode, **kw: pytest.approx(aggregate(V, M, mode, **kw).item(), rel=1e-6)
    assert agg("token-mean") == (1 + 2 + 3 + 4) / 4
    assert agg("seq-mean-token-mean") == (6 / 3 + 4 / 1) / 2
    assert agg("seq-mean-token-sum-norm") == 10 / (2 * 3)
    assert agg("seq-mean-token-sum-norm", max_len=5) == 10 / (2 * 5)
    # counts of the whole step replace this call's
    assert agg("token-mean", num_tokens=8) == 10 / 8
    assert agg("seq-mean-token-mean", num_sequences=4) == 6 / 4
    with pytest.raises(ValueError, match="unknown loss aggregation 'mean'"):
        aggregate(V, M, "mean")


def test_aggregations_agree_when_every_answer_has_the_full_length():
    torch.manual_seed(1)
    values, full = torch.randn(6, 5), torch.ones(6, 5)
    token = aggregate(values, full, "token-mean")
    assert torch.allclose(token, aggregate(values, full, "seq-mean-token-mean"))
    assert torch.allclose(token, aggregate(values, full, "seq-mean-token-sum-norm"))


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batches_sum_to_the_full_batch(mode):
    torch.manual_seed(0)
    logp, adv = -torch.rand(8, 5), torch.randn(8)
    mask = (torch.rand(8, 5) > 0.3).float()
    mask[:, 0] = 1
    norm = dict(num_tokens=mask.sum().item(), num_sequences=8, max_len=5)
    full, _ = compute_policy_loss(logp, None, adv, mask, aggregation=mode, **norm)
    parts = sum(compute_policy_loss(logp[i:i + 2], None, adv[i:i + 2], mask[i:i + 2], aggregation=mode, **norm)[0]
                for i in range(0, 8, 2))
    assert torch.allclose(full, parts)


# ---- policy loss -------------------------------------------------------------------------------
def test_plain_policy_gradient_value_and_gradient_by_hand():
    # Two answers: A = (+1, -0.5); the second ended after 1 token, so 3 tokens count in all.
    logp = torch.tensor([[-0.1, -0.2], [-0.3, -0.4]], requires_grad=True)
    adv = torch.tensor([1.0, -0.5])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss, stats = compute_policy_loss(logp, None, adv, mask, aggregation="token-mean", num_tokens=3)
    # -( 1*(-0.1) + 1*(-0.2) + (-0.5)*(-0.3) ) / 3 = -(-0.3 + 0.15) / 3 = 0.05
    assert math.isclose(loss.item(), 0.05, rel_tol=1e-6)
    loss.backward()
    # d loss / d logp_it = -A_i * mask_it / 3
    assert torch.allclose(logp.grad, torch.tensor([[-1 / 3, -1 / 3], [0.5 / 3, 0.0]]))
    assert stats["clip_low"] == 0 and stats["clip_high"] == 0 and stats["ratio_sum"] == 3 and stats["tokens"] == 3


def test_ppo_clipped_surrogate_by_hand():
    # ratios 1.5, 0.5, 1.1, 1.5, 0.5 with advantages +1, -1, +1, -1, +1; clip range [0.8, 1.28]
    old = torch.zeros(5, 1)
    logp = torch.log(torch.tensor([[1.5], [0.5], [1.1], [1.5], [0.5]])).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0])
    loss, stats = compute_policy_loss(logp, old, adv, torch.ones(5, 1), clip_low=0.2, clip_high=0.28)
    # min(rA, clip(r)A): token 1 min(1.5, 1.28) = 1.28 (clipped); token 2 min(-0.5, -0.8) = -0.8
    # (clipped); token 3 1.1 (inside the range); token 4 min(-1.5, -1.28) = -1.5 and token 5
    # min(0.5, 0.8) = 0.5: the pessimistic min picks the *unclipped* term, so it keeps its gradient
    assert math.isclose(loss.item(), -(1.28 - 0.8 + 1.1 - 1.5 + 0.5) / 5, rel_tol=1e-6)
    loss.backward()
    # d(-rA)/dlogp = -rA / 5 where the unclipped term is taken, 0 where the clipped one is
    assert torch.allclose(logp.grad, torch.tensor([[0.0], [0.0], [-1.1 / 5], [1.5 / 5], [-0.5 / 5]]), atol=1e-6)
    # only the tokens whose clipped term was taken count as clipped
    assert stats["clip_high"] == 1 and stats["clip_low"] == 1
    assert math.isclose(stats["ratio_sum"].item(), 5.1, rel_tol=1e-6) and stats["tokens"] == 5


def test_ppo_at_ratio_one_has_the_plain_policy_gradient():
    torch.manual_seed(2)
    logp = (-torch.rand(4, 3)).requires_grad_(True)
    adv, mask = torch.randn(4), torch.ones(4, 3)
    compute_policy_loss(logp, logp.detach(), adv, mask)[0].backward()
    ppo_grad = logp.grad.clone()
    logp.grad = None
    compute_policy_loss(logp, None, adv, mask)[0].backward()
    assert torch.allclose(ppo_grad, logp.grad)


def test_gradient_is_the_reinforce_estimator_on_a_two_armed_bandit():
    # pi = softmax(theta) over 2 arms; arm 0 pays 1, arm 1 pays 0; samples: arm 0, arm 1.
    theta = torch.tensor([0.3, -0.2], requires_grad=True)
    actions, rewards = torch.tensor([0, 1]), torch.tensor([1.0, 0.0])
    logp = torch.log_softmax(theta, dim=0)[actions].unsqueeze(1)  # (2, 1): one token each
    adv = compute_advantages(rewards, 2, "baseline", baseline=0.5)
    compute_policy_loss(logp, None, adv, torch.ones(2, 1))[0].backward()
    p = torch.softmax(theta.detach(), dim=0)
    # textbook: grad J = mean_i A_i * grad log pi(a_i); grad log pi(a) = onehot(a) - p
    estimator = (0.5 * (torch.tensor([1.0, 0.0]) - p) + (-0.5) * (torch.tensor([0.0, 1.0]) - p)) / 2
    assert torch.allclose(-theta.grad, estimator)


def test_expected_gradient_on_the_bandit_is_the_true_policy_gradient():
    """Summing the estimator over both arms weighted by pi gives d/dtheta E[r] exactly."""
    theta = torch.tensor([0.3, -0.2], requires_grad=True)
    p = torch.softmax(theta, dim=0)
    (p[0] * 1.0).backward()  # E[r] = pi(arm 0)
    true_grad = theta.grad.clone()
    grad = torch.zeros(2)
    for arm, reward in ((0, 1.0), (1, 0.0)):
        th = theta.detach().clone().requires_grad_(True)
        logp = torch.log_softmax(th, dim=0)[arm].view(1, 1)
        compute_policy_loss(logp, None, torch.tensor([reward]), torch.ones(1, 1))[0].backward()
        grad += -th.grad * p[arm].item()
    assert torch.allclose(grad, true_grad, atol=1e-6)


# ---- KL and entropy ------------------------------------------------------------------------------
def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    lr = math.log(2.0)  # log pi / pi_ref
    assert math.isclose(compute_kl(logp, ref, "k1").item(), lr, rel_tol=1e-6)
    assert math.isclose(compute_kl(logp, ref, "k2").item(), lr ** 2 / 2, rel_tol=1e-6)
    assert math.isclose(compute_kl(logp, ref, "k3").item(), 0.5 - 1 + lr, rel_tol=1e-6)  # 1/r - 1 + log r


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_unbiased_kl_estimators_average_to_the_true_kl(estimator):
    p, q = torch.tensor([0.6, 0.3, 0.1]), torch.tensor([0.2, 0.5, 0.3])
    true_kl = (p * (p / q).log()).sum()
    # exact expectation over tokens drawn from p
    expected = sum(p[a] * compute_kl(p[a].log().view(1, 1), q[a].log().view(1, 1), estimator)[0, 0] for a in range(3))
    assert torch.allclose(expected, true_kl, atol=1e-6)
    assert (compute_kl(p.log().view(1, 3), q.log().view(1, 3), "k3") >= 0).all()


# A small categorical policy pi = softmax(theta) over 6 tokens and a fixed reference: the exact
# gradients of both KLs, and the expected gradient of each KL option as the trainer uses it,
# computed by enumerating every token with its probability.
THETA, REF = torch.randn(6, generator=torch.Generator().manual_seed(0)), torch.log_softmax(
    torch.randn(6, generator=torch.Generator().manual_seed(1)), 0)


def gradient(f):
    th = THETA.clone().requires_grad_(True)
    f(th).backward()
    return th.grad


REVERSE_KL = gradient(lambda th: (th.softmax(0) * (th.log_softmax(0) - REF)).sum())  # grad KL(pi || ref)
FORWARD_KL = gradient(lambda th: (REF.exp() * (REF - th.log_softmax(0))).sum())  # grad KL(ref || pi)


def expected_gradient(loss_of_token):
    """sum_a pi(a) * grad loss(a): the expected gradient of a loss on a token drawn from pi."""
    p = THETA.softmax(0)
    return sum(p[a] * gradient(lambda th: loss_of_token(th.log_softmax(0)[a].view(1, 1), a)) for a in range(6))


def test_kl_in_the_loss_has_the_gradient_it_documents():
    ones = torch.ones(1, 1)
    k2 = expected_gradient(lambda logp, a: aggregate(compute_kl(logp, REF[a].view(1, 1), "k2"), ones, "token-mean"))
    k3 = expected_gradient(lambda logp, a: aggregate(compute_kl(logp, REF[a].view(1, 1), "k3"), ones, "token-mean"))
    k1 = expected_gradient(lambda logp, a: aggregate(compute_kl(logp, REF[a].view(1, 1), "k1"), ones, "token-mean"))
    assert torch.allclose(k2, REVERSE_KL, atol=1e-6)  # k2 in the loss: KL(pi || ref)
    assert torch.allclose(k3, FORWARD_KL, atol=1e-6)  # k3 in the loss: KL(ref || pi), as documented
    assert not torch.allclose(FORWARD_KL, REVERSE_KL, atol=1e-3)  # the two differ here
    assert torch.allclose(k1, torch.zeros(6), atol=1e-6)  # why k1 never goes into the loss
    assert KL_PLACEMENT == {"k1": "reward", "k2": "loss", "k3": "loss"}


def test_k1_in_the_reward_has_the_gradient_of_the_kl():
    """kl_coef * sum_t k1 subtracted from the reward (no gradient through the penalty), then the
    plain policy-gradient loss: its expected gradient is kl_coef * grad KL(pi || ref)."""
    coef = 0.3

    def loss(logp, a):
        penalty = kl_reward_penalty(logp, REF[a].view(1, 1), torch.ones(1, 1, dtype=torch.bool))
        assert not penalty.requires_grad
        return compute_policy_loss(logp, None, 0.0 - coef * penalty, torch.ones(1, 1))[0]
    assert torch.allclose(expected_gradient(loss), coef * REVERSE_KL, atol=1e-6)


def test_kl_reward_penalty_sums_the_answer_up_to_its_mask():
    logp, ref = torch.tensor([[-0.1, -0.2, -0.3]]), torch.tensor([[-0.5, -0.1, float("-inf")]])
    penalty = kl_reward_penalty(logp, ref, torch.tensor([[True, True, False]]))
    assert torch.allclose(penalty, torch.tensor([0.4 - 0.1]))  # the masked -inf cannot leak in


def test_entropy_of_uniform_and_certain_policies():
    Vn = 14
    logits = torch.stack([torch.zeros(Vn), torch.tensor([100.0] + [0.0] * (Vn - 1))]).view(1, 2, Vn)
    ent = compute_entropy(logits, torch.tensor([[1.0, 1.0]]))
    assert math.isclose(ent[0, 0].item(), math.log(Vn), rel_tol=1e-5) and ent[0, 1].item() < 1e-6
    assert compute_entropy(logits, torch.tensor([[0.0, 1.0]]))[0, 0].item() == 0.0


# What docs/algorithms.md's algorithm table states, pinned here: editing a row of ALGORITHMS must fail.
README_TABLE = {
    "reinforce": ("baseline", "token-mean", 1, 1, 0.2, 0.2, False, "policy_gradient"),
    "grpo": ("group_zscore", "seq-mean-token-mean", 1, 1, 0.2, 0.2, False, "policy_gradient"),
    "rloo": ("rloo", "token-mean", 1, 1, 0.2, 0.2, False, "policy_gradient"),
    "ppo": ("group_mean", "token-mean", 2, 2, 0.2, 0.28, False, "policy_gradient"),
    "dapo": ("group_zscore", "token-mean", 1, 2, 0.2, 0.28, True, "policy_gradient"),
    "ppo_critic": ("gae", "token-mean", 2, 2, 0.2, 0.2, False, "policy_gradient"),
    "dpo": ("none", "token-mean", 1, 1, 0.2, 0.2, False, "dpo"),
    "rft": ("none", "token-mean", 1, 1, 0.2, 0.2, False, "rft"),
}
TABLE_KEYS = ("advantage_mode", "loss_aggregation", "ppo_epochs", "ppo_minibatches", "clip_low", "clip_high",
              "dynamic_sampling", "objective")


def test_the_algorithm_table_says_what_the_readme_says():
    assert set(ALGORITHMS) == set(README_TABLE)
    for name, values in README_TABLE.items():
        assert tuple(ALGORITHMS[name][k] for k in TABLE_KEYS) == values, name
        assert resolve(name, {}, group_size=8) == dict(zip(TABLE_KEYS, values))


def test_explicit_settings_win_over_the_table_and_bad_ones_are_refused():
    settings = resolve("dapo", {"clip_high": 0.5, "advantage_mode": "rloo", "clip_low": None}, group_size=8)
    assert (settings["clip_high"], settings["advantage_mode"], settings["clip_low"]) == (0.5, "rloo", 0.2)
    for explicit, message in [({}, "unknown rl_algorithm 'sarsa'; known: reinforce, grpo, rloo, ppo, dapo, "
                                   "ppo_critic, dpo, rft"),
                              ({"advantage_mode": "median"}, "unknown advantage_mode 'median'; known: none, baseline"),
                              ({"ppo_epochs": 0}, "ppo_epochs must be positive, got 0"),
                              ({"clip_low": -0.1}, "clip_low must be a positive finite number, got -0.1")]:
        with pytest.raises(ValueError) as e:
            resolve("sarsa" if not explicit else "ppo", explicit, group_size=8)
        assert str(e.value).startswith(message)
    with pytest.raises(ValueError, match="advantage_mode=rloo compares the answers to a prompt, so it needs "
                                         "rl_rollout_size >= 2"):
        resolve("rloo", {}, group_size=1)
    with pytest.raises(ValueError, match="unknown advantage mode 'median'"):
        compute_advantages(R, 4, "median")
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'"):
        compute_kl(R.view(1, -1), R.view(1, -1), "k4")


def test_groups_of_equal_rewards_get_exactly_zero_advantage_whatever_the_rewards():
    # 8 answers all scoring 1/3 (digit credit): the float mean is 1 ulp off, so (r - mean) / (std + eps)
    # would leave a same-sign residual of about 3e-4
    rewards = torch.full((8,), 1 / 3)
    assert torch.equal(compute_advantages(rewards, 8, "group_zscore"), torch.zeros(8))
    mixed = torch.tensor([1 / 3] * 7 + [2 / 3])
    assert (compute_advantages(mixed, 8, "group_zscore") != 0).all()


def test_masked_positions_cannot_leak_a_non_finite_value():
    values = torch.tensor([[1.0, float("inf")], [2.0, float("nan")]])
    mask = torch.tensor([[True, False], [True, False]])
    assert aggregate(values, mask, "token-mean").item() == 1.5
    # the padded position's ratio overflows to inf; with A < 0, -min(r A, clip(r) A) is +inf there
    loss, stats = compute_policy_loss(torch.tensor([[0.0, 100.0]]), torch.tensor([[0.0, -100.0]]),
                                      torch.tensor([-1.0]), torch.tensor([[True, False]]))
    assert math.isfinite(loss.item()) and stats["ratio_sum"].item() == 1.0


# ---- PPO with a critic ------------------------------------------------------------------------------
def test_the_reward_sits_on_the_answers_last_token():
    mask = torch.tensor([[True, True, True], [True, False, False]])
    assert torch.equal(token_rewards(torch.tensor([1.0, 0.5]), mask), torch.tensor([[0, 0, 1.0], [0.5, 0, 0]]))


def test_gae_on_a_short_trajectory_by_hand():
    # one answer of 3 tokens (then padding), reward 1 on the last; V = 0.5, 0.6, 0.9; gamma 0.9, lambda 0.8
    values = torch.tensor([[0.5, 0.6, 0.9, 7.0]])  # the padded position's value must be ignored
    mask = torch.tensor([[True, True, True, False]])
    rewards = token_rewards(torch.tensor([1.0]), mask)
    adv, ret = compute_gae(rewards, values, mask, gamma=0.9, lam=0.8)
    d2 = 1.0 + 0.9 * 0.0 - 0.9  # the answer ends after its last token: V = 0 there
    d1 = 0.0 + 0.9 * 0.9 - 0.6
    d0 = 0.0 + 0.9 * 0.6 - 0.5
    a2, a1 = d2, d1 + 0.9 * 0.8 * d2
    a0 = d0 + 0.9 * 0.8 * a1
    assert torch.allclose(adv, torch.tensor([[a0, a1, a2, 0.0]]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([[a0 + 0.5, a1 + 0.6, a2 + 0.9, 0.0]]), atol=1e-6)
    # gamma = lambda = 1: every advantage is the return minus the value, the return is the reward
    adv1, ret1 = compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    assert torch.allclose(ret1, torch.tensor([[1.0, 1.0, 1.0, 0.0]]))
    assert torch.allclose(adv1, torch.tensor([[0.5, 0.4, 0.1, 0.0]]), atol=1e-6)


def test_whitening_uses_the_statistics_it_is_given_and_leaves_padding_at_zero():
    x, m = torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[True, True, False]])
    assert torch.allclose(whiten(x, m, mean=2.0, std=1.0), torch.tensor([[-1.0, 1.0, 0.0]]), atol=1e-6)


def test_whitening_by_float64_device_scalars_equals_whitening_by_floats_bit_for_bit():
    # ppo_critic whitens by statistics summed on the device (no read): the same float32 advantages as the floats read
    g = torch.Generator().manual_seed(0)
    x, m = torch.randn(16, 7, generator=g), torch.rand(16, 7, generator=g) > 0.2
    mean, std = torch.tensor(0.1234567890123, dtype=torch.float64), torch.tensor(1.3579246801357, dtype=torch.float64)
    got, expected = whiten(x, m, mean, std), whiten(x, m, float(mean), float(std))
    assert got.dtype == torch.float32 and torch.equal(got, expected)
    assert not torch.equal(got, whiten(x, m, float(mean) + 1e-6, float(std)))  # (a mean 1e-6 off is seen)


def test_clipped_value_loss_by_hand_both_ways():
    old, ret = torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([[1.0, -1.0, 1.0]])
    values = torch.tensor([[0.5, 0.5, 0.1]], requires_grad=True)
    loss, stats = compute_value_loss(values, old, ret, torch.ones(1, 3, dtype=torch.bool), clip=0.2)
    # token 1: V moved up 0.5 towards R = 1; clipped V = 0.2: (0.2-1)^2 = 0.64 > (0.5-1)^2 = 0.25 -> the
    #   clipped term, no gradient through V; token 2: V moved away from R = -1: (0.5+1)^2 = 2.25 >
    #   (0.2+1)^2 = 1.44 -> the unclipped term; token 3 inside the range: both equal (0.81)
    assert math.isclose(loss.item(), 0.5 * (0.64 + 2.25 + 0.81) / 3, rel_tol=1e-6)
    loss.backward()
    assert torch.allclose(values.grad, torch.tensor([[0.0, (0.5 + 1) / 3, (0.1 - 1) / 3]]), atol=1e-6)
    assert stats["value_clipped"].item() == 1


def test_explained_variance_from_sums():
    r, v = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 2.0, 3.0, 5.0])
    e = r - v
    sums = dict(n=4, sum_r=r.sum(), sum_r2=(r ** 2).sum(), sum_e=e.sum(), sum_e2=(e ** 2).sum())
    assert math.isclose(explained_variance({k: float(x) for k, x in sums.items()}), 1 - e.var(unbiased=False).item()
                        / r.var(unbiased=False).item(), rel_tol=1e-6)
    perfect = dict(n=4, sum_r=10.0, sum_r2=30.0, sum_e=0.0, sum_e2=0.0)
    assert explained_variance(perfect) == 1.0


# ---- DPO --------------------------------------------------------------------------------------------
def test_preference_pairs_match_right_with_wrong_answers_of_the_same_prompt():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])  # G = 4
    chosen, rejected = preference_pairs(rewards, 4)
    # group 0: right 0, 3 / wrong 1, 2 -> 2 pairs; group 1: all right -> none; group 2: right 9 / wrong 8, 10, 11
    assert chosen.tolist() == [0, 3, 9] and rejected.tolist() == [2, 1, 11]
    assert (rewards[chosen] > rewards[rejected]).all()


def test_dpo_loss_and_gradient_by_hand():
    chosen, rejected = torch.tensor([-1.0, -2.0], requires_grad=True), torch.tensor([-1.5, -1.0], requires_grad=True)
    ref_c, ref_r = torch.tensor([-1.2, -2.0]), torch.tensor([-1.0, -1.5])
    beta = 0.5
    loss, stats = dpo_loss(chosen, rejected, ref_c, ref_r, beta, num_pairs=4)
    # implicit rewards: chosen 0.5*0.2 = 0.1 and 0; rejected 0.5*(-0.5) = -0.25 and 0.5*0.5 = 0.25
    z = torch.tensor([0.1 + 0.25, 0.0 - 0.25])
    assert math.isclose(loss.item(), -torch.log(torch.sigmoid(z)).sum().item() / 4, rel_tol=1e-6)
    loss.backward()
    # d/dchosen -log sigmoid(beta (c - r ...)) = -beta * sigmoid(-z); the rejected get the opposite
    assert torch.allclose(chosen.grad, -beta * torch.sigmoid(-z) / 4, atol=1e-6)
    assert torch.allclose(rejected.grad, beta * torch.sigmoid(-z) / 4, atol=1e-6)
    assert stats["preferred"].item() == 1 and stats["pairs"] == 2
    assert math.isclose(stats["chosen_reward"].item(), 0.1, rel_tol=1e-5)
    assert math.isclose(stats["rejected_reward"].item(), 0.0, abs_tol=1e-6)


def test_sequence_logprobs_sum_the_answer_up_to_its_mask():
    logp = torch.tensor([[[-0.1, -0.2, -9.0], [-0.3, float("-inf"), -9.0]]])  # (1, 2, A): a pair
    mask = torch.tensor([[[True, True, False], [True, False, False]]])
    assert torch.allclose(sequence_logprobs(logp, mask), torch.tensor([[-0.3, -0.3]]))
