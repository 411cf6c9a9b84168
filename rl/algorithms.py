"""Policy-gradient pieces as small pure functions on tensors.

Shapes: N sampled answers per rank, A answer positions (answer digits + end token), V vocabulary.
None of these functions reads global state or mutates its inputs; each is tested against values
computed by hand in tests/test_algorithms.py.
"""

import torch
import torch.nn.functional as F


def update_baseline(baseline, mean_reward: float, momentum: float) -> float:
    """Moving-average baseline: b <- momentum * b + (1 - momentum) * mean_reward.

    A baseline that is None (no step seen yet) starts at mean_reward, so the first step's
    advantages are centred instead of all positive.
    """
    if baseline is None:
        return float(mean_reward)
    return momentum * baseline + (1.0 - momentum) * float(mean_reward)


def compute_advantages(rewards: torch.Tensor, baseline: float) -> torch.Tensor:
    """REINFORCE with a baseline: A_i = r_i - b. rewards (N,) -> advantages (N,)."""
    return rewards - baseline


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


def compute_policy_loss(logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                        num_tokens: float) -> torch.Tensor:
    """REINFORCE loss, a token mean over the whole step:

        loss = -sum_{i,t} A_i * logp_{i,t} * mask_{i,t} / num_tokens

    logp (N, A), advantages (N,), mask (N, A). num_tokens is the number of masked-in tokens of the
    whole step (all micro-batches, all ranks), so splitting a step into micro-batches or ranks
    changes nothing: the summed micro-batch losses equal the loss of the full batch. Every chosen
    token weighs the same, so a longer (malformed) answer weighs more than a short one.
    """
    return -(advantages.unsqueeze(1) * logp * mask).sum() / num_tokens


def compute_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Summed entropy of the policy at the masked positions: sum_{i,t} H(pi(. | prefix_{i,t})).
    logits (N, A, V), mask (N, A) -> scalar; divide by mask.sum() for the mean."""
    logp = F.log_softmax(logits.float(), dim=-1)
    entropy = -(logp.exp() * logp).sum(dim=-1)
    return (entropy * mask).sum()
