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

The policy samples and is updated in eval mode (dropout, if any, belongs to the warm start), so
the update's log-probs are exactly those of the policy that sampled.

The trainer never parses digits: the environment encodes problems and targets as tokens, rewards
compare token tensors.
"""

import copy
import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Optional

import torch

from configs.base import BaseRLConfig
from model.gpt import GPT, GPTConfig
from rl import dist, seeding
from rl.algorithms import (KL_PLACEMENT, aggregate, answer_logits, answer_mask, compute_advantages, compute_entropy,
                           compute_kl, compute_policy_loss, group_all_equal, kl_reward_penalty, masked, token_logprobs,
                           update_baseline)
from rl.evaluate import EvalResult, evaluate
from rl.math_env import MathEnvironment
from rl.math_reward import compute_rewards, exact_match, parse_reward_spec


class TrainingError(RuntimeError):
    """The run cannot go on (numbers blew up); the message says why and what to try."""


@dataclass
class Rollout:
    """Answers sampled on one rank; rows i*G ... i*G+G-1 answer the same prompt."""
    prompts: torch.Tensor  # (N, P)
    targets: torch.Tensor  # (N, A)
    generated: torch.Tensor  # (N, A)
    entropy: torch.Tensor  # (N, A) entropy of the distribution each token was drawn from
    rewards: Optional[torch.Tensor] = None  # (N,) the weighted sum of the rule rewards
    components: dict = field(default_factory=dict)  # reward name -> (N,)

    def __len__(self) -> int:
        return len(self.generated)

    def select(self, index) -> "Rollout":
        """Rows `index` (bool mask, indices or a slice) of every tensor."""
        return Rollout(self.prompts[index], self.targets[index], self.generated[index], self.entropy[index],
                       self.rewards[index], {k: v[index] for k, v in self.components.items()})

    @staticmethod
    def cat(parts: list) -> "Rollout":
        cat = lambda name: torch.cat([getattr(p, name) for p in parts])
        return Rollout(cat("prompts"), cat("targets"), cat("generated"), cat("entropy"), cat("rewards"),
                       {k: torch.cat([p.components[k] for p in parts]) for k in parts[0].components})


@dataclass
class UpdateBatch:
    """What the update trains on, row for row: sequences (N, P + A), generated (N, A), mask (N, A),
    advantages (N,); old_logp (N, A), the sampling policy's log-probs for PPO ratios when a rollout
    feeds several optimizer steps (None when it feeds one: on-policy); ref_logp (N, A), the frozen
    reference's, when a KL term is in the loss."""
    sequences: torch.Tensor
    generated: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor
    old_logp: Optional[torch.Tensor] = None
    ref_logp: Optional[torch.Tensor] = None

    def select(self, rows) -> "UpdateBatch":
        return UpdateBatch(*(None if getattr(self, f.name) is None else getattr(self, f.name)[rows]
                             for f in fields(self)))


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
        self.optimizer = self.model.configure_optimizer(lr=config.learning_rate, weight_decay=config.weight_decay,
                                                        betas=(config.adam_beta1, config.adam_beta2))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, partial(
            lr_lambda, warmup_steps=config.warmup_steps, total_steps=config.rl_train_steps,
            min_lr_ratio=config.min_lr_ratio))
        self.kl_placement = KL_PLACEMENT[config.kl_estimator] if config.kl_coef > 0 else None
        self.ref_model = None  # the frozen policy RL starts from, kept only when kl_coef > 0
        # An answer with advantage exactly 0 adds nothing to the policy loss; unless a KL or
        # entropy term in the loss gives it a gradient of its own, it need not be forwarded at all.
        self.skip_zero_advantage = self.kl_placement != "loss" and config.entropy_coef == 0
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

    # ---- one step ---------------------------------------------------------------------------
    def train_step(self) -> dict:
        """One RL step, the stages of the module docstring; returns its metrics, reduced over ranks."""
        t0 = time.perf_counter()
        self.model.eval()  # no dropout: the update's log-probs are the sampler's
        if self.kl_placement is not None and self.ref_model is None:
            self.ref_model = frozen_copy(self.model)  # the policy RL starts from
        first, batch, timing = self.sample(self.step)  # 1-2. sample and score
        advantages, adv_stats = self.advantages(first, batch)  # 3. advantages and baseline
        t_update = time.perf_counter()
        update = self.update(batch, advantages)  # 4. loss, gradients, optimizer steps
        timing.update(update_seconds=time.perf_counter() - t_update, step_seconds=time.perf_counter() - t0)
        self.finish_step(update["skipped"])
        return self.metrics(first, batch, advantages, adv_stats, update, timing)  # 5.

    # ---- 1-2. sample and score ----------------------------------------------------------------
    @torch.no_grad()
    def sample_round(self, num_prompts: int, problems, generator, timing: dict) -> Rollout:
        """rl_rollout_size scored answers to each of num_prompts fresh training problems."""
        c, env, G = self.config, self.env, self.config.rl_rollout_size
        prompts, targets = (t.to(self.info.device) for t in env.encode(*env.sample_operands(num_prompts, problems)))
        t0 = time.perf_counter()
        generated, entropy = self.model.generate(
            prompts, env.answer_len, temperature=c.rl_temperature, end_token=env.end_token, pad_token=env.pad_token,
            generator=generator, num_samples=G, with_entropy=True)
        t1 = time.perf_counter()
        # (clone: an inference-mode tensor may not enter autograd)
        rollout = Rollout(prompts.repeat_interleave(G, dim=0), targets.repeat_interleave(G, dim=0), generated.clone(),
                          entropy.clone())
        rollout.rewards, rollout.components = compute_rewards(self.reward_weights, env, rollout.targets,
                                                              rollout.generated)
        timing["rollout_seconds"] += t1 - t0
        timing["reward_seconds"] += time.perf_counter() - t1
        timing["rounds"] += 1
        timing["answers"] += len(rollout)
        return rollout

    def sample(self, step: int):
        """This rank's answers for `step`: the first sampling round (what the metrics describe), the
        batch the update trains on, and the timing. With dynamic sampling, groups whose answers all
        got the same reward are dropped and fresh prompts sampled from the same streams until the
        batch is full or dynamic_sampling_max_rounds more rounds are spent; surplus groups are
        discarded, and a batch the rounds could not fill stays short (see the module docstring)."""
        c, G, P = self.config, self.config.rl_rollout_size, self.local_prompts
        problems = seeding.numpy_rng(c.seed, self.info.rank, step, seeding.PROBLEMS)
        sampling = seeding.torch_generator(c.seed, self.info.rank, step, seeding.SAMPLING, self.info.device)
        timing = dict(rollout_seconds=0.0, reward_seconds=0.0, rounds=0, answers=0)
        first = self.sample_round(P, problems, sampling, timing)
        if not c.dynamic_sampling:
            return first, first, timing
        kept, batch, num_sampled, num_kept = [], first, 0, 0
        while True:
            informative = ~group_all_equal(batch.rewards, G)
            kept.append(batch.select(informative.repeat_interleave(G)))
            num_sampled, num_kept = num_sampled + len(informative), num_kept + int(informative.sum())
            if num_kept >= P or timing["rounds"] > c.dynamic_sampling_max_rounds:
                break
            # Late in a run most groups are all right: ask for as many prompts as the share kept so
            # far says are needed, plus 25% (at most 4 batches' worth), so a step takes a few large
            # sampling rounds rather than many small ones.
            want = math.ceil(1.25 * (P - num_kept) * num_sampled / num_kept) if num_kept else 4 * P
            batch = self.sample_round(min(want, 4 * P), problems, sampling, timing)
        return first, Rollout.cat(kept).select(slice(0, P * G)), timing

    # ---- 3. advantages ----------------------------------------------------------------------
    def advantages(self, first: Rollout, batch: Rollout):
        """(N,) advantages of the batch, computed with the baseline from before this step, which is
        then moved towards this step's mean reward; and the statistics the metrics report."""
        c = self.config
        rewards, kl_stats = batch.rewards, {}
        if self.kl_placement == "reward":
            rewards, kl_stats = self.kl_penalised_rewards(batch)
        sums = dist.reduce_sums({"first_sum": first.rewards.sum(), "first_sq": (first.rewards ** 2).sum(),
                                 "first_n": len(first), "sum": rewards.sum(), "sq": (rewards ** 2).sum(),
                                 "n": len(rewards)}, self.info.device)
        mean_reward = sums["first_sum"] / sums["first_n"]
        batch_mean = sums["sum"] / max(sums["n"], 1.0)
        batch_std = math.sqrt(max(sums["sq"] - sums["n"] * batch_mean ** 2, 0.0) / max(sums["n"] - 1, 1.0))
        if self.baseline is None:
            self.baseline = mean_reward
        baseline_used = self.baseline
        advantages = compute_advantages(rewards, c.rl_rollout_size, c.advantage_mode, baseline=baseline_used,
                                        batch_mean=batch_mean, batch_std=batch_std)
        self.baseline = update_baseline(self.baseline, mean_reward, c.baseline_momentum)
        stats = dict(mean_reward=mean_reward, baseline_used=baseline_used, first_n=sums["first_n"],
                     reward_std=math.sqrt(max(sums["first_sq"] / sums["first_n"] - mean_reward ** 2, 0.0)), **kl_stats)
        return advantages, stats

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

    def update(self, batch: Rollout, advantages: torch.Tensor) -> dict:
        """ppo_epochs passes of ppo_minibatches optimizer steps over the batch (a single step for the
        on-policy algorithms); returns the statistics summed over micro-batches and steps."""
        c = self.config
        data = UpdateBatch(torch.cat([batch.prompts, batch.generated], dim=1), batch.generated,
                           answer_mask(batch.generated, self.env.end_token), advantages)
        orders = self.minibatch_orders(len(batch))
        off_policy = c.ppo_epochs * c.ppo_minibatches > 1
        if off_policy:
            # Log-probs of the policy that sampled, for the PPO ratios. The first minibatch is
            # updated before any optimizer step, so its ratio is exactly 1, taken from its own
            # forward (which also fills its rows in for later epochs): only the other rows need
            # this pass, and of those only rows the update will forward.
            need = torch.ones(len(batch), dtype=torch.bool, device=advantages.device)
            need[torch.tensor_split(orders[0], c.ppo_minibatches)[0]] = False
            if self.skip_zero_advantage:
                need &= advantages != 0
            data.old_logp = torch.zeros(data.mask.shape, device=advantages.device)
            if need.any():
                data.old_logp[need] = self.policy_logprobs(self.model, data.sequences[need], data.generated[need])
        if self.kl_placement == "loss":
            data.ref_logp = self.policy_logprobs(self.ref_model, data.sequences, data.generated)
        # Nothing left on the parameters from elsewhere (a warm start's last backward) may join this step.
        self.optimizer.zero_grad(set_to_none=True)
        sums = dict.fromkeys(("policy_loss", "kl_loss", "entropy_loss", "clip_low", "clip_high", "ratio_sum",
                              "tokens", "grad_norm", "forwarded", "rows", "optimizer_steps", "kl_sum"), 0.0)
        sums.update(skipped=False, lr=self.optimizer.param_groups[0]["lr"])
        for epoch, order in enumerate(orders):
            for k, rows in enumerate(torch.tensor_split(order, c.ppo_minibatches)):
                self.optimizer_step(data, rows, own_ratio=off_policy and epoch == 0 and k == 0, sums=sums)
        return sums

    def optimizer_step(self, data: UpdateBatch, rows: torch.Tensor, *, own_ratio: bool, sums: dict):
        """One optimizer step on `rows` of the batch, accumulated over rl_ga_steps micro-batches."""
        c, info = self.config, self.info
        # Normalisers count every answer of the minibatch on every rank, forwarded or not.
        counts = dist.reduce_sums({"tokens": data.mask[rows].sum(), "rows": len(rows)}, info.device)
        if counts["rows"] == 0:  # dynamic sampling kept nothing on any rank: nothing to learn from
            return
        norm = dict(num_tokens=counts["tokens"], num_sequences=counts["rows"], max_len=self.env.answer_len)
        sums["rows"] += len(rows)
        if self.skip_zero_advantage:
            rows = rows[data.advantages[rows] != 0]
        sums["forwarded"] += len(rows)
        chunks = torch.tensor_split(rows, c.rl_ga_steps)
        loss_sum = 0.0
        for i, chunk in enumerate(chunks):
            # Every rank takes part in each gradient all-reduce, even with nothing to forward: an
            # empty micro-batch forwards one row with an empty mask (loss and gradient exactly 0).
            part = data.select(chunk) if len(chunk) else self.empty_part(data)
            sync = nullcontext() if (i == len(chunks) - 1 or not info.distributed) else self.policy.no_sync()
            with sync:
                out = self.micro_loss(part, norm, own_ratio=own_ratio)
                # DDP averages gradients over ranks; the loss is already normalised by global counts,
                # so scale by world_size to turn that average into the sum.
                (out.pop("loss") * info.world_size).backward()
            if own_ratio and len(chunk):
                data.old_logp[chunk] = out["logp"]
            loss_sum += out.pop("total")
            for k in ("policy_loss", "kl_loss", "entropy_loss", "clip_low", "clip_high", "ratio_sum", "tokens",
                      "kl_sum"):
                sums[k] += float(out[k])
        loss_sum = dist.reduce_sums({"loss": loss_sum}, info.device)["loss"]
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                   c.grad_clip if c.grad_clip > 0 else float("inf")).item()
        # Numerical guard: a non-finite loss (on any rank) or gradient norm (the same on every rank
        # after the gradient all-reduce) skips this update everywhere, so the weights and optimizer
        # state stay finite and no rank waits for another.
        bad = not (math.isfinite(loss_sum) and math.isfinite(grad_norm))
        if not bad:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        sums["skipped"] |= bad
        sums["grad_norm"] += grad_norm
        sums["optimizer_steps"] += 1

    def empty_part(self, data: UpdateBatch) -> UpdateBatch:
        """One all-pad row with an empty mask and advantage 0."""
        T, A, device = data.sequences.size(1), data.generated.size(1), data.mask.device
        pad = torch.full((1, T), self.env.pad_token, dtype=data.sequences.dtype, device=device)
        blank = lambda t: None if t is None else torch.zeros((1, A), device=device)
        return UpdateBatch(pad, pad[:, -A:], torch.zeros((1, A), dtype=torch.bool, device=device),
                           torch.zeros(1, device=device), blank(data.old_logp), blank(data.ref_logp))

    def micro_loss(self, part: UpdateBatch, norm: dict, *, own_ratio: bool) -> dict:
        """The loss of one micro-batch, normalised by whole-minibatch counts, and its statistics.
        own_ratio: the PPO ratio is taken against this very forward, detached (the policy has not
        been updated yet in this step, so it is the sampling policy: ratio exactly 1)."""
        c = self.config
        logits = answer_logits(self.policy, part.sequences, self.env.prompt_len, c.rl_temperature)  # (n, A, V)
        logp = token_logprobs(logits, part.generated)
        old_logp = logp.detach() if own_ratio else part.old_logp
        policy_loss, stats = compute_policy_loss(logp, old_logp, part.advantages, part.mask, clip_low=c.clip_low,
                                                 clip_high=c.clip_high, aggregation=c.loss_aggregation, **norm)
        loss, zero = policy_loss, torch.zeros((), device=logp.device)
        entropy_loss = kl_loss = kl_sum = zero
        if c.entropy_coef > 0:
            entropy = compute_entropy(logits, part.mask)
            entropy_loss = -c.entropy_coef * aggregate(entropy, part.mask, c.loss_aggregation, **norm)
            loss = loss + entropy_loss
        if part.ref_logp is not None:
            kl = compute_kl(logp, part.ref_logp, c.kl_estimator)
            kl_loss = c.kl_coef * aggregate(kl, part.mask, c.loss_aggregation, **norm)
            loss = loss + kl_loss
            kl_sum = masked(compute_kl(logp.detach(), part.ref_logp, "k3"), part.mask).sum()
        return dict(loss=loss, total=loss.item(), policy_loss=policy_loss.detach(), kl_loss=kl_loss.detach(),
                    entropy_loss=entropy_loss.detach(), kl_sum=kl_sum, logp=logp.detach(), **stats)

    def finish_step(self, skipped: bool):
        with warnings.catch_warnings():  # a step with nothing to train on took no optimizer step: intended
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
            self.scheduler.step()  # the schedule follows RL steps, skipped or not
        self.step += 1
        self.bad_steps_in_a_row = self.bad_steps_in_a_row + 1 if skipped else 0
        self.num_skipped_steps += int(skipped)
        if self.bad_steps_in_a_row >= self.config.max_bad_steps:
            raise TrainingError(f"non-finite loss or gradient norm for {self.bad_steps_in_a_row} steps in a row "
                                f"(up to step {self.step}); lower learning_rate, keep grad_clip on, "
                                f"or check the rewards")

    # ---- 5. metrics ---------------------------------------------------------------------------
    def metrics(self, first: Rollout, batch: Rollout, advantages, adv_stats: dict, update: dict, timing: dict) -> dict:
        """The step's metrics (README "Metrics" says what each means), summed over ranks by name."""
        G, env = self.config.rl_rollout_size, self.env
        first_mask = answer_mask(first.generated, env.end_token)
        local = {"exact": exact_match(env, first.targets, first.generated).sum(),
                 "groups_equal": group_all_equal(first.rewards, G).sum(), "groups": len(first) // G,
                 "answer_tokens": first_mask.sum(), "entropy": masked(first.entropy, first_mask).sum(),
                 "informative": (advantages != 0).sum(), "batch": len(batch), "rounds": timing["rounds"],
                 "answers": timing["answers"], **self.kl_measured(adv_stats, update),
                 **{k: update[k] for k in ("policy_loss", "kl_loss", "entropy_loss", "clip_low", "clip_high",
                                           "ratio_sum", "tokens", "forwarded", "rows")},
                 **{f"reward/{k}": v.sum() for k, v in first.components.items()}}
        s = dist.reduce_sums(local, self.info.device)
        n, steps, seconds = adv_stats["first_n"], max(update["optimizer_steps"], 1.0), timing["step_seconds"]
        metrics = {
            "train/step": self.step,
            "train/policy_loss": s["policy_loss"] / steps,
            "train/kl_loss": s["kl_loss"] / steps,
            "train/entropy_loss": s["entropy_loss"] / steps,
            "train/accuracy": s["exact"] / n,
            "train/avg_reward": adv_stats["mean_reward"],
            "train/reward_std": adv_stats["reward_std"],
            "train/baseline": self.baseline,
            "train/advantage_baseline": adv_stats["baseline_used"],
            "train/lr": update["lr"],
            "train/entropy": s["entropy"] / max(s["answer_tokens"], 1.0),
            "train/kl": s["kl_sum"] / max(s["kl_tokens"], 1.0) if self.kl_placement else 0.0,
            "train/clip_low_frac": s["clip_low"] / max(s["tokens"], 1.0),
            "train/clip_high_frac": s["clip_high"] / max(s["tokens"], 1.0),
            "train/ratio_mean": s["ratio_sum"] / max(s["tokens"], 1.0),
            "train/grad_norm": update["grad_norm"] / steps,
            "train/answer_tokens": s["answer_tokens"] / n,
            "train/groups_all_equal": s["groups_equal"] / s["groups"],
            "train/batch_answers": s["batch"],
            "train/informative_share": s["informative"] / max(s["batch"], 1.0),
            "train/skipped_share": 1.0 - s["forwarded"] / max(s["rows"], 1.0),
            "train/sampling_rounds": s["rounds"] / self.info.world_size,
            "train/answers_generated": s["answers"],
            "train/skipped_steps": self.num_skipped_steps,
            "perf/samples_per_second": s["answers"] / seconds,
            "perf/step_seconds": seconds,
            "perf/rollout_share": timing["rollout_seconds"] / seconds,
            "perf/reward_share": timing["reward_seconds"] / seconds,
            "perf/update_share": timing["update_seconds"] / seconds,
        }
        metrics.update({k: v / n for k, v in s.items() if k.startswith("reward/")})
        return metrics

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
            "config_name": c.name,
            "config": c.portable_dict(),
            "model_args": c.model_args(),
            "task": c.task_args(),
            **({"ref_model": self.ref_model.state_dict()} if self.ref_model is not None else {}),
        }

    def load_state_dict(self, snap: dict):
        self.model.load_state_dict(snap["model"])
        self.optimizer.load_state_dict(snap["optimizer"])
        self.scheduler.load_state_dict(snap["scheduler"])
        self.baseline = snap["baseline"]
        self.step = snap["step"]
        self.bad_steps_in_a_row = snap["bad_steps_in_a_row"]
        self.num_skipped_steps = snap["num_skipped_steps"]
        if "ref_model" in snap:
            self.ref_model = frozen_copy(self.model)
            self.ref_model.load_state_dict(snap["ref_model"])

    def weights_are_finite(self) -> bool:
        return all(torch.isfinite(p).all() for p in self.model.parameters())
