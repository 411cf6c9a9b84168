"""An independent, plainly written reference for the loss of each optimizer step of an RL step.

It shares no code with rl/algorithms.py or rl/math_trainer.py: its own slicing of the logits, its
own mask, advantages computed group by group in Python, the aggregations written out. The trainer
tests compare the trainer's gradient at each optimizer step with the gradient of this loss, so a
formula broken anywhere in the trainer (a scale, a shift, the temperature, the baseline's order,
a sign, a normaliser) makes them disagree.
"""

import math

import torch


def advantages(rewards: torch.Tensor, config, baseline: float) -> torch.Tensor:
    """(N,) advantages, group by group, for every advantage_mode."""
    G, mode, r = config.rl_rollout_size, config.advantage_mode, rewards.tolist()
    if mode == "baseline":
        return torch.tensor([x - baseline for x in r])
    if mode == "none":
        return torch.tensor(r)
    if mode == "batch_zscore":
        m = sum(r) / len(r)
        s = math.sqrt(sum((x - m) ** 2 for x in r) / (len(r) - 1))
        return torch.tensor([(x - m) / (s + 1e-4) for x in r])
    out = []
    for g in range(0, len(r), G):
        group = r[g:g + G]
        m = sum(group) / G
        if mode == "group_mean":
            out += [x - m for x in group]
        elif mode == "rloo":
            out += [x - (sum(group) - x) / (G - 1) for x in group]
        elif mode == "group_zscore":
            s = math.sqrt(sum((x - m) ** 2 for x in group) / (G - 1))
            out += [0.0] * G if max(group) == min(group) else [(x - m) / (s + 1e-4) for x in group]
    return torch.tensor(out)


def token_advantages(generated: torch.Tensor, solutions: torch.Tensor, G: int) -> torch.Tensor:
    """(N, A) advantages of token_zscore, place by place and group by group: at each place, the answers whose
    tokens before it are all right; their correctness (1.0 where the token is the solution's) z-scored among
    them, 0.0 where fewer than two are there or they agree; every other token 0.0."""
    N, A = generated.shape
    out = torch.zeros(N, A)
    for g in range(0, N, G):
        for t in range(A):
            there = [i for i in range(g, g + G) if all(generated[i, u] == solutions[i, u] for u in range(t))]
            group = [float(generated[i, t] == solutions[i, t]) for i in there]
            if len(group) < 2 or max(group) == min(group):
                continue
            m = sum(group) / len(group)
            s = math.sqrt(sum((x - m) ** 2 for x in group) / (len(group) - 1))
            for i, x in zip(there, group):
                out[i, t] = (x - m) / (s + 1e-4)
    return out


def mask(generated: torch.Tensor, end_token: int) -> torch.Tensor:
    """(N, A) bool: every position up to and including the first end token of each row."""
    out = torch.zeros(generated.shape, dtype=torch.bool)
    for i, row in enumerate(generated.tolist()):
        stop = row.index(end_token) if end_token in row else len(row) - 1
        out[i, :stop + 1] = True
    return out


def logits_at_answer(model, prompts: torch.Tensor, generated: torch.Tensor, temperature: float) -> torch.Tensor:
    """(N, A, V) logits at the sampling temperature: answer token t is predicted at position P-1+t."""
    full = model(torch.cat([prompts, generated], dim=1))
    P, A = prompts.size(1), generated.size(1)
    return torch.stack([full[:, P - 1 + t] for t in range(A)], dim=1) / temperature


def logprobs(logits: torch.Tensor, generated: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits, dim=-1)
    return torch.stack([logp[i, t, generated[i, t]] for i in range(generated.size(0))
                        for t in range(generated.size(1))]).view(generated.shape)


def reduce(values: torch.Tensor, m: torch.Tensor, aggregation: str) -> torch.Tensor:
    """values (n, A) over the rows of one optimizer step; m their mask."""
    kept = torch.where(m, values, torch.zeros_like(values))
    if aggregation == "token-mean":
        return kept.sum() / m.sum()
    if aggregation == "seq-mean-token-mean":
        return sum(kept[i].sum() / m[i].sum() for i in range(len(m))) / len(m)
    return kept.sum() / (len(m) * m.size(1))  # seq-mean-token-sum-norm


def step_loss(model, config, env, batch: dict, rows: torch.Tensor) -> torch.Tensor:
    """The loss whose gradient one optimizer step of the trainer must take, on `rows` of `batch`:
    batch holds prompts, generated, advantages (N,), old_logp (N, A) or None, ref_logp (N, A) or None."""
    c = config
    prompts, generated, adv = batch["prompts"][rows], batch["generated"][rows], batch["advantages"][rows]
    m = mask(generated, env.end_token)
    logits = logits_at_answer(model, prompts, generated, c.rl_temperature)
    logp = logprobs(logits, generated)
    A = adv if adv.dim() == 2 else adv[:, None].expand_as(logp)  # per token (GAE) or per answer
    if batch["old_logp"] is None:
        per_token = -A * logp
    else:
        ratio = torch.exp(logp - batch["old_logp"][rows])
        per_token = -torch.minimum(ratio * A, torch.clamp(ratio, 1 - c.clip_low, 1 + c.clip_high) * A)
    loss = reduce(per_token, m, c.loss_aggregation)
    if c.entropy_coef > 0:
        p = torch.softmax(logits, dim=-1)
        entropy = -(p * torch.log_softmax(logits, dim=-1)).sum(-1)
        loss = loss - c.entropy_coef * reduce(entropy, m, c.loss_aggregation)  # a bonus: more entropy, less loss
    if c.kl_coef > 0 and c.kl_estimator in ("k2", "k3"):
        log_r = logp - batch["ref_logp"][rows]
        kl = 0.5 * log_r ** 2 if c.kl_estimator == "k2" else torch.exp(-log_r) - 1 + log_r
        loss = loss + c.kl_coef * reduce(kl, m, c.loss_aggregation)
    return loss


@torch.no_grad()
def answer_logprobs(model, prompts, generated, temperature) -> torch.Tensor:
    return logprobs(logits_at_answer(model, prompts, generated, temperature), generated)


def kl_penalised_rewards(rewards, model, ref_model, prompts, generated, config, env) -> torch.Tensor:
    """r_i - kl_coef * sum over the answer's tokens of log pi - log pi_ref (kl_estimator=k1)."""
    m = mask(generated, env.end_token)
    diff = (answer_logprobs(model, prompts, generated, config.rl_temperature)
            - answer_logprobs(ref_model, prompts, generated, config.rl_temperature))
    return rewards - config.kl_coef * torch.where(m, diff, torch.zeros_like(diff)).sum(dim=1)


# ---- PPO with a critic, DPO, RFT ----------------------------------------------------------------
def critic_values(critic, prompts, generated) -> torch.Tensor:
    """(N, A) the critic's V of the state before each answer token (position P-1+t)."""
    full = critic(torch.cat([prompts, generated], dim=1))
    P, A = prompts.size(1), generated.size(1)
    return torch.stack([full[:, P - 1 + t] for t in range(A)], dim=1)


def gae(rewards: torch.Tensor, values: torch.Tensor, m: torch.Tensor, gamma: float, lam: float):
    """Per row, backwards over its own tokens: the reward on the last one, V = 0 after it."""
    adv, ret = torch.zeros_like(values), torch.zeros_like(values)
    for i in range(len(rewards)):
        L = int(m[i].sum())
        running = 0.0
        for t in reversed(range(L)):
            next_v = values[i, t + 1].item() if t + 1 < L else 0.0
            r = rewards[i].item() if t == L - 1 else 0.0
            running = r + gamma * next_v - values[i, t].item() + gamma * lam * running
            adv[i, t], ret[i, t] = running, running + values[i, t].item()
    flat = adv[m]
    mean, std = flat.mean(), flat.var(unbiased=False).sqrt()
    return torch.where(m, (adv - mean) / (std + 1e-8), torch.zeros_like(adv)), ret


def value_loss(critic, config, batch: dict, rows: torch.Tensor) -> torch.Tensor:
    m = mask(batch["generated"][rows], batch["end_token"])
    v = critic_values(critic, batch["prompts"][rows], batch["generated"][rows])
    old, ret = batch["old_values"][rows], batch["returns"][rows]
    clipped = old + torch.clamp(v - old, -config.value_clip, config.value_clip)
    per_token = 0.5 * torch.maximum((v - ret) ** 2, (clipped - ret) ** 2)
    return reduce(per_token, m, config.loss_aggregation)


def pairs(rewards: torch.Tensor, G: int):
    """Within each group: answers by reward, highest first, the i-th with the i-th from the end."""
    chosen, rejected = [], []
    for g in range(0, len(rewards), G):
        r = rewards[g:g + G].tolist()
        order = sorted(range(G), key=lambda i: -r[i])
        for i in range(G // 2):
            if r[order[i]] > r[order[G - 1 - i]]:
                chosen.append(g + order[i]), rejected.append(g + order[G - 1 - i])
    return torch.tensor(chosen, dtype=torch.long), torch.tensor(rejected, dtype=torch.long)


def dpo_step_loss(model, ref_model, config, env, batch: dict, rows: torch.Tensor) -> torch.Tensor:
    """The DPO loss over the pairs `rows` (indices into batch["chosen"] / batch["rejected"])."""
    def seq_logp(m, idx, grad=True):
        p, g = batch["prompts"][idx], batch["generated"][idx]
        with torch.set_grad_enabled(grad):
            lp = logprobs(logits_at_answer(m, p, g, config.rl_temperature), g)
        return torch.where(mask(g, env.end_token), lp, torch.zeros_like(lp)).sum(dim=1)
    c, r = batch["chosen"][rows], batch["rejected"][rows]
    margin = (seq_logp(model, c) - seq_logp(ref_model, c, False)) - (seq_logp(model, r) - seq_logp(ref_model, r, False))
    return -torch.log(torch.sigmoid(config.dpo_beta * margin)).sum() / len(rows)
