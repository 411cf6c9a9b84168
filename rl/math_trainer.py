"""MathRLTrainer: one RL step (rollout, reward, advantage, update), evaluation, and its full state.

Every algorithm of `rl_algorithm` is this one step with different settings (rl/algorithms.py has
the table). The default, `reinforce`, is REINFORCE with a moving-average baseline, exactly:

  1. Rollout. Each rank draws rl_batch_size / world_size training problems and samples
     rl_rollout_size answers for each at rl_temperature (no top-k), A = answer digits + 1 tokens.
  2. Reward. r_i = weighted sum of the configured rule rewards (default: exact match, 0 or 1).
  3. Advantage. A_i = r_i - b, with b the baseline *before* this step's update; on the very first
     step b starts at that step's mean reward.
  4. Baseline. b <- m * b + (1 - m) * mean(r) over all samples of all ranks (m = baseline_momentum,
     0.9 by default), so every rank holds the same b.
  5. Loss. -sum_{i,t} A_i * log pi(a_{i,t} | prompt_i, a_{i,<t}) / num_tokens, with pi the sampling
     policy softmax(logits / rl_temperature): a token mean over the answer tokens the policy chose
     (up to and including its end token) of the whole step, all ranks and micro-batches together.
     On-policy: one update per rollout, so no ratio, no clipping, no KL.
  6. Update. Gradients accumulated over rl_ga_steps micro-batches (DDP syncs only on the last),
     global norm clipped to grad_clip, AdamW, then the scheduler: linear warmup for warmup_steps,
     cosine decay to learning_rate * min_lr_ratio at rl_train_steps.

The other algorithms change step 3 (advantage_mode), step 5 (loss_aggregation; PPO's clipped
ratio when a rollout feeds more than one update: ppo_epochs x ppo_minibatches optimizer steps;
a KL penalty to the frozen warm-start policy with kl_coef; an entropy bonus with entropy_coef)
and step 1 (dynamic_sampling: prompt groups whose answers all got the same reward carry no
signal, so they are dropped and replaced by fresh prompts, up to dynamic_sampling_max_rounds).
Answers whose advantage is exactly 0 contribute nothing to the loss; when there is no KL or
entropy term they are not forwarded at all (the normalisers still count them, so the update is
the same as if they had been).

The trainer never parses digits: the environment encodes problems and targets as tokens, rewards
compare token tensors.
"""

import copy
import math
import time
from contextlib import nullcontext
from functools import partial

import torch

from configs.base import BaseRLConfig
from rl import dist, seeding
from rl.algorithms import (aggregate, answer_mask, compute_advantages, compute_entropy, compute_kl, compute_policy_loss,
                           token_logprobs, update_baseline)
from rl.evaluate import EvalResult, evaluate
from rl.math_env import MathEnvironment
from rl.math_reward import compute_rewards, parse_reward_spec


class TrainingError(RuntimeError):
    """The run cannot go on (numbers blew up); the message says why and what to try."""


def group_all_equal(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(N,) rewards -> (N / G,) bool: True where every answer to a prompt got the same reward."""
    grouped = rewards.view(-1, group_size)
    return grouped.max(dim=1).values == grouped.min(dim=1).values


def select(batch: dict, index) -> dict:
    """Rows `index` (bool mask or indices) of every tensor in a rollout batch."""
    return {k: ({n: t[index] for n, t in v.items()} if isinstance(v, dict) else v[index]) for k, v in batch.items()}


def concat(batches: list) -> dict:
    first = batches[0]
    return {k: ({n: torch.cat([b[k][n] for b in batches]) for n in first[k]} if isinstance(first[k], dict)
                else torch.cat([b[k] for b in batches])) for k in first}


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


def configure_optimizer(model: torch.nn.Module, config: BaseRLConfig, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices and embeddings only (nanoGPT's split); biases and
    LayerNorm gains are not decayed."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # The fused kernel updates every tensor in one pass (CPU and CUDA); the per-tensor Python
    # loop it replaces costs more than the arithmetic for a model this small.
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(groups, lr=lr, betas=(config.adam_beta1, config.adam_beta2), fused=fused)


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
        self.ref_model = None  # the frozen warm-start policy, kept only when kl_coef > 0
        # An answer with advantage exactly 0 adds nothing to the policy loss; unless a KL or
        # entropy term gives it a gradient of its own, it need not be forwarded at all.
        self.skip_zero_advantage = config.kl_coef == 0 and config.entropy_coef == 0
        self.baseline = None  # None until the first step; then a float, identical on every rank
        self.step = 0  # RL steps taken
        self.bad_steps_in_a_row = 0  # RL steps in a row with an update skipped for non-finite numbers
        self.num_skipped_steps = 0
        self.reward_seconds = 0.0  # time spent scoring answers in the current step

    # ---- rollout ----------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, a, b, generator):
        """rl_rollout_size answers to each problem (a, b): prompts (N, P), targets (N, A),
        generated (N, A), rewards (N,) and reward components, answers of a prompt consecutive."""
        c, env, device = self.config, self.env, self.info.device
        prompts, targets = (t.to(device) for t in env.encode(a, b))
        self.model.eval()  # no dropout while sampling: the rollout is the policy itself
        generated = self.model.generate(prompts, env.answer_len, temperature=c.rl_temperature, end_token=env.end_token,
                                        pad_token=env.pad_token, generator=generator, num_samples=c.rl_rollout_size)
        self.model.train()
        G = c.rl_rollout_size
        prompts, targets = prompts.repeat_interleave(G, dim=0), targets.repeat_interleave(G, dim=0)
        generated = generated.clone()  # an inference-mode tensor may not enter autograd
        t0 = time.time()
        rewards, components = compute_rewards(self.reward_weights, targets, generated)
        self.reward_seconds += time.time() - t0
        return dict(prompts=prompts, targets=targets, generated=generated, rewards=rewards, components=components)

    def rollout(self, step: int):
        """This rank's batch for `step`: the first round of samples (what metrics describe) and
        the batch the update uses, which dynamic sampling may have refilled."""
        c, G = self.config, self.config.rl_rollout_size
        problems = seeding.numpy_rng(c.seed, self.info.rank, step, seeding.PROBLEMS)
        sampling = seeding.torch_generator(c.seed, self.info.rank, step, seeding.SAMPLING, self.info.device)
        first = self.sample(*self.env.sample_operands(self.local_prompts, problems), sampling)
        if not c.dynamic_sampling:
            return first, first, 1
        # Keep only groups with some spread in reward; refill with fresh prompts from the same
        # streams; if rounds run out, top up with dropped groups (advantage 0: no gradient).
        # Late in a run most groups are all correct, so a refill asks for as many prompts as the
        # share kept so far says it needs (with a margin, at most 4 batches' worth): a few large
        # generate calls instead of many small ones. Surplus informative groups are discarded.
        kept, dropped, rounds, batch = [], [], 1, first
        num_sampled = num_kept = 0
        while True:
            informative = ~group_all_equal(batch["rewards"], G).repeat_interleave(G)
            kept.append(select(batch, informative))
            dropped.append(select(batch, ~informative))
            num_sampled += len(informative) // G
            num_kept += int(informative.sum().item()) // G
            missing = self.local_prompts - num_kept
            if missing <= 0 or rounds > c.dynamic_sampling_max_rounds:
                break
            want = math.ceil(1.25 * missing * num_sampled / num_kept) if num_kept else 4 * self.local_prompts
            batch = self.sample(*self.env.sample_operands(min(want, 4 * self.local_prompts), problems), sampling)
            rounds += 1
        full = concat(kept)
        if missing > 0:
            full = concat([full, select(concat(dropped), torch.arange(missing * G, device=first["rewards"].device))])
        return first, select(full, torch.arange(self.local_prompts * G, device=first["rewards"].device)), rounds

    # ---- one step -------------------------------------------------------------------------
    def train_step(self) -> dict:
        """One RL step (see the module docstring); returns its metrics, reduced over ranks."""
        c, info, P, G = self.config, self.info, self.env.prompt_len, self.config.rl_rollout_size
        t0 = time.time()
        self.reward_seconds = 0.0
        seeding.seed_dropout(c.seed, info.rank, self.step)
        if c.kl_coef > 0 and self.ref_model is None:
            self.ref_model = frozen_copy(self.model)  # the policy RL starts from
        first, batch, rounds = self.rollout(self.step)
        t_rollout = time.time() - t0 - self.reward_seconds

        # Everything the advantages need from other ranks, in one all-reduce.
        r0, r = first["rewards"], batch["rewards"]
        stats = dist.all_reduce_sum(torch.stack([r0.sum(), (r0 ** 2).sum(), torch.tensor(float(r0.numel()), device=r0.device),
                                                 r.sum(), (r ** 2).sum(), torch.tensor(float(r.numel()), device=r.device)]).double())
        sum0, sq0, n0, sum_b, sq_b, n_b = stats.tolist()
        mean_reward = sum0 / n0
        batch_mean = sum_b / n_b
        batch_std = math.sqrt(max(sq_b - n_b * batch_mean ** 2, 0.0) / max(n_b - 1, 1))
        if self.baseline is None:
            self.baseline = mean_reward
        baseline_used = self.baseline
        advantages = compute_advantages(r, G, c.advantage_mode, baseline=baseline_used, batch_mean=batch_mean,
                                        batch_std=batch_std)
        self.baseline = update_baseline(self.baseline, mean_reward, c.baseline_momentum)

        generated = batch["generated"]
        sequences = torch.cat([batch["prompts"], generated], dim=1)
        mask = answer_mask(generated, self.env.end_token)
        N = len(r)
        shuffle = seeding.torch_generator(c.seed, info.rank, self.step, seeding.SHUFFLE, "cpu")
        orders = [(torch.randperm(N, generator=shuffle) if c.ppo_minibatches > 1 else torch.arange(N)).to(mask.device)
                  for _ in range(c.ppo_epochs)]
        off_policy = c.ppo_epochs * c.ppo_minibatches > 1  # a rollout feeds several updates: PPO ratios
        first_rows = torch.tensor_split(orders[0], c.ppo_minibatches)[0]
        with torch.no_grad():
            # Log-probs of the policy that sampled, for the PPO ratios. The first minibatch is
            # updated before any optimizer step, so its sampling policy is the policy itself
            # (ratio 1, taken from its own forward, which also fills its rows in for later
            # epochs): only the other rows need this extra pass, and of those only rows the
            # update will forward.
            old_logp = None
            if off_policy:
                need = torch.ones(N, dtype=torch.bool, device=mask.device)
                need[first_rows] = False
                if self.skip_zero_advantage:
                    need &= advantages != 0
                old_logp = torch.zeros(mask.shape, device=mask.device)
                if need.any():
                    old_logp[need] = self.logprobs(self.model, sequences[need], generated[need])
            # and the reference policy's, for the KL penalty
            ref_logp = self.logprobs(self.ref_model, sequences, generated) if c.kl_coef > 0 else None

        sums = dict(loss=0.0, kl=0.0, entropy=0.0, entropy_tokens=0.0, clip_low=0.0, clip_high=0.0, ratio_sum=0.0,
                    tokens=0.0, grad_norm=0.0, forwarded=0.0, rows=0.0)
        any_skipped, num_updates = False, 0
        lr = self.optimizer.param_groups[0]["lr"]
        for epoch, order in enumerate(orders):
            for minibatch, rows in enumerate(torch.tensor_split(order, c.ppo_minibatches)):
                own_ratio = off_policy and epoch == 0 and minibatch == 0
                # Normalisers count every answer of the minibatch on every rank, skipped or not.
                counts = dist.all_reduce_sum(torch.stack([mask[rows].sum().double(), torch.tensor(float(len(rows)), dtype=torch.float64, device=mask.device)]))
                norm = dict(num_tokens=counts[0].item(), num_sequences=counts[1].item(), max_len=self.env.answer_len)
                sums["rows"] += len(rows)
                if self.skip_zero_advantage:
                    rows = rows[advantages[rows] != 0]
                sums["forwarded"] += len(rows)
                micro = torch.tensor_split(rows, c.rl_ga_steps)
                minibatch_loss = 0.0
                for i, chunk in enumerate(micro):
                    last = i == len(micro) - 1
                    weight = 1.0
                    if len(chunk) == 0:  # every rank must take part in each gradient all-reduce
                        chunk, weight = order[:1].to(mask.device), 0.0
                    sync = nullcontext() if (last or not info.distributed) else self.policy.no_sync()
                    with sync:
                        part = self.micro_loss(sequences[chunk], generated[chunk], mask[chunk] * weight,
                                               advantages[chunk],
                                               "own" if own_ratio else None if old_logp is None else old_logp[chunk],
                                               None if ref_logp is None else ref_logp[chunk], norm)
                        # DDP averages gradients over ranks; the loss is already normalised by
                        # global counts, so scale by world_size to turn that average into the sum.
                        loss = part.pop("loss")
                        (loss * info.world_size).backward()
                    minibatch_loss += loss.item()
                    own_logp = part.pop("own_logp", None)
                    if own_logp is not None and weight:
                        old_logp[chunk] = own_logp
                    for k, v in part.items():
                        sums[k] += v.item()
                minibatch_loss = dist.all_reduce_sum(torch.tensor([minibatch_loss], device=info.device)).item()
                sums["loss"] += minibatch_loss
                max_norm = c.grad_clip if c.grad_clip > 0 else float("inf")
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm).item()
                sums["grad_norm"] += grad_norm
                # Numerical guard: a non-finite loss (on any rank) or gradient norm (the same on
                # every rank after the gradient all-reduce) skips this update everywhere, so the
                # weights and optimizer state stay finite and no rank waits for another.
                bad = not (math.isfinite(minibatch_loss) and math.isfinite(grad_norm))
                if not bad:
                    self.optimizer.step()
                any_skipped |= bad
                self.optimizer.zero_grad(set_to_none=True)
                num_updates += 1
        self.scheduler.step()  # the schedule follows RL steps, skipped or not
        self.step += 1
        self.bad_steps_in_a_row = self.bad_steps_in_a_row + 1 if any_skipped else 0
        self.num_skipped_steps += int(any_skipped)
        if self.bad_steps_in_a_row >= c.max_bad_steps:
            raise TrainingError(f"non-finite loss or gradient norm for {self.bad_steps_in_a_row} steps in a row "
                                f"(up to step {self.step}); lower learning_rate, keep grad_clip on, or check the rewards")
        return self.step_metrics(first, batch, sums, num_updates, rounds, baseline_used, mean_reward, n0, sq0, lr,
                                 t0, t_rollout)

    def logprobs(self, model, sequences, generated):
        """(N, A) log-probs of the generated answers under `model`, in rl_ga_steps chunks."""
        P, T = self.env.prompt_len, self.config.rl_temperature
        parts = [token_logprobs(model(seq[:, :-1])[:, P - 1:], gen, T)
                 for seq, gen in zip(torch.tensor_split(sequences, self.config.rl_ga_steps),
                                     torch.tensor_split(generated, self.config.rl_ga_steps))]
        return torch.cat(parts)

    def micro_loss(self, sequences, generated, mask, advantages, old_logp, ref_logp, norm) -> dict:
        """The loss of one micro-batch (normalised by whole-minibatch counts) and its statistics.
        old_logp: None (plain policy gradient), (n, A) sampling-policy log-probs (PPO ratios), or
        "own" (ratios against this very forward, detached: the policy has not been updated yet)."""
        c, P = self.config, self.env.prompt_len
        logits = self.policy(sequences[:, :-1])[:, P - 1:] / c.rl_temperature  # (n, A, V): the sampling policy
        logp = token_logprobs(logits, generated)
        out = {}
        if isinstance(old_logp, str):  # "own": this forward is the sampling policy (ratio exactly 1)
            old_logp = out["own_logp"] = logp.detach()
        loss, st = compute_policy_loss(logp, old_logp, advantages, mask, c.clip_low, c.clip_high, c.loss_aggregation,
                                       **norm)
        out.update(clip_low=st["clip_low"], clip_high=st["clip_high"], ratio_sum=st["ratio_sum"], tokens=st["tokens"])
        entropy = compute_entropy(logits if c.entropy_coef > 0 else logits.detach(), mask)
        if c.entropy_coef > 0:
            loss = loss - c.entropy_coef * aggregate(entropy, mask, c.loss_aggregation, **norm)
        if ref_logp is not None:
            kl = compute_kl(logp, ref_logp, c.kl_estimator)
            kl_term = aggregate(kl, mask, c.loss_aggregation, **norm)
            loss = loss + c.kl_coef * kl_term
            out["kl"] = (kl.detach() * mask).sum()
        out["entropy"] = entropy.detach().sum()
        out["entropy_tokens"] = mask.sum()
        out["loss"] = loss
        return out

    def step_metrics(self, first, batch, sums, num_updates, rounds, baseline_used, mean_reward, n0, sq0, lr, t0,
                     t_rollout) -> dict:
        """Metrics of the step, each reduced over ranks (one all-reduce)."""
        G, info = self.config.rl_rollout_size, self.info
        exact = (first["generated"] == first["targets"]).all(dim=1).float()
        local = [0.0, sums["kl"], sums["entropy"], sums["entropy_tokens"], sums["clip_low"], sums["clip_high"],
                 sums["ratio_sum"], sums["tokens"], sums["forwarded"], sums["rows"], exact.sum().item(),
                 group_all_equal(first["rewards"], G).sum().item(), len(first["rewards"]) // G,
                 answer_mask(first["generated"], self.env.end_token).sum().item(), float(rounds)]
        local += [v.sum().item() for v in first["components"].values()]
        red = dist.all_reduce_sum(torch.tensor(local, dtype=torch.float64, device=info.device)).tolist()
        _, kl, ent, ent_tok, c_low, c_high, ratio, tok, fwd, rows, exact_n, equal_g, groups, ans_tok, rnds = red[:15]
        elapsed = time.time() - t0
        metrics = {
            "train/step": self.step,
            "train/policy_loss": sums["loss"] / num_updates,
            "train/accuracy": exact_n / n0,
            "train/avg_reward": mean_reward,
            "train/reward_std": math.sqrt(max(sq0 / n0 - mean_reward ** 2, 0.0)),
            "train/baseline": self.baseline,
            "train/advantage_baseline": baseline_used,
            "train/lr": lr,
            "train/entropy": ent / max(ent_tok, 1.0),
            "train/kl": kl / max(ent_tok, 1.0),
            "train/clip_low_frac": c_low / max(tok, 1.0),
            "train/clip_high_frac": c_high / max(tok, 1.0),
            "train/ratio_mean": ratio / max(tok, 1.0),
            "train/grad_norm": sums["grad_norm"] / num_updates,
            "train/answer_tokens": ans_tok / n0,
            "train/groups_all_equal": equal_g / groups,
            "train/skipped_share": 1.0 - fwd / max(rows, 1.0),
            "train/sampling_rounds": rnds / info.world_size,
            "train/skipped_steps": self.num_skipped_steps,
            "perf/samples_per_second": n0 / elapsed,
            "perf/step_seconds": elapsed,
            "perf/rollout_share": t_rollout / elapsed,
            "perf/reward_share": self.reward_seconds / elapsed,
            "perf/update_share": 1.0 - (t_rollout + self.reward_seconds) / elapsed,
        }
        for name, value in zip(first["components"], red[15:]):
            metrics[f"reward/{name}"] = value / n0
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
            "bad_steps_in_a_row": self.bad_steps_in_a_row,
            "num_skipped_steps": self.num_skipped_steps,
            "config_name": c.name,
            "config": c.to_dict(),
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
