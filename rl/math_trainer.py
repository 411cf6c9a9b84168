"""MathRLTrainer: one RL step (sample, score, advantages, update, metrics), evaluation, and its full state.

Every algorithm of `rl_algorithm` is this one step with different settings (rl/algorithms.py has
the table). The default of the original recipe, `reinforce`, is REINFORCE with a moving-average
baseline, exactly:

  1. Sample. Each rank draws rl_batch_size / world_size training problems and samples
     rl_rollout_size answers for each at rl_temperature (no top-k), A answer tokens each.
  2. Score. r_i = weighted sum of the configured rule rewards (default: exact match of the final
     answer, 0 or 1).
  3. Advantages. A_i = r_i - b, with b the baseline *before* this step's update; on the very first
     step b starts at that step's mean reward. Then b <- m * b + (1 - m) * mean(r) over all
     samples of all ranks (m = baseline_momentum, 0.9 by default), so every rank holds the same b.
  4. Update. loss = -sum_{i,t} A_i * log pi(a_{i,t} | prompt_i, a_{i,<t}) / num_tokens, with pi the
     sampling policy softmax(logits / rl_temperature): a token mean over the answer tokens the
     policy chose (up to and including its end token) of the whole step, all ranks and
     micro-batches together. On-policy: one update per rollout, so no ratio, no clipping, no KL.
     Gradients are accumulated over rl_ga_steps micro-batches (DDP syncs only on the last), the
     global norm clipped to grad_clip, AdamW steps, then the schedule: linear warmup for
     warmup_steps, cosine decay to learning_rate * min_lr_ratio at rl_train_steps.
  5. Metrics, summed over ranks by name.

The other algorithms change stage 3 (advantage_mode; kl_estimator=k1 subtracts kl_coef times the
answer's log-ratio to the frozen warm-start policy from the reward first), stage 4
(loss_aggregation; PPO's clipped ratio when a rollout feeds ppo_epochs x ppo_minibatches optimizer
steps; a KL term k2 or k3 in the loss; an entropy bonus) and stage 1 (dynamic_sampling: prompt
groups whose answers all got the same reward carry no signal, so they are dropped and fresh
prompts sampled, for up to dynamic_sampling_max_rounds more rounds; the update trains on the
groups kept, and if the rounds run out before the batch is full it trains on fewer, normalised by
what it trains on, rather than diluting the step with groups that carry no signal).
Answers whose advantage is exactly 0 contribute nothing to the policy loss; when there is no KL or
entropy term they are not forwarded at all (the normalisers still count them, so the update is
the same as if they had been).

Beside the policy-gradient family, three objectives change stages 3-4 more deeply:
  ppo_critic  stage 3 asks a critic (a second GPT with a scalar head, started from the warm start)
              for the value of every answer prefix, puts the reward on the answer's last token and
              takes GAE advantages per token, whitened over the batch; stage 4 adds the clipped
              value loss, and the critic takes an AdamW step beside the policy's.
  dpo         stage 3 pairs answers to the same prompt (higher reward chosen, lower rejected); stage
              4 is its own update, the DPO loss against the frozen starting policy.
  rft         stage 1 keeps only the answers that are exactly right; stage 4 is their
              log-likelihood (the policy gradient with every advantage 1).

The policy samples and is updated in eval mode (dropout, if any, belongs to the warm start), so
the update's log-probs are exactly those of the policy that sampled.

The trainer never parses digits: the environment encodes problems and targets as tokens, rewards
compare token tensors.
"""

import copy
import math
import time
import warnings
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, fields
from functools import partial
from typing import Optional

import torch

from configs.base import BaseRLConfig
from model.gpt import GPT, Critic, GPTConfig, configure_optimizer
from rl import dist, seeding
from rl.algorithms import (KL_PLACEMENT, aggregate, answer_logits, answer_mask, compute_advantages, compute_entropy,
                           compute_gae, compute_kl, compute_policy_loss, compute_value_loss, dpo_loss,
                           explained_variance, group_all_equal, kl_reward_penalty, masked, preference_pairs,
                           sequence_logprobs, token_logprobs, token_rewards, update_baseline, whiten)
from rl.evaluate import EvalResult, evaluate
from rl.math_env import MathEnvironment
from rl.math_reward import exact_match, parse_reward_spec
from rl.problem_sampler import make_problem_sampler
from rl.rollout import Rollout, RolloutCollector, RolloutStats


class TrainingError(RuntimeError):
    """The run cannot go on (numbers blew up); the message says why and what to try."""


@dataclass
class UpdateBatch:
    """What the update trains on, row for row: sequences (N, P + A), generated (N, A), mask (N, A),
    advantages (N,) or (N, A); old_logp (N, A), the sampling policy's log-probs for PPO ratios when a
    rollout feeds several optimizer steps (None when it feeds one: on-policy); ref_logp (N, A), the
    frozen reference's, when a KL term is in the loss; returns and old_values (N, A), the critic's
    targets and its values when the rollout was scored (ppo_critic). For DPO a row is a pair: every
    tensor has a second dimension of 2 (chosen, rejected) and ref_logp holds sequence log-probs."""
    sequences: torch.Tensor
    generated: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor
    old_logp: Optional[torch.Tensor] = None
    ref_logp: Optional[torch.Tensor] = None
    returns: Optional[torch.Tensor] = None
    old_values: Optional[torch.Tensor] = None

    def select(self, rows) -> "UpdateBatch":
        return UpdateBatch(*(None if getattr(self, f.name) is None else getattr(self, f.name)[rows]
                             for f in fields(self)))


# what the update sums over its micro-batches and optimizer steps, for the metrics
UPDATE_SUMS = ("policy_loss", "kl_loss", "entropy_loss", "clip_low", "clip_high", "ratio_sum", "tokens", "forwarded",
               "rows", "value_loss", "value_clipped", "pairs", "preferred", "chosen_reward", "rejected_reward")


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def lr_lambda(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Multiplier of the peak learning rate for the update after `step` updates: linear warmup
    from 1/warmup_steps to 1, then cosine decay from 1 to min_lr_ratio at total_steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


class MathRLTrainer:
    def __init__(self, config: BaseRLConfig, env: MathEnvironment, policy: torch.nn.Module, info: dist.DistInfo):
        """policy: the GPT, already DDP-wrapped when there is more than one process."""
        self.config, self.env, self.policy, self.info = config, env, policy, info
        self.model = dist.unwrap(policy)
        self.reward_weights = parse_reward_spec(config.rewards, env.show_work)
        self.local_prompts = config.rl_batch_size // info.world_size
        self.optimizer, self.scheduler = self.optimizer_for(self.model, config.learning_rate)
        self.kl_placement = KL_PLACEMENT[config.kl_estimator] if config.kl_coef > 0 else None
        # the frozen policy RL starts from, kept only when a KL term or DPO needs it
        self.needs_reference = self.kl_placement is not None or config.objective == "dpo"
        self.ref_model = None
        self.critic = self.critic_model = self.critic_optimizer = self.critic_scheduler = None  # ppo_critic
        # An answer with advantage exactly 0 adds nothing to the policy loss; unless a KL or entropy
        # term in the loss, or a value loss, gives it a gradient of its own, it need not be forwarded.
        self.skip_zero_advantage = (self.kl_placement != "loss" and config.entropy_coef == 0
                                    and config.advantage_mode != "gae")
        self.problem_sampler = make_problem_sampler(config, env)  # which training problems a step draws
        self.rollouts = RolloutCollector(config, env, self.model, self.reward_weights, self.problem_sampler, info)
        self.baseline = None  # None until the first step; then a float, identical on every rank
        self.step = 0  # RL steps taken
        self.bad_steps_in_a_row = 0  # RL steps in a row with an update skipped for non-finite numbers
        self.num_skipped_steps = 0
        self._eval_sets = {}

    @classmethod
    def build(cls, config: BaseRLConfig, info: dist.DistInfo = None) -> "MathRLTrainer":
        """Environment, model (seeded, DDP-wrapped for several processes) and trainer, as the entry
        script builds them: one recipe for the scripts and the tests."""
        info = info or dist.DistInfo()
        torch.manual_seed(config.seed)  # identical initial weights on every rank
        model = GPT(GPTConfig(**config.model_args())).to(info.device)
        policy = dist.wrap(model, info)
        return cls(config, MathEnvironment(**config.task_args()), policy, info)

    def optimizer_for(self, module: torch.nn.Module, lr: float):
        """AdamW and the schedule of the RL step: linear warmup, then cosine decay (lr_lambda)."""
        c = self.config
        optimizer = configure_optimizer(module, lr=lr, weight_decay=c.weight_decay, betas=(c.adam_beta1, c.adam_beta2))
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, partial(
            lr_lambda, warmup_steps=c.warmup_steps, total_steps=c.rl_train_steps, min_lr_ratio=c.min_lr_ratio))

    def start_models(self):
        """On the first step, the models that start from the policy as RL found it: the frozen
        reference (KL, DPO) and the critic (ppo_critic). A resumed run loads them instead."""
        if self.needs_reference and self.ref_model is None:
            self.ref_model = frozen_copy(self.model)
        if self.config.advantage_mode == "gae" and self.critic is None:
            self.set_critic(Critic.from_policy(self.model))

    def set_critic(self, critic: Critic):
        self.critic_model = critic
        self.critic = dist.wrap(critic, self.info)
        self.critic_optimizer, self.critic_scheduler = self.optimizer_for(critic, self.config.critic_learning_rate)

    # ---- one step ---------------------------------------------------------------------------
    def train_step(self) -> dict:
        """One RL step, the stages of the module docstring; returns its metrics, reduced over ranks."""
        t0 = time.perf_counter()
        self.model.eval()  # no dropout: the update's log-probs are the sampler's
        self.start_models()
        first, batch, sampled = self.sample(self.step)  # 1-2. draw problems, sample and score answers
        self.observe_outcomes(sampled)  # every rank's groups teach the problem sampler, identically
        targets, stats = self.advantages(first, batch)  # 3. advantages (or pairs) and the baseline
        t_update = time.perf_counter()
        if self.config.objective == "dpo":
            update = self.update_preferences(batch, targets)  # 4. the DPO loss, its own update
        else:
            update = self.update(batch, targets)  # 4. policy (and value) loss, optimizer steps
        seconds = dict(update=time.perf_counter() - t_update, step=time.perf_counter() - t0)
        self.finish_step(update["skipped"])
        return self.metrics(first, batch, stats, update, sampled, seconds)  # 5.

    # ---- 1-2. sample and score (rl/rollout.py) ------------------------------------------------
    def sample(self, step: int):
        """This rank's first sampling round, the batch the update trains on, and the RolloutStats."""
        return self.rollouts.collect(step, self.local_prompts)

    def observe_outcomes(self, stats: RolloutStats):
        """Every rank's groups of this step, in rank order, into the problem sampler: every rank
        then holds the same selection state."""
        keys, successes = (dist.all_gather_rows(t.to(self.info.device)).cpu().numpy() for t in stats.outcomes())
        self.problem_sampler.observe(keys, successes, self.config.rl_rollout_size)

    # ---- 3. advantages ----------------------------------------------------------------------
    def advantages(self, first: Rollout, batch: Rollout):
        """What the update needs of the batch's rewards: advantages (N,) computed with the baseline
        from before this step (which then moves towards this step's mean reward), per-token GAE
        advantages with the critic's targets (ppo_critic), or the preference pairs (dpo); and the
        statistics the metrics report."""
        c = self.config
        rewards, stats = batch.rewards, {}
        if self.kl_placement == "reward":
            rewards, stats = self.kl_penalised_rewards(batch)
        stats.update(self.reward_statistics(first, rewards))
        if self.baseline is None:
            self.baseline = stats["mean_reward"]
        stats["baseline_used"] = self.baseline
        if c.objective == "dpo":
            chosen, rejected = preference_pairs(rewards, c.rl_rollout_size)
            targets = {"chosen": chosen, "rejected": rejected}
            stats.update(pairs=len(chosen), informative=2 * len(chosen),
                         groups_paired=len(set((chosen // c.rl_rollout_size).tolist())))
        elif c.objective == "rft":
            targets = {"advantages": torch.ones_like(rewards)}
        elif c.advantage_mode == "gae":
            targets = self.gae_targets(batch, rewards, stats)
        else:
            targets = {"advantages": compute_advantages(rewards, c.rl_rollout_size, c.advantage_mode,
                                                        baseline=self.baseline, batch_mean=stats["batch_mean"],
                                                        batch_std=stats["batch_std"])}
        if "advantages" in targets:
            adv = targets["advantages"]
            stats["informative"] = int((adv != 0).any(dim=1).sum() if adv.dim() > 1 else (adv != 0).sum())
        self.baseline = update_baseline(self.baseline, stats["mean_reward"], c.baseline_momentum)
        return targets, stats

    def reward_statistics(self, first: Rollout, rewards: torch.Tensor) -> dict:
        """Mean and spread of the first round's rewards (what the baseline follows) and of the batch's
        (what batch_zscore normalises by), over all ranks in one all-reduce."""
        s = dist.reduce_sums({"first_sum": first.rewards.sum(), "first_sq": (first.rewards ** 2).sum(),
                              "first_n": len(first), "sum": rewards.sum(), "sq": (rewards ** 2).sum(),
                              "n": len(rewards)}, self.info.device)
        mean, batch_mean = s["first_sum"] / s["first_n"], s["sum"] / max(s["n"], 1.0)
        return dict(mean_reward=mean, first_n=s["first_n"], batch_mean=batch_mean,
                    batch_std=math.sqrt(max(s["sq"] - s["n"] * batch_mean ** 2, 0.0) / max(s["n"] - 1, 1.0)),
                    reward_std=math.sqrt(max(s["first_sq"] / s["first_n"] - mean ** 2, 0.0)))

    @torch.no_grad()
    def gae_targets(self, batch: Rollout, rewards: torch.Tensor, stats: dict) -> dict:
        """Per-token advantages by GAE from the critic's values, whitened over the batch of all ranks,
        and the returns the critic regresses on; adds the critic's explained variance to stats."""
        c, P = self.config, self.env.prompt_len
        sequences, mask = torch.cat([batch.prompts, batch.generated], 1), answer_mask(batch.generated,
                                                                                     self.env.end_token)
        values = self.critic_model(sequences[:, :-1])[:, P - 1:]  # V of the state before each answer token
        advantages, returns = compute_gae(token_rewards(rewards, mask), values, mask, c.gamma, c.gae_lambda)
        errors = masked(returns - values, mask)
        s = dist.reduce_sums({"n": mask.sum(), "sum_a": advantages.sum(), "sum_a2": (advantages ** 2).sum(),
                              "sum_r": returns.sum(), "sum_r2": (returns ** 2).sum(), "sum_e": errors.sum(),
                              "sum_e2": (errors ** 2).sum()}, self.info.device)
        n = max(s["n"], 1.0)
        mean, std = s["sum_a"] / n, math.sqrt(max(s["sum_a2"] / n - (s["sum_a"] / n) ** 2, 0.0))
        stats["explained_variance"] = explained_variance(s)
        return {"advantages": whiten(advantages, mask, mean, std), "returns": returns, "old_values": values}

    @torch.no_grad()
    def kl_penalised_rewards(self, batch: Rollout):
        """r - kl_coef * sum_t (log pi - log pi_ref) over each answer (kl_estimator=k1: the KL in the
        reward), and the KL's per-token sums for the metrics."""
        sequences, mask = torch.cat([batch.prompts, batch.generated], 1), answer_mask(batch.generated,
                                                                                     self.env.end_token)
        logp, ref_logp = (self.policy_logprobs(m, sequences, batch.generated) for m in (self.model, self.ref_model))
        penalty = kl_reward_penalty(logp, ref_logp, mask)
        kl = masked(compute_kl(logp, ref_logp, "k3"), mask).sum()
        return batch.rewards - self.config.kl_coef * penalty, {"kl_sum": kl.item(), "kl_tokens": mask.sum().item()}

    @torch.no_grad()
    def policy_logprobs(self, model, sequences, generated):
        """(N, A) log-probs of the generated answers under `model`, in rl_ga_steps chunks."""
        P, T = self.env.prompt_len, self.config.rl_temperature
        parts = [token_logprobs(answer_logits(model, seq, P, T), gen)
                 for seq, gen in zip(torch.tensor_split(sequences, self.config.rl_ga_steps),
                                     torch.tensor_split(generated, self.config.rl_ga_steps))]
        return torch.cat(parts)

    # ---- 4. update --------------------------------------------------------------------------
    def minibatch_orders(self, num_rows: int) -> list:
        """The row order of each of the ppo_epochs passes (a shuffle per pass when a pass has
        several minibatches), from the step's own stream so a resumed run shuffles alike."""
        c = self.config
        shuffle = seeding.torch_generator(c.seed, self.info.rank, self.step, seeding.SHUFFLE, "cpu")
        return [(torch.randperm(num_rows, generator=shuffle) if c.ppo_minibatches > 1 else torch.arange(num_rows))
                .to(self.info.device) for _ in range(c.ppo_epochs)]

    def update(self, batch: Rollout, targets: dict) -> dict:
        """ppo_epochs passes of ppo_minibatches optimizer steps over the batch (a single step for the
        on-policy algorithms); returns the statistics summed over micro-batches and steps."""
        c = self.config
        data = UpdateBatch(torch.cat([batch.prompts, batch.generated], dim=1), batch.generated,
                           answer_mask(batch.generated, self.env.end_token), targets["advantages"],
                           returns=targets.get("returns"), old_values=targets.get("old_values"))
        if c.ppo_epochs * c.ppo_minibatches > 1:
            # A rollout that feeds several optimizer steps takes PPO ratios against the policy that
            # sampled it: the sampler's own log-probs, kept from generation, so no extra forward pass.
            data.old_logp = batch.logp
        if self.kl_placement == "loss":
            data.ref_logp = self.policy_logprobs(self.ref_model, data.sequences, data.generated)
        sums = self.start_update()
        for order in self.minibatch_orders(len(batch)):
            for rows in torch.tensor_split(order, c.ppo_minibatches):
                self.optimizer_step(data, rows, self.micro_loss, sums, skip_zero=self.skip_zero_advantage)
        return sums

    def update_preferences(self, batch: Rollout, targets: dict) -> dict:
        """DPO's update: ppo_epochs passes of ppo_minibatches optimizer steps over the pairs."""
        c = self.config
        sequences = torch.cat([batch.prompts, batch.generated], dim=1)
        mask = answer_mask(batch.generated, self.env.end_token)
        ref = sequence_logprobs(self.policy_logprobs(self.ref_model, sequences, batch.generated), mask)
        pair = lambda t: torch.stack([t[targets["chosen"]], t[targets["rejected"]]], dim=1)  # (P, 2, ...)
        data = UpdateBatch(pair(sequences), pair(batch.generated), pair(mask),
                           torch.zeros(len(targets["chosen"]), device=mask.device), ref_logp=pair(ref))
        sums = self.start_update()
        for order in self.minibatch_orders(len(data.sequences)):
            for rows in torch.tensor_split(order, c.ppo_minibatches):
                self.optimizer_step(data, rows, self.preference_loss, sums)
        return sums

    def start_update(self) -> dict:
        # Nothing left on the parameters from elsewhere (a warm start's last backward) may join this step.
        self.optimizer.zero_grad(set_to_none=True)
        if self.critic_optimizer is not None:
            self.critic_optimizer.zero_grad(set_to_none=True)
        sums = defaultdict(float)
        sums.update(skipped=False, lr=self.optimizer.param_groups[0]["lr"])
        return sums

    def optimizer_step(self, data: UpdateBatch, rows: torch.Tensor, loss_fn, sums: dict, *, skip_zero=False):
        """One optimizer step (of the policy, and of the critic if there is one) on `rows` of the
        batch, accumulated over rl_ga_steps micro-batches; loss_fn(part, norm) -> its loss and stats."""
        c, info = self.config, self.info
        # Normalisers count every row of the minibatch on every rank, forwarded or not.
        counts = dist.reduce_sums({"tokens": data.mask[rows].sum(), "rows": len(rows)}, info.device)
        if counts["rows"] == 0:  # nothing to learn from on any rank (dynamic sampling kept nothing, no pairs)
            return
        norm = dict(num_tokens=counts["tokens"], num_sequences=counts["rows"], max_len=self.env.answer_len)
        sums["rows"] += len(rows)
        if skip_zero:
            rows = rows[data.advantages[rows] != 0]
        sums["forwarded"] += len(rows)
        chunks, loss_sum = torch.tensor_split(rows, c.rl_ga_steps), 0.0
        models = [self.policy] + ([self.critic] if self.critic is not None else [])
        for i, chunk in enumerate(chunks):
            # Every rank takes part in each gradient all-reduce, even with nothing to forward: an
            # empty micro-batch forwards one row with an empty mask (loss and gradient exactly 0).
            part = data.select(chunk) if len(chunk) else self.empty_part(data)
            with ExitStack() as stack:
                if i < len(chunks) - 1 and info.distributed:  # DDP syncs gradients on the last only
                    for m in models:
                        stack.enter_context(m.no_sync())
                out = loss_fn(part, norm)
                # DDP averages gradients over ranks; the loss is already normalised by global counts,
                # so scale by world_size to turn that average into the sum.
                (out.pop("loss") * info.world_size).backward()
            loss_sum += out.pop("total")
            for k, v in out.items():
                sums[k] += float(v)
        self.take_step(dist.reduce_sums({"loss": loss_sum}, info.device)["loss"], sums)

    def take_step(self, loss_sum: float, sums: dict):
        """Clip, guard and step the optimizer(s), whatever the micro-batches accumulated."""
        pairs = [(self.model, self.optimizer)] + ([(self.critic_model, self.critic_optimizer)] if self.critic else [])
        max_norm = self.config.grad_clip if self.config.grad_clip > 0 else float("inf")
        norms = [torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm).item() for m, _ in pairs]
        # Numerical guard: a non-finite loss (on any rank) or gradient norm (the same on every rank
        # after the gradient all-reduce) skips this update everywhere, so the weights and optimizer
        # state stay finite and no rank waits for another.
        bad = not all(math.isfinite(x) for x in (loss_sum, *norms))
        for _, optimizer in pairs:
            if not bad:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        sums["skipped"] |= bad
        sums["grad_norm"] += norms[0]
        sums["optimizer_steps"] += 1

    def empty_part(self, data: UpdateBatch) -> UpdateBatch:
        """One all-pad row shaped like the data's rows, with an empty mask and zeros elsewhere."""
        def blank(name):
            t = getattr(data, name)
            if t is None:
                return None
            if name in ("sequences", "generated"):
                return torch.full((1, *t.shape[1:]), self.env.pad_token, dtype=t.dtype, device=t.device)
            return torch.zeros((1, *t.shape[1:]), dtype=t.dtype, device=t.device)
        return UpdateBatch(*(blank(f.name) for f in fields(data)))

    def micro_loss(self, part: UpdateBatch, norm: dict) -> dict:
        """The policy-gradient loss of one micro-batch (normalised by whole-minibatch counts), with the
        entropy, KL and value terms that apply, and its statistics."""
        c = self.config
        logits = answer_logits(self.policy, part.sequences, self.env.prompt_len, c.rl_temperature)  # (n, A, V)
        logp = token_logprobs(logits, part.generated)
        policy_loss, stats = compute_policy_loss(logp, part.old_logp, part.advantages, part.mask, clip_low=c.clip_low,
                                                 clip_high=c.clip_high, aggregation=c.loss_aggregation, **norm)
        out = dict(policy_loss=policy_loss.detach(), **stats)
        loss = policy_loss
        if c.entropy_coef > 0:
            entropy = compute_entropy(logits, part.mask)
            out["entropy_loss"] = -c.entropy_coef * aggregate(entropy, part.mask, c.loss_aggregation, **norm)
            loss = loss + out["entropy_loss"]
        if part.ref_logp is not None:
            kl = compute_kl(logp, part.ref_logp, c.kl_estimator)
            out["kl_loss"] = c.kl_coef * aggregate(kl, part.mask, c.loss_aggregation, **norm)
            loss = loss + out["kl_loss"]
            out["kl_sum"] = masked(compute_kl(logp.detach(), part.ref_logp, "k3"), part.mask).sum()
        if part.returns is not None:  # the critic's own loss: separate parameters, one backward
            values = self.critic(part.sequences[:, :-1])[:, self.env.prompt_len - 1:]
            out["value_loss"], value_stats = compute_value_loss(values, part.old_values, part.returns, part.mask,
                                                                clip=c.value_clip, aggregation=c.loss_aggregation,
                                                                **norm)
            loss = loss + out["value_loss"]
            out.update(value_stats)
        out.update(loss=loss, total=loss.item())
        return {k: v.detach() if torch.is_tensor(v) and k != "loss" else v for k, v in out.items()}

    def preference_loss(self, part: UpdateBatch, norm: dict) -> dict:
        """The DPO loss of one micro-batch of pairs (normalised by the minibatch's pairs, all ranks)."""
        c, (n, _, A) = self.config, part.generated.shape
        logits = answer_logits(self.policy, part.sequences.flatten(0, 1), self.env.prompt_len, c.rl_temperature)
        logp = sequence_logprobs(token_logprobs(logits, part.generated.flatten(0, 1)).view(n, 2, A), part.mask)
        loss, stats = dpo_loss(logp[:, 0], logp[:, 1], part.ref_logp[:, 0], part.ref_logp[:, 1], c.dpo_beta,
                               num_pairs=norm["num_sequences"])
        if not part.mask.any():  # the empty stand-in of a rank with nothing to forward
            loss, stats = loss * 0.0, {k: v * 0.0 for k, v in stats.items()}
        return dict(loss=loss, total=loss.item(), policy_loss=loss.detach(), **stats)

    def finish_step(self, skipped: bool):
        with warnings.catch_warnings():  # a step with nothing to train on took no optimizer step: intended
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
            for scheduler in (self.scheduler, self.critic_scheduler):
                if scheduler is not None:
                    scheduler.step()  # the schedule follows RL steps, skipped or not
        self.step += 1
        self.bad_steps_in_a_row = self.bad_steps_in_a_row + 1 if skipped else 0
        self.num_skipped_steps += int(skipped)
        if self.bad_steps_in_a_row >= self.config.max_bad_steps:
            raise TrainingError(f"non-finite loss or gradient norm for {self.bad_steps_in_a_row} steps in a row "
                                f"(up to step {self.step}); lower learning_rate, keep grad_clip on, "
                                f"or check the rewards")

    # ---- 5. metrics ---------------------------------------------------------------------------
    def metrics(self, first: Rollout, batch: Rollout, stats: dict, update: dict, sampled: RolloutStats,
                seconds: dict) -> dict:
        """The step's metrics (README "Metrics" says what each means), summed over ranks by name."""
        G, env = self.config.rl_rollout_size, self.env
        first_mask = answer_mask(first.generated, env.end_token)
        local = {"exact": exact_match(env, first.targets, first.generated).sum(),
                 "groups_equal": group_all_equal(first.rewards, G).sum(), "groups": len(first) // G,
                 "answer_tokens": first_mask.sum(), "entropy": masked(first.entropy, first_mask).sum(),
                 "informative": stats["informative"], "batch": len(batch), "rounds": sampled.rounds,
                 "answers": sampled.answers, "drawn": sampled.drawn, "selected": sampled.selected,
                 "estimate_sum": sampled.estimate_sum, "estimated": sampled.estimated,
                 **self.kl_measured(stats, update),
                 "pairs_formed": stats.get("pairs", 0), "groups_paired": stats.get("groups_paired", 0),
                 **{k: update[k] for k in UPDATE_SUMS},
                 **{f"reward/{k}": v.sum() for k, v in first.components.items()}}
        s = dist.reduce_sums(local, self.info.device)
        n, steps, step_seconds = stats["first_n"], max(update["optimizer_steps"], 1.0), seconds["step"]
        tokens = max(s["tokens"], 1.0)
        metrics = {
            "train/step": self.step,
            "train/policy_loss": s["policy_loss"] / steps,
            "train/kl_loss": s["kl_loss"] / steps,
            "train/entropy_loss": s["entropy_loss"] / steps,
            "train/accuracy": s["exact"] / n,
            "train/avg_reward": stats["mean_reward"],
            "train/reward_std": stats["reward_std"],
            "train/baseline": self.baseline,
            "train/advantage_baseline": stats["baseline_used"],
            "train/lr": update["lr"],
            "train/entropy": s["entropy"] / max(s["answer_tokens"], 1.0),
            "train/kl": s["kl_sum"] / max(s["kl_tokens"], 1.0) if self.kl_placement else 0.0,
            "train/clip_low_frac": s["clip_low"] / tokens,
            "train/clip_high_frac": s["clip_high"] / tokens,
            "train/ratio_mean": s["ratio_sum"] / tokens,
            "train/grad_norm": update["grad_norm"] / steps,
            "train/answer_tokens": s["answer_tokens"] / n,
            "train/groups_all_equal": s["groups_equal"] / s["groups"],
            "train/batch_answers": s["batch"],
            "train/informative_share": s["informative"] / max(s["batch"], 1.0),
            "train/skipped_share": 1.0 - s["forwarded"] / max(s["rows"], 1.0),
            "train/sampling_rounds": s["rounds"] / self.info.world_size,
            "train/answers_generated": s["answers"],
            "train/skipped_steps": self.num_skipped_steps,
            "perf/samples_per_second": s["answers"] / step_seconds,
            "perf/step_seconds": step_seconds,
            "perf/rollout_share": sampled.rollout_seconds / step_seconds,
            "perf/reward_share": sampled.reward_seconds / step_seconds,
            "perf/update_share": seconds["update"] / step_seconds,
        }
        if self.config.problem_sampler != "uniform":
            metrics["select/selected_share"] = s["selected"] / max(s["drawn"], 1.0)
            if s["estimated"]:  # (none on a first step of replay, whose buffer is still empty)
                metrics["select/drawn_pass_rate"] = s["estimate_sum"] / s["estimated"]
            metrics.update(self.problem_sampler.metrics())
        metrics.update(self.objective_metrics(s, stats, steps))
        metrics.update({k: v / n for k, v in s.items() if k.startswith("reward/")})
        return metrics

    def objective_metrics(self, s: dict, stats: dict, steps: float) -> dict:
        """What only the critic or DPO has to say."""
        if self.config.advantage_mode == "gae" and self.config.objective == "policy_gradient":
            return {"train/value_loss": s["value_loss"] / steps,
                    "train/explained_variance": stats["explained_variance"],
                    "train/value_clip_frac": s["value_clipped"] / max(s["tokens"], 1.0)}
        if self.config.objective == "dpo":
            pairs = max(s["pairs"], 1.0)  # the pairs trained on, each once per epoch
            return {"train/pairs": s["pairs_formed"],
                    "train/groups_without_pair": 1.0 - s["groups_paired"] / s["groups"],
                    "train/preference_accuracy": s["preferred"] / pairs,
                    "train/chosen_reward": s["chosen_reward"] / pairs,
                    "train/rejected_reward": s["rejected_reward"] / pairs,
                    "train/reward_margin": (s["chosen_reward"] - s["rejected_reward"]) / pairs}
        return {}

    def kl_measured(self, adv_stats: dict, update: dict) -> dict:
        """Sum and count of the per-token KL estimate (k3) to the reference, wherever it was measured:
        on the whole batch for a KL in the reward, on the trained tokens for a KL in the loss."""
        source = adv_stats if self.kl_placement == "reward" else {"kl_sum": update["kl_sum"],
                                                                  "kl_tokens": update["tokens"]}
        return {"kl_sum": source.get("kl_sum", 0.0), "kl_tokens": source.get("kl_tokens", 0.0)}

    # ---- evaluation ---------------------------------------------------------------------------
    def eval_set(self, split: str):
        if split not in self._eval_sets:
            self._eval_sets[split] = self.env.eval_operands(self.config.num_eval, split)
        return self._eval_sets[split]

    def evaluate(self, split: str = "test") -> EvalResult:
        """Greedy final-answer accuracy on the fixed evaluation set of `split` (test for reporting,
        validation for choosing)."""
        c = self.config
        return evaluate(self.policy, self.env, *self.eval_set(split), self.info, batch_size=c.eval_batch_size,
                        num_mistakes=c.num_mistakes, split=split)

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
            "bad_steps_in_a_row": self.bad_steps_in_a_row,
            "num_skipped_steps": self.num_skipped_steps,
            "problem_sampler": self.problem_sampler.state_dict(),
            "config_name": c.name,
            "config": c.portable_dict(),
            "model_args": c.model_args(),
            "task": c.task_args(),
            **({"ref_model": self.ref_model.state_dict()} if self.ref_model is not None else {}),
            **({"critic": self.critic_model.state_dict(), "critic_optimizer": self.critic_optimizer.state_dict(),
                "critic_scheduler": self.critic_scheduler.state_dict()} if self.critic is not None else {}),
        }

    def load_state_dict(self, snap: dict):
        self.model.load_state_dict(snap["model"])
        self.optimizer.load_state_dict(snap["optimizer"])
        self.scheduler.load_state_dict(snap["scheduler"])
        self.baseline = snap["baseline"]
        self.step = snap["step"]
        self.bad_steps_in_a_row = snap["bad_steps_in_a_row"]
        self.num_skipped_steps = snap["num_skipped_steps"]
        self.problem_sampler.load_state_dict(snap["problem_sampler"])
        if "ref_model" in snap:
            self.ref_model = frozen_copy(self.model)
            self.ref_model.load_state_dict(snap["ref_model"])
        if "critic" in snap:
            critic = Critic(self.model.config).to(self.info.device)
            critic.load_state_dict(snap["critic"])
            self.set_critic(critic)
            self.critic_optimizer.load_state_dict(snap["critic_optimizer"])
            self.critic_scheduler.load_state_dict(snap["critic_scheduler"])

    def weights_are_finite(self) -> bool:
        models = [self.model] + ([self.critic_model] if self.critic is not None else [])
        return all(torch.isfinite(p).all() for m in models for p in m.parameters())
