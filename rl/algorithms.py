"""The policy-gradient family as small pure functions on tensors, and the table of algorithms.

Shapes: N sampled answers (G consecutive answers per prompt, so N = num_prompts * G), A answer
positions (the answer's tokens, end token included), V vocabulary. No function here reads global
state or mutates its inputs; each is tested against values computed by hand in
tests/test_algorithms.py.

Sources for the formulas:
  REINFORCE with a baseline   Williams 1992; Sutton & Barto ch. 13.4
  GRPO (group z-score)        Shao et al. 2024, DeepSeekMath, eq. (3); std as in TRL's GRPOTrainer
  Dr. GRPO                    Liu et al. 2025, "Understanding R1-Zero-Like Training" (no std, constant length)
  RLOO (leave-one-out)        Ahmadian et al. 2024, "Back to Basics", eq. (6)
  REINFORCE++-style advantage Hu 2025, "REINFORCE++" (its global batch normalisation only)
  PPO clipped objective       Schulman et al. 2017, eq. (7)
  DAPO (clip-higher, dynamic sampling, token-level loss)  Yu et al. 2025
  PPO with a critic, GAE      Schulman et al. 2016 (GAE), 2017 (PPO, clipped value loss in its code); Ouyang et al.
                              2022 (InstructGPT); Huang et al. 2024, "The N+ implementation details of RLHF with PPO"
  DPO, online DPO             Rafailov et al. 2023, eq. (7); Guo et al. 2024, "Direct language model alignment
                              from online AI feedback"
  rejection-sampling fine-tuning  Zelikman et al. 2022 (STaR); Dong et al. 2023 (RAFT); Gulcehre et al. 2023 (ReST)
  KL estimators k1, k2, k3    Schulman 2020, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html)
  KL gradients                Tang & Munos 2025, "On a few pitfalls in KL divergence gradient estimation for RL"
  loss aggregation            token-mean and seq-mean-token-mean as verl's agg_loss; seq-mean-token-sum-norm
                              as the Dr. GRPO paper, 1/G sum_i sum_t / MAX_TOKENS (verl's differs by a constant)
"""

import math

import torch
import torch.nn.functional as F

from model.gpt import PromptGroups

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
GROUP_STD_EPS = 1e-4  # TRL's GRPOTrainer: (r - mean) / (std + 1e-4)

# Where each KL estimator goes, so that its gradient is that of a KL (kl_coef > 0; see compute_kl):
#   k1  into the reward, r_i - kl_coef * sum_t k1 (the classic RLHF placement): the policy gradient
#       of that reward is the gradient of the sequence-level KL(pi || pi_ref)
#   k2  into the loss, kl_coef * aggregate(k2): its gradient is that of KL(pi || pi_ref) per token
#   k3  into the loss (GRPO's choice): its gradient is that of the *forward* KL(pi_ref || pi) per
#       token, although its value estimates KL(pi || pi_ref)
KL_PLACEMENT = {"k1": "reward", "k2": "loss", "k3": "loss"}

# What each rl_algorithm means; a config field set explicitly overrides its entry here. `objective`
# is what the update optimises: the policy gradient (with per-answer advantages, or per-token GAE
# advantages from a learned critic), the DPO loss on preference pairs, or the log-likelihood of the
# sampled answers that are right (rejection-sampling fine-tuning).
ALGORITHMS = {
    # the textbook: A = r - moving average, one on-policy update per rollout
    "reinforce": dict(advantage_mode="baseline", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=1,
                      clip_low=0.2, clip_high=0.2, dynamic_sampling=False, objective="policy_gradient"),
    # GRPO as in DeepSeekMath: group z-score, per-sequence mean then batch mean (without its KL term,
    # as Dr. GRPO and DAPO; add one with kl_coef)
    "grpo": dict(advantage_mode="group_zscore", loss_aggregation="seq-mean-token-mean", ppo_epochs=1,
                 ppo_minibatches=1, clip_low=0.2, clip_high=0.2, dynamic_sampling=False, objective="policy_gradient"),
    # RLOO: each answer's baseline is the mean reward of the other answers to its prompt
    "rloo": dict(advantage_mode="rloo", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=1,
                 clip_low=0.2, clip_high=0.2, dynamic_sampling=False, objective="policy_gradient"),
    # PPO-clip without a value network: several epochs of minibatches over each rollout, ratios
    # to the policy that sampled, asymmetric clip range
    "ppo": dict(advantage_mode="group_mean", loss_aggregation="token-mean", ppo_epochs=2, ppo_minibatches=2,
                clip_low=0.2, clip_high=0.28, dynamic_sampling=False, objective="policy_gradient"),
    # DAPO: clip-higher, dynamic sampling (all-equal groups dropped and refilled), token-level loss
    "dapo": dict(advantage_mode="group_zscore", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=2,
                 clip_low=0.2, clip_high=0.28, dynamic_sampling=True, objective="policy_gradient"),
    # PPO as RLHF uses it: a learned value function (a critic initialised from the warm start), GAE
    # over the answer's tokens with the reward on its last token, whitened advantages, clipped ratio
    # and clipped value loss, several epochs of minibatches
    "ppo_critic": dict(advantage_mode="gae", loss_aggregation="token-mean", ppo_epochs=2, ppo_minibatches=2,
                       clip_low=0.2, clip_high=0.2, dynamic_sampling=False, objective="policy_gradient"),
    # online DPO: answers to the same prompt paired as chosen (higher reward) and rejected, the DPO
    # loss against the frozen policy RL starts from
    "dpo": dict(advantage_mode="none", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=1,
                clip_low=0.2, clip_high=0.2, dynamic_sampling=False, objective="dpo"),
    # rejection-sampling fine-tuning: the log-likelihood of the sampled answers that are exactly right
    "rft": dict(advantage_mode="none", loss_aggregation="token-mean", ppo_epochs=1, ppo_minibatches=1,
                clip_low=0.2, clip_high=0.2, dynamic_sampling=False, objective="rft"),
}
ALGORITHM_FIELDS = tuple(next(iter(ALGORITHMS.values())))  # the settings a row of the table fixes


def resolve(algorithm: str, explicit: dict, group_size: int, kl_estimator: str = "k2") -> dict:
    """The settings of `algorithm`'s row, each replaced by its `explicit` value when that is not None;
    ValueError (one line) for an unknown name or a setting the formulas cannot take. (The objective's name
    is rl/objectives.py's to know: its OBJECTIVES, the one dispatch.)"""
    if kl_estimator not in KL_PLACEMENT:
        raise ValueError(f"unknown kl_estimator {kl_estimator!r}; known: {', '.join(KL_PLACEMENT)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown rl_algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    settings = {k: v if explicit.get(k) is None else explicit[k] for k, v in ALGORITHMS[algorithm].items()}
    for key, known in (("advantage_mode", ADVANTAGE_MODES), ("loss_aggregation", AGGREGATIONS)):
        if settings[key] not in known:
            raise ValueError(f"unknown {key} {settings[key]!r}; known: {', '.join(known)}")
    for key in ("ppo_epochs", "ppo_minibatches"):
        if settings[key] <= 0:
            raise ValueError(f"{key} must be positive, got {settings[key]}")
    for key in ("clip_low", "clip_high"):
        if not (math.isfinite(settings[key]) and settings[key] > 0):
            raise ValueError(f"{key} must be a positive finite number, got {settings[key]}")
    if settings["clip_low"] >= 1:  # the ratio's floor 1 - clip_low must stay above 0
        raise ValueError(f"clip_low must be in (0, 1): the ratio is clipped below at 1 - clip_low, "
                         f"got {settings['clip_low']}")
    if (settings["advantage_mode"] in ("rloo", "group_zscore") or settings["objective"] == "dpo") and group_size < 2:
        what = "objective=dpo" if settings["objective"] == "dpo" else f"advantage_mode={settings['advantage_mode']}"
        raise ValueError(f"{what} compares the answers to a prompt, so it needs rl_rollout_size >= 2")
    if settings["advantage_mode"] in ("gae", "token_zscore") and settings["objective"] != "policy_gradient":
        raise ValueError(f"advantage_mode={settings['advantage_mode']} is the policy gradient's; "
                         f"objective={settings['objective']} takes none")
    return settings


def update_baseline(baseline, mean_reward: float, momentum: float) -> float:
    """Moving-average baseline: b <- momentum * b + (1 - momentum) * mean_reward.

    A baseline that is None (no step seen yet) starts at mean_reward, so the first step's
    advantages are centred instead of all positive.
    """
    if baseline is None:
        return float(mean_reward)
    return momentum * baseline + (1.0 - momentum) * float(mean_reward)


def _group_advantages(rewards: torch.Tensor, group_size: int, mode: str) -> torch.Tensor:
    if rewards.numel() == 0:  # a rank whose dynamic sampling kept nothing
        return rewards.clone()
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if mode == "group_zscore":
        # A group whose rewards are all equal gets exactly 0: float rounding of its mean (0.1 * 8
        # != 0.8) would otherwise leave a residual that the epsilon turns into a same-sign push.
        all_equal = grouped.max(dim=1, keepdim=True).values == grouped.min(dim=1, keepdim=True).values
        z = centred / (grouped.std(dim=1, keepdim=True) + GROUP_STD_EPS)
        return torch.where(all_equal, torch.zeros_like(z), z).flatten()
    if mode == "rloo":
        return (centred * group_size / (group_size - 1)).flatten()
    return centred.flatten()


def _batch_zscore(rewards: torch.Tensor, mean, std) -> torch.Tensor:
    mean = rewards.mean() if mean is None else mean
    std = rewards.std() if std is None else std
    return (rewards - mean) / (std + GROUP_STD_EPS)


ADVANTAGE_MODES = {
    "none": lambda r, G, stats: r.clone(),
    "baseline": lambda r, G, stats: r - stats["baseline"],
    "group_mean": lambda r, G, stats: _group_advantages(r, G, "group_mean"),
    "group_zscore": lambda r, G, stats: _group_advantages(r, G, "group_zscore"),
    "rloo": lambda r, G, stats: _group_advantages(r, G, "rloo"),
    "batch_zscore": lambda r, G, stats: _batch_zscore(r, stats["batch_mean"], stats["batch_std"]),
    "gae": None,  # per token, from a critic's values: compute_gae
    "token_zscore": None,  # per token, from each token's own correctness: token_group_zscore
}
# the modes whose advantages need the whole batch's statistics over all ranks before the update: the trainer reads
# them then, not with the step's metrics (baseline's moving average needs them first only on the first step)
READS_BATCH_STATISTICS = ("batch_zscore",)


def compute_advantages(rewards: torch.Tensor, group_size: int, mode: str, *, baseline: float = None,
                       batch_mean: float = None, batch_std: float = None) -> torch.Tensor:
    """rewards (N,) -> advantages (N,); answers i*G ... i*G+G-1 belong to prompt i.

      none          A = r
      baseline      A = r - b                       (b: the moving-average baseline)
      group_mean    A = r - mean_group(r)            (Dr. GRPO)
      group_zscore  A = (r - mean_group) / (std_group + 1e-4), exactly 0 when the group's rewards
                    are all equal   (GRPO; std unbiased, as torch.std)
      rloo          A = r_i - mean_{j != i in group} r_j = G / (G - 1) * (r_i - mean_group)
      batch_zscore  A = (r - mean_batch) / (std_batch + 1e-4)   (REINFORCE++-style; pass the global
                    batch_mean and batch_std when the batch is split across ranks)
    (gae gives one advantage per token, from a critic: see compute_gae; token_zscore one per token, from
    each token's correctness: see token_group_zscore.)
    """
    if ADVANTAGE_MODES.get(mode) is None:
        raise ValueError(f"unknown advantage mode {mode!r}; known: {', '.join(ADVANTAGE_MODES)}")
    stats = {"baseline": baseline, "batch_mean": batch_mean, "batch_std": batch_std}
    return ADVANTAGE_MODES[mode](rewards, group_size, stats)


def token_group_zscore(correct: torch.Tensor, group_size: int) -> torch.Tensor:
    """Credit per token: correct (N, A), 1.0 where an answer's token is the solution's token at that place
    -> advantages (N, A). A token counts only while its answer is on the solution's path (every token before it
    right): past an answer's first wrong token the solution's tokens are no longer the right continuation, and
    those tokens get 0. At each place, the correctness of the answers still on the path is z-scored over the
    group (GRPO's group_zscore, one place at a time, unbiased std): 0 where fewer than two answers are there or
    they all agree. So an answer is pushed down at its first wrong token only, and the answers right at that
    place are pushed up there; the places the group agrees on are left alone. (As with an exact value function
    V(prefix) = P(right | prefix), whose advantages are 0 once an answer has gone wrong.)"""
    num_answers, answer_len = correct.shape
    c = correct.view(-1, group_size, answer_len)  # (N / G, G, A)
    # on the path at place t: every token before t right (the first place always)
    on = torch.cat([torch.ones_like(c[..., :1]), torch.cumprod(c, dim=-1)[..., :-1]], dim=-1)
    n, right = on.sum(dim=1, keepdim=True), (c * on).sum(dim=1, keepdim=True)  # (N / G, 1, A)
    mean = right / n.clamp(min=1)
    std = (((c - mean) ** 2 * on).sum(dim=1, keepdim=True) / (n - 1).clamp(min=1)).sqrt()
    informative = (right > 0) & (right < n) & (on > 0)  # exactly 0 wherever the answers there agree
    z = torch.where(informative, (c - mean) / (std + GROUP_STD_EPS), torch.zeros_like(c))
    return z.view(num_answers, answer_len)


def group_all_equal(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(N,) rewards -> (N / G,) bool: True where every answer to a prompt got the same reward."""
    grouped = rewards.view(-1, group_size)
    return grouped.max(dim=1).values == grouped.min(dim=1).values


def answer_mask(generated: torch.Tensor, end_token: int) -> torch.Tensor:
    """(N, A) generated tokens -> (N, A) bool: the tokens the policy chose, up to and including its
    first end token. Positions after it are padding the policy never chose, so they carry no
    gradient. A row without an end token keeps all A positions."""
    is_end = (generated == end_token).long()
    ended_before = torch.cumsum(is_end, dim=1) - is_end
    return ended_before == 0


def answer_logits(model, sequences: torch.Tensor, prompt_len: int, temperature: float = 1.0,
                  pos=None, groups=None) -> torch.Tensor:
    """The policy's logits for each answer token, at the sampling temperature: sequences (N, P + A)
    -> (N, A, V), so that softmax of them is the distribution the sampler drew from. Position
    P - 1 (the prompt's last token) predicts the first answer token; the last token is never read.
    pos (N, P + A): the position ids the task gives the sequences (None: the model's 0, 1, 2, ...).
    groups (model/gpt.py PromptGroups, of length P): the rows that share a prompt, read once (prefix_sharing).
    (The one place that calls a model: every log-prob of the project goes through it.)"""
    ids = None if pos is None else pos[:, :-1]
    if groups is not None:  # a grouped pass returns the logits from position P - 1 on
        return model(sequences[:, :-1], pos=ids, groups=groups).float() / temperature
    if pos is None:  # (a model of tokens alone, as the tests' stand-ins are, takes the call it always took)
        return model(sequences[:, :-1])[:, prompt_len - 1:].float() / temperature
    return model(sequences[:, :-1], pos=ids)[:, prompt_len - 1:].float() / temperature


@torch.no_grad()
def policy_logprobs(model, sequences: torch.Tensor, generated: torch.Tensor, prompt_len: int, temperature: float,
                    num_chunks: int = 1, *, pos=None, group_size: int = 0) -> torch.Tensor:
    """(N, A) log-probs of the generated answers under `model`, without gradient, in num_chunks
    forward passes (to bound memory as the update's micro-batches do); pos (N, P + A) as answer_logits's.
    group_size G > 0: rows i*G ... i*G+G-1 share their prompt (a rollout's), each chunk reading each prompt once."""
    ids = torch.tensor_split(pos, num_chunks) if pos is not None else [None] * num_chunks
    rows = torch.tensor_split(torch.arange(len(sequences)), num_chunks)  # (on the host, for the groups)
    groups = [PromptGroups.of_rows(r, group_size, prompt_len, sequences.device) if group_size and len(r) else None
              for r in rows]
    chunks = zip(torch.tensor_split(sequences, num_chunks), torch.tensor_split(generated, num_chunks), ids, groups)
    parts = [token_logprobs(answer_logits(model, seq, prompt_len, temperature, p, g), gen) for seq, gen, p, g in chunks]
    return torch.cat(parts)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log softmax(logits) at the chosen tokens: logits (N, A, V), tokens (N, A) -> (N, A)."""
    return F.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def masked(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values where mask is set, exactly 0 elsewhere: unlike values * mask, an inf or nan at a
    padded position (say an overflowing ratio the policy never chose) cannot leak into a sum."""
    return torch.where(mask.bool(), values, torch.zeros_like(values))


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, *, num_tokens: float = None,
              num_sequences: float = None, max_len: int = None) -> torch.Tensor:
    """Reduce per-token values (N, A) under mask (N, A) to a scalar:

      token-mean               sum_{i,t} v * m / num_tokens             (every token weighs the same)
      seq-mean-token-mean      sum_i [sum_t v * m / len_i] / num_sequences   (every answer weighs the same)
      seq-mean-token-sum-norm  sum_{i,t} v * m / (num_sequences * max_len)   (Dr. GRPO: a constant)

    num_tokens and num_sequences default to this call's counts; pass the counts of the whole
    optimizer step (all micro-batches, all ranks) so that splitting the batch changes nothing.
    """
    kept = masked(values, mask)
    if mode == "token-mean":
        n = mask.sum() if num_tokens is None else num_tokens
        return kept.sum() / n
    n_seq = values.size(0) if num_sequences is None else num_sequences
    if mode == "seq-mean-token-mean":
        per_seq = kept.sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return per_seq.sum() / n_seq
    if mode == "seq-mean-token-sum-norm":
        L = values.size(1) if max_len is None else max_len
        return kept.sum() / (n_seq * L)
    raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")


def compute_policy_loss(logp: torch.Tensor, old_logp, advantages: torch.Tensor, mask: torch.Tensor, *,
                        clip_low: float = 0.2, clip_high: float = 0.2, aggregation: str = "token-mean",
                        **norm) -> tuple:
    """Policy-gradient loss and clipping statistics.

    logp (N, A) under the current policy, advantages (N,) (one per answer) or (N, A) (one per
    token), mask (N, A).
    old_logp None: the plain policy gradient, per token -A_{i,t} * logp_{i,t}.
    old_logp (N, A), the log-probs of the policy that sampled: PPO's clipped surrogate with
    ratio r = exp(logp - old_logp), per token -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A).
    The per-token losses are reduced by `aggregate(..., aggregation, **norm)`.

    Returns (loss, stats) with stats = {"clip_low": tokens where A < 0 and r < 1 - clip_low,
    "clip_high": tokens where A > 0 and r > 1 + clip_high, "ratio_sum": sum of r, "tokens": count},
    sums over the masked tokens, so callers can add them across micro-batches and ranks.
    """
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
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
                 "ratio_sum": masked(ratio, m).sum().float(), "tokens": m.sum().float()}
    return loss, stats


def compute_kl(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k2") -> torch.Tensor:
    """Per-token estimates of KL(pi || pi_ref) from tokens sampled by pi, with log r = logp - ref_logp.
    (N, A) -> (N, A). As values:

      k1 = log r                      unbiased, high variance, can be negative
      k2 = (log r)^2 / 2              biased, low variance, >= 0
      k3 = exp(-log r) - 1 + log r    unbiased, low variance, >= 0

    As losses their gradients differ (KL_PLACEMENT says where each goes): differentiated through
    logp on tokens drawn from pi, k1's expected gradient is exactly 0, k2's is grad KL(pi || pi_ref)
    and k3's is grad KL(pi_ref || pi).
    """
    log_ratio = logp - ref_logp
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio ** 2
    if estimator == "k3":
        return torch.exp(-log_ratio) - 1.0 + log_ratio
    raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_PLACEMENT)}")


def kl_reward_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The sequence-level k1, sum_t (logp - ref_logp) over each answer: (N, A) -> (N,), no gradient.
    Subtracted from the reward (times kl_coef) before the advantages, its policy gradient is the
    gradient of KL(pi || pi_ref) over whole answers, the effect of each token on later ones included."""
    return masked(logp - ref_logp, mask).sum(dim=1).detach()


def compute_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) at each masked position, 0 elsewhere. (N, A, V), (N, A) -> (N, A)."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return masked(-(logp.exp() * logp).sum(dim=-1), mask)


# ---- PPO with a critic ----------------------------------------------------------------------------
def token_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """An answer's reward on its last token, 0 on the others: rewards (N,), mask (N, A) -> (N, A)."""
    last = mask.long().sum(dim=1).clamp(min=1) - 1
    out = torch.zeros(mask.shape, dtype=rewards.dtype, device=rewards.device)
    return out.scatter(1, last[:, None], rewards[:, None])


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over each answer's tokens.

    rewards (N, A) the reward of each token; values (N, A) the critic's V of the state before each
    token; mask (N, A). The answer ends after its last masked token, where V is 0. Backwards over t:

        delta_t = r_t + gamma * V_{t+1} - V_t,      A_t = delta_t + gamma * lam * A_{t+1}

    Returns (advantages, returns = advantages + values), both (N, A) and 0 outside the mask; the
    returns are the critic's regression targets.
    """
    m = mask.to(values.dtype)
    advantages = torch.zeros_like(values)
    next_value = next_advantage = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.size(1))):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        next_advantage = (delta + gamma * lam * next_advantage) * m[:, t]
        next_value = values[:, t] * m[:, t]
        advantages[:, t] = next_advantage
    return advantages, masked(advantages + values, mask)


def whiten(values: torch.Tensor, mask: torch.Tensor, mean, std) -> torch.Tensor:
    """(x - mean) / (std + 1e-8) on the masked positions, 0 elsewhere; pass the batch's statistics
    over all ranks (Huang et al. 2024: advantages are whitened over the whole batch), floats or 0-dim tensors."""
    return masked((values - mean) / (std + 1e-8), mask)


def compute_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *,
                       clip: float, aggregation: str = "token-mean", **norm) -> tuple:
    """PPO's clipped value loss (the clipped objective of Schulman et al. 2017's code; Huang et al.
    2024): per token 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -clip, clip) - R)^2), reduced by
    `aggregate`. values (N, A) under the critic being trained, old_values (N, A) when the rollout
    was scored, returns (N, A). Returns (loss, stats) with stats = {"value_clipped": tokens where
    the clipped term was the larger}."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    unclipped_loss, clipped_loss = (values - returns) ** 2, (clipped - returns) ** 2
    loss = aggregate(0.5 * torch.maximum(unclipped_loss, clipped_loss), mask, aggregation, **norm)
    with torch.no_grad():
        stats = {"value_clipped": (masked((clipped_loss > unclipped_loss).float(), mask)).sum()}
    return loss, stats


def explained_variance(predicted_sums: dict) -> float:
    """1 - Var(R - V) / Var(R) from sums over the masked tokens of all ranks: n, sum_r, sum_r2,
    sum_e, sum_e2 (R the returns, e = R - V). 1 is a perfect critic, 0 one no better than a constant."""
    n = max(predicted_sums["n"], 1.0)
    var = lambda s, s2: s2 / n - (s / n) ** 2
    var_r = var(predicted_sums["sum_r"], predicted_sums["sum_r2"])
    return 1.0 - var(predicted_sums["sum_e"], predicted_sums["sum_e2"]) / var_r if var_r > 0 else 0.0


# ---- DPO --------------------------------------------------------------------------------------------
def preference_pairs(rewards: torch.Tensor, group_size: int) -> tuple:
    """Pairs of answers to the same prompt with different rewards: within each group of G, the
    answers sorted by reward (highest first), the i-th paired with the i-th from the end while the
    first's reward is higher (so a group with k right and G - k wrong answers gives min(k, G - k)
    pairs, none when all are equal). rewards (N,) -> (chosen indices (num_pairs,), rejected indices (num_pairs,))."""
    chosen, rejected = [], []
    grouped = rewards.view(-1, group_size).tolist()
    for g, group in enumerate(grouped):
        order = sorted(range(group_size), key=lambda i: -group[i])  # stable: ties keep their order
        for i in range(group_size // 2):
            hi, lo = order[i], order[group_size - 1 - i]
            if group[hi] > group[lo]:
                chosen.append(g * group_size + hi), rejected.append(g * group_size + lo)
    as_index = lambda x: torch.tensor(x, dtype=torch.long, device=rewards.device)
    return as_index(chosen), as_index(rejected)


def sequence_logprobs(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log pi(answer) = the sum of its tokens' log-probs over the last dimension: (..., A) -> (...)."""
    return masked(logp, mask).sum(dim=-1)


def dpo_loss(chosen: torch.Tensor, rejected: torch.Tensor, ref_chosen: torch.Tensor, ref_rejected: torch.Tensor,
             beta: float, num_pairs: float = None) -> tuple:
    """The DPO loss (Rafailov et al. 2023, eq. 7) over pairs of sequence log-probs (num_pairs,) each:

        -log sigmoid(beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))])

    summed and divided by num_pairs (default: the pairs given; pass the count over all ranks). The implicit
    rewards are beta * (log pi - log pi_ref). Returns (loss, stats) with sums over the pairs:
    "pairs", "preferred" (chosen's implicit reward above the rejected's), "chosen_reward",
    "rejected_reward"."""
    chosen_reward, rejected_reward = beta * (chosen - ref_chosen), beta * (rejected - ref_rejected)
    loss = -F.logsigmoid(chosen_reward - rejected_reward).sum() / (len(chosen) if num_pairs is None else num_pairs)
    with torch.no_grad():
        stats = {"pairs": float(len(chosen)), "preferred": (chosen_reward > rejected_reward).sum().float(),
                 "chosen_reward": chosen_reward.sum(), "rejected_reward": rejected_reward.sum()}
    return loss, stats
