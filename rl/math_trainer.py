"""MathRLTrainer: one RL step (rollout, reward, advantage, update), evaluation, and its full state.

The algorithm is REINFORCE with a moving-average baseline, exactly:

  1. Rollout. Each rank draws rl_batch_size / world_size training problems and samples
     rl_rollout_size answers for each at rl_temperature (no top-k), A = answer digits + 1 tokens.
  2. Reward. r_i = weighted sum of the configured rule rewards (default: exact match, 0 or 1).
  3. Advantage. A_i = r_i - b, with b the baseline *before* this step's update; on the very first
     step b starts at that step's mean reward.
  4. Baseline. b <- m * b + (1 - m) * mean(r) over all samples of all ranks (m = baseline_momentum,
     0.9 by default), so every rank holds the same b.
  5. Loss. -sum_{i,t} A_i * log pi(a_{i,t} | prompt_i, a_{i,<t}) / num_tokens, with pi the sampling
     policy softmax(logits / rl_temperature), a token mean over the
     answer tokens the policy chose (up to and including its end token) of the whole step, all
     ranks and micro-batches together. On-policy: one update per rollout, so no ratio or clipping.
  6. Update. Gradients accumulated over rl_ga_steps micro-batches (DDP syncs only on the last),
     global norm clipped to grad_clip, AdamW, then the scheduler: linear warmup for warmup_steps,
     cosine decay to learning_rate * min_lr_ratio at rl_train_steps.

The trainer never parses digits: the environment encodes problems and targets as tokens, rewards
compare token tensors.
"""

import math
import time
from contextlib import nullcontext
from functools import partial

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from configs.base import BaseRLConfig
from rl import dist, seeding
from rl.algorithms import (answer_mask, compute_advantages, compute_entropy, compute_policy_loss, token_logprobs,
                           update_baseline)
from rl.evaluate import EvalResult, evaluate
from rl.math_env import MathEnvironment
from rl.math_reward import compute_rewards, parse_reward_spec


def lr_lambda(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Multiplier of the peak learning rate for the update after `step` updates: linear warmup
    from 1/warmup_steps to 1, then cosine decay from 1 to min_lr_ratio at total_steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def configure_optimizer(model: torch.nn.Module, config: BaseRLConfig, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices and embeddings only (nanoGPT's split); biases and
    LayerNorm gains are not decayed."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(config.adam_beta1, config.adam_beta2))


class MathRLTrainer:
    def __init__(self, config: BaseRLConfig, env: MathEnvironment, policy: torch.nn.Module, info: dist.DistInfo,
                 eval_a, eval_b):
        """policy: the GPT, already DDP-wrapped when there is more than one process."""
        self.config, self.env, self.policy, self.info = config, env, policy, info
        self.model = dist.unwrap(policy)
        self.eval_a, self.eval_b = eval_a, eval_b
        self.reward_weights = parse_reward_spec(config.rewards)
        self.local_prompts = config.rl_batch_size // info.world_size
        self.optimizer = configure_optimizer(self.model, config, config.learning_rate)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, partial(
            lr_lambda, warmup_steps=config.warmup_steps, total_steps=config.rl_train_steps,
            min_lr_ratio=config.min_lr_ratio))
        self.baseline = None  # None until the first step; then a float, identical on every rank
        self.step = 0  # optimizer steps taken

    # ---- one step -------------------------------------------------------------------------
    @torch.no_grad()
    def rollout(self, step: int):
        """Sample this rank's problems for `step` and rl_rollout_size answers to each.
        Returns prompts (N, P), targets (N, A), generated (N, A) with N = local prompts * rollouts."""
        c, env, device = self.config, self.env, self.info.device
        a, b = env.sample_operands(self.local_prompts, seeding.numpy_rng(c.seed, self.info.rank, step, seeding.PROBLEMS))
        prompts, targets = (t.to(device) for t in env.encode(a, b))
        gen = seeding.torch_generator(c.seed, self.info.rank, step, seeding.SAMPLING, device)
        self.model.eval()  # no dropout while sampling: the rollout is the policy itself
        generated = self.model.generate(prompts, env.answer_len, temperature=c.rl_temperature, end_token=env.end_token,
                                        pad_token=env.pad_token, generator=gen, num_samples=c.rl_rollout_size)
        self.model.train()
        G = c.rl_rollout_size
        # clone: an inference-mode tensor may not enter autograd
        return prompts.repeat_interleave(G, dim=0), targets.repeat_interleave(G, dim=0), generated.clone()

    def train_step(self) -> dict:
        """One RL step (see the module docstring); returns its metrics, reduced over ranks."""
        c, info, P = self.config, self.info, self.env.prompt_len
        t0 = time.time()
        seeding.seed_dropout(c.seed, info.rank, self.step)
        prompts, targets, generated = self.rollout(self.step)
        t_rollout = time.time() - t0

        rewards, components = compute_rewards(self.reward_weights, targets, generated)
        mask = answer_mask(generated, self.env.end_token)
        N = rewards.numel()
        # One all-reduce for everything the step needs from other ranks before the update.
        stats = dist.all_reduce_sum(torch.stack([rewards.sum(), mask.sum().float(), torch.tensor(float(N), device=rewards.device)]).double())
        reward_sum, num_tokens, num_samples = stats.tolist()
        mean_reward = reward_sum / num_samples
        if self.baseline is None:
            self.baseline = mean_reward
        baseline_used = self.baseline
        advantages = compute_advantages(rewards, baseline_used)
        self.baseline = update_baseline(self.baseline, mean_reward, c.baseline_momentum)

        sequences = torch.cat([prompts, generated], dim=1)
        micro = N // c.rl_ga_steps
        loss_sum = torch.zeros((), device=info.device)
        entropy_sum = torch.zeros((), device=info.device)
        for i in range(c.rl_ga_steps):
            sl = slice(i * micro, (i + 1) * micro)
            last = i == c.rl_ga_steps - 1
            sync = nullcontext() if (last or not info.distributed) else self.policy.no_sync()
            with sync:
                logits = self.policy(sequences[sl, :-1])[:, P - 1:]  # (n, A, V): predictions of the answer tokens
                logp = token_logprobs(logits, generated[sl], c.rl_temperature)
                loss = compute_policy_loss(logp, advantages[sl], mask[sl], num_tokens)
                # DDP averages gradients over ranks; the loss is already normalised by the global
                # token count, so scale by world_size to turn that average back into the sum.
                (loss * info.world_size).backward()
            loss_sum += loss.detach()
            entropy_sum += compute_entropy(logits.detach() / c.rl_temperature, mask[sl])
        max_norm = c.grad_clip if c.grad_clip > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1

        exact = (generated == targets).all(dim=1).float()
        local = [loss_sum, entropy_sum, exact.sum(), (rewards ** 2).sum()] + [v.sum() for v in components.values()]
        red = dist.all_reduce_sum(torch.stack([t.double() for t in local])).tolist()
        elapsed = time.time() - t0
        reward_var = max(red[3] / num_samples - mean_reward ** 2, 0.0)
        metrics = {
            "train/step": self.step,
            "train/policy_loss": red[0],
            "train/accuracy": red[2] / num_samples,
            "train/avg_reward": mean_reward,
            "train/reward_std": math.sqrt(reward_var),
            "train/baseline": self.baseline,
            "train/advantage_baseline": baseline_used,
            "train/lr": lr,
            "train/entropy": red[1] / num_tokens,
            "train/grad_norm": grad_norm.item(),
            "train/answer_tokens": num_tokens / num_samples,
            "perf/samples_per_second": num_samples / elapsed,
            "perf/step_seconds": elapsed,
            "perf/rollout_share": t_rollout / elapsed,
        }
        for name, value in zip(components, red[4:]):
            metrics[f"reward/{name}"] = value / num_samples
        return metrics

    def evaluate(self) -> EvalResult:
        c = self.config
        return evaluate(self.policy, self.env, self.eval_a, self.eval_b, self.info, c.eval_batch_size, c.num_mistakes)

    # ---- full state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs; random streams are derived from (seed, rank, step)
        (see rl/seeding.py), so `step` also restores every RNG."""
        c = self.config
        return {
            "kind": "rl_snapshot",
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "baseline": self.baseline,
            "step": self.step,
            "config_name": c.name,
            "config": c.to_dict(),
            "model_args": c.model_args(),
            "task": c.task_args(),
        }

    def load_state_dict(self, snap: dict):
        self.model.load_state_dict(snap["model"])
        self.optimizer.load_state_dict(snap["optimizer"])
        self.scheduler.load_state_dict(snap["scheduler"])
        self.baseline = snap["baseline"]
        self.step = snap["step"]
