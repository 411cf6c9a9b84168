"""The policy-gradient family as small pure functions on tensors, and the table of algorithms.

Shapes: N sampled answers (G consecutive answers per prompt, so N = num_prompts * G), A answer
positions (answer digits + end token), V vocabulary. No function here reads global state or
mutates its inputs; each is tested against values computed by hand in tests/test_algorithms.py.

Sources for the formulas:
  REINFORCE with a baseline   Williams 1992; Sutton & Barto ch. 13.4
  GRPO (group z-score)        Shao et al. 2024, DeepSeekMath, eq. (3); std as in TRL's GRPOTrainer
  Dr. GRPO                    Liu et al. 2025, "Understanding R1-Zero-Like Training" (no std, constant length)
  RLOO (leave-one-out)        Ahmadian et al. 2024, "Back to Basics", eq. (6)
  REINFORCE++ (batch z-score) Hu 2025, "REINFORCE++"
  PPO clipped objective       Schulman et al. 2017, eq. (7)
  DAPO (clip-higher, dynamic sampling, token-level loss)  Yu et al. 2025
  KL estimators k1, k2, k3    Schulman 2020, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html)
  loss aggregation names      verl, verl/trainer/ppo/core_algos.py: agg_loss
"""

import torch
import torch.nn.functional as F

ADVANTAGE_MODES = ("none", "baseline", "group_mean", "group_zscore", "rloo", "batch_zscore")
AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
GROUP_STD_EPS = 1e-4  # TRL's GRPOTrainer: (r - mean) / (std + 1e-4)

# What each rl_algorithm means; a config field set explicitly overrides its entry here.
ALGORITHMS = {
    # the textbook: A = r - moving average, one on-policy update per rollout
    "reinforce": dict(advantage_mode="baseline", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=1,
                      clip_low=0.2, clip_high=0.2, dynamic_sampling=False),
    # GRPO as in DeepSeekMath: group z-score, per-sequence mean then batch mean
    "grpo": dict(advantage_mode="group_zscore", loss_aggregation="seq-mean-token-mean", ppo_epochs=1,
                 ppo_minibatches=1, clip_low=0.2, clip_high=0.2, dynamic_sampling=False),
    # RLOO: each answer's baseline is the mean reward of the other answers to its prompt
    "rloo": dict(advantage_mode="rloo", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=1,
                 clip_low=0.2, clip_high=0.2, dynamic_sampling=False),
    # PPO-clip without a value network: several epochs of minibatches over each rollout, ratios
    # to the policy that sampled, asymmetric clip range
    "ppo": dict(advantage_mode="group_mean", loss_aggregation="token-mean", ppo_epochs=2, ppo_minibatches=2,
                clip_low=0.2, clip_high=0.28, dynamic_sampling=False),
    # DAPO: clip-higher, dynamic sampling (all-equal groups dropped and refilled), token-level loss
    "dapo": dict(advantage_mode="group_zscore", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=2,
                 clip_low=0.2, clip_high=0.28, dynamic_sampling=True),
}


def update_baseline(baseline, mean_reward: float, momentum: float) -> float:
    """Moving-average baseline: b <- momentum * b + (1 - momentum) * mean_reward.

    A baseline that is None (no step seen yet) starts at mean_reward, so the first step's
    advantages are centred instead of all positive.
    """
    if baseline is None:
        return float(mean_reward)
    return momentum * baseline + (1.0 - momentum) * float(mean_reward)


def compute_advantages(rewards: torch.Tensor, group_size: int, mode: str, baseline: float = None,
                       batch_mean: float = None, batch_std: float = None) -> torch.Tensor:
    """rewards (N,) -> advantages (N,); answers i*G ... i*G+G-1 belong to prompt i.

      none          A = r
      baseline      A = r - b                       (b: the moving-average baseline)
      group_mean    A = r - mean_group(r)            (Dr. GRPO)
      group_zscore  A = (r - mean_group) / (std_group + 1e-4)   (GRPO; std unbiased, as torch.std)
      rloo          A = r_i - mean_{j != i in group} r_j = G / (G - 1) * (r_i - mean_group)
      batch_zscore  A = (r - mean_batch) / (std_batch + 1e-4)   (REINFORCE++; pass the global
                    batch_mean and batch_std when the batch is split across ranks)
    """
    if mode == "none":
        return rewards.clone()
    if mode == "baseline":
        return rewards - baseline
    if mode == "batch_zscore":
        mean = rewards.mean() if batch_mean is None else batch_mean
        std = rewards.std() if batch_std is None else batch_std
        return (rewards - mean) / (std + GROUP_STD_EPS)
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if mode == "group_mean":
        return centred.flatten()
    if mode == "group_zscore":
        return (centred / (grouped.std(dim=1, keepdim=True) + GROUP_STD_EPS)).flatten()
    if mode == "rloo":
        return (centred * group_size / (group_size - 1)).flatten()
    raise ValueError(f"unknown advantage mode {mode!r}; known: {', '.join(ADVANTAGE_MODES)}")


def answer_mask(generated: torch.Tensor, end_token: int) -> torch.Tensor:
    """(N, A) generated tokens -> (N, A) bool: the tokens the policy chose, up to and including its
    first end token. Positions after it are padding the policy never chose, so they carry no
    gradient. A row without an end token keeps all A positions."""
    is_end = (generated == end_token).long()
    ended_before = torch.cumsum(is_end, dim=1) - is_end
    return ended_before == 0


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log pi(token_t | prefix) for each position. logits (N, A, V), tokens (N, A) -> (N, A).
    Pass the sampling temperature so the log-probs are those of the policy that drew the tokens,
    softmax(logits / temperature), and the update stays on-policy."""
    logp = F.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, num_tokens: float = None,
              num_sequences: float = None, max_len: int = None) -> torch.Tensor:
    """Reduce per-token values (N, A) under mask (N, A) to a scalar (verl's agg_loss):

      token-mean               sum_{i,t} v * m / num_tokens             (every token weighs the same)
      seq-mean-token-mean      sum_i [sum_t v * m / len_i] / num_sequences   (every answer weighs the same)
      seq-mean-token-sum-norm  sum_{i,t} v * m / (num_sequences * max_len)   (Dr. GRPO: a constant)

    num_tokens and num_sequences default to this call's counts; pass the counts of the whole
    optimizer step (all micro-batches, all ranks) so that splitting the batch changes nothing.
    """
    mask = mask.to(values.dtype)
    if mode == "token-mean":
        n = mask.sum() if num_tokens is None else num_tokens
        return (values * mask).sum() / n
    n_seq = values.size(0) if num_sequences is None else num_sequences
    if mode == "seq-mean-token-mean":
        per_seq = (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return per_seq.sum() / n_seq
    if mode == "seq-mean-token-sum-norm":
        L = values.size(1) if max_len is None else max_len
        return (values * mask).sum() / (n_seq * L)
    raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")


def compute_policy_loss(logp: torch.Tensor, old_logp, advantages: torch.Tensor, mask: torch.Tensor,
                        clip_low: float = 0.2, clip_high: float = 0.2, aggregation: str = "token-mean",
                        **norm) -> tuple:
    """Policy-gradient loss and clipping statistics.

    logp (N, A) under the current policy, advantages (N,), mask (N, A).
    old_logp None: the plain policy gradient, per token -A_i * logp_{i,t}.
    old_logp (N, A), the log-probs of the policy that sampled: PPO's clipped surrogate with
    ratio r = exp(logp - old_logp), per token -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A).
    The per-token losses are reduced by `aggregate(..., aggregation, **norm)`.

    Returns (loss, stats) with stats = {"clip_low": tokens where A < 0 and r < 1 - clip_low,
    "clip_high": tokens where A > 0 and r > 1 + clip_high, "ratio_sum": sum of r, "tokens": count},
    sums over the masked tokens, so callers can add them across micro-batches and ranks.
    """
    adv = advantages.unsqueeze(1)
    m = mask.bool()
    if old_logp is None:
        per_token = -adv * logp
        ratio = torch.ones_like(logp)
    else:
        ratio = torch.exp(logp - old_logp)
        clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
        per_token = -torch.minimum(ratio * adv, clipped * adv)
    loss = aggregate(per_token, mask, aggregation, **norm)
    with torch.no_grad():
        stats = {"clip_low": ((ratio < 1.0 - clip_low) & (adv < 0) & m).sum().float(),
                 "clip_high": ((ratio > 1.0 + clip_high) & (adv > 0) & m).sum().float(),
                 "ratio_sum": (ratio * m).sum().float(), "tokens": m.sum().float()}
    return loss, stats


def compute_kl(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from tokens sampled by pi. (N, A) -> (N, A).

      k1 = log r            unbiased, high variance, can be negative
      k2 = (log r)^2 / 2    biased, low variance, >= 0
      k3 = (1/r - 1) + log r = exp(-log r) - 1 + log r   unbiased, low variance, >= 0 (GRPO's choice)
    with log r = logp - ref_logp.
    """
    log_ratio = logp - ref_logp
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio ** 2
    if estimator == "k3":
        return torch.exp(-log_ratio) - 1.0 + log_ratio
    raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")


def compute_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of the policy at each masked position, 0 elsewhere. logits (N, A, V), mask (N, A) -> (N, A)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(dim=-1) * mask
