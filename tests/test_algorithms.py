"""Advantages, baseline, masking, loss values and gradients against hand computation.
Run: python -m pytest tests/test_algorithms.py"""

import math

import torch

from rl.algorithms import (answer_mask, compute_advantages, compute_entropy, compute_policy_loss, token_logprobs,
                           update_baseline)


def test_baseline_moving_average():
    assert update_baseline(None, 0.3, 0.9) == 0.3  # first step starts at the mean
    assert math.isclose(update_baseline(0.5, 1.0, 0.9), 0.55)  # 0.9 * 0.5 + 0.1 * 1.0
    assert math.isclose(update_baseline(0.55, 0.0, 0.9), 0.495)
    assert update_baseline(0.5, 1.0, 0.0) == 1.0


def test_advantages_subtract_the_baseline():
    assert torch.allclose(compute_advantages(torch.tensor([1.0, 0.0, 1.0]), 0.25), torch.tensor([0.75, -0.25, 0.75]))


def test_mask_keeps_tokens_up_to_the_first_end():
    END = 11
    generated = torch.tensor([[1, 2, 3, 4, END], [1, END, 12, 12, 12], [1, 2, 3, 4, 5], [END, 12, 12, 12, 12]])
    expected = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(answer_mask(generated, END), expected)


def test_token_logprobs_pick_the_chosen_token():
    logits = torch.tensor([[[0.0, math.log(3.0)], [math.log(2.0), 0.0]]])  # probs (1/4, 3/4), (2/3, 1/3)
    logp = token_logprobs(logits, torch.tensor([[1, 1]]))
    assert torch.allclose(logp, torch.tensor([[math.log(0.75), math.log(1 / 3)]]))


def test_policy_loss_value_and_gradient_by_hand():
    # Two answers: A = (+1, -0.5); the second ended after 1 token, so 3 tokens count in all.
    logp = torch.tensor([[-0.1, -0.2], [-0.3, -0.4]], requires_grad=True)
    adv = torch.tensor([1.0, -0.5])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    loss = compute_policy_loss(logp, adv, mask, num_tokens=3)
    # -( 1*(-0.1) + 1*(-0.2) + (-0.5)*(-0.3) ) / 3 = -(-0.3 + 0.15) / 3 = 0.05
    assert math.isclose(loss.item(), 0.05, rel_tol=1e-6)
    loss.backward()
    # d loss / d logp_it = -A_i * mask_it / 3
    assert torch.allclose(logp.grad, torch.tensor([[-1 / 3, -1 / 3], [0.5 / 3, 0.0]]))


def test_micro_batches_sum_to_the_full_batch_loss():
    torch.manual_seed(0)
    logp, adv = -torch.rand(8, 5), torch.randn(8)
    mask = torch.rand(8, 5) > 0.3
    n = mask.sum().item()
    full = compute_policy_loss(logp, adv, mask, n)
    parts = sum(compute_policy_loss(logp[i:i + 2], adv[i:i + 2], mask[i:i + 2], n) for i in range(0, 8, 2))
    assert torch.allclose(full, parts)


def test_gradient_is_the_reinforce_estimator_on_a_two_armed_bandit():
    # pi = softmax(theta) over 2 arms; arm 0 pays 1, arm 1 pays 0; samples: arm 0, arm 1.
    theta = torch.tensor([0.3, -0.2], requires_grad=True)
    actions, rewards = torch.tensor([0, 1]), torch.tensor([1.0, 0.0])
    logp = torch.log_softmax(theta, dim=0)[actions].unsqueeze(1)  # (2, 1): one token each
    adv = compute_advantages(rewards, 0.5)
    compute_policy_loss(logp, adv, torch.ones(2, 1), num_tokens=2).backward()
    p = torch.softmax(theta.detach(), dim=0)
    # textbook: grad J = mean_i A_i * grad log pi(a_i); grad log pi(a) = onehot(a) - p
    estimator = (0.5 * (torch.tensor([1.0, 0.0]) - p) + (-0.5) * (torch.tensor([0.0, 1.0]) - p)) / 2
    assert torch.allclose(-theta.grad, estimator)


def test_entropy_of_uniform_and_certain_policies():
    V = 14
    logits = torch.stack([torch.zeros(V), torch.tensor([100.0] + [0.0] * (V - 1))]).view(1, 2, V)
    mask = torch.tensor([[1.0, 1.0]])
    assert math.isclose(compute_entropy(logits, mask).item(), math.log(V), rel_tol=1e-5)
    assert math.isclose(compute_entropy(logits, torch.tensor([[1.0, 0.0]])).item(), math.log(V), rel_tol=1e-5)
