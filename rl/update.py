"""The update's machinery, whatever the objective optimises: the networks it trains (`Learner`), the
rows it trains on (`UpdateBatch`), and `Updater`, which takes ppo_epochs passes of ppo_minibatches
optimizer steps over them. An objective (rl/objectives.py) says only what a micro-batch's loss is.

One optimizer step, on every rank:
  1. Count the minibatch's answer tokens and rows over all ranks: every loss is normalised by these
     global counts, so the step is the same whatever the number of ranks and micro-batches.
  2. Forward and backward rl_ga_steps micro-batches; DDP averages gradients on the last one only.
  3. Clip each learner's global gradient norm to grad_clip; if the loss or a norm is not finite on
     any rank, skip the step everywhere (the numerical guard); else AdamW steps.
The host reads the device once: every minibatch's counts first (on CUDA each read is a host sync; an optimizer step
has none). The statistics, the guard's skips among them, stay on the device for the trainer's one read of the
metrics.
The schedule (linear warmup, cosine decay: `lr_lambda`) follows RL steps, one `schedule` a step.

With prefix_sharing, each micro-batch's forward reads each prompt once for its answers (model/gpt.py PromptGroups,
made by `PromptGroups.of_rows` on the host from the rows' indices: rows i*G ... i*G+G-1 answer one problem), and a
minibatch's rows are sorted before they are split into micro-batches, so a micro-batch holds whole groups' rows
(the minibatch, and so its gradient, is the same whatever its split).

With rl_cuda_graphs on one CUDA device (`graphs_apply`), each optimizer step is replayed from a CUDA graph
(rl/graphs.py) instead of some 450 kernel launches: its rows padded with copies of the first (an empty mask and
advantage 0: loss and gradient exactly 0) to a power of two (`padded_rows`: a graph per size, at most twice the
rows), its normalisers read from device scalars. The same step to float rounding (padding splits the sums otherwise).

ScheduleSettings: the settings of RL's optimizer steps (how many, in how many micro-batches, AdamW and its
learning-rate schedule; the warm start's AdamW shares weight_decay, the betas and grad_clip).
"""

import math
import warnings
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, fields
from functools import partial
from typing import Callable, Optional

import torch

from model.gpt import PromptGroups, configure_optimizer
from rl import dist, seeding
from rl.errors import ConfigError
from rl.graphs import CapturedSteps, can_capture, portable


def lr_lambda(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Multiplier of the peak learning rate for the update after `step` updates: linear warmup
    from 1/warmup_steps to 1, then cosine decay from 1 to min_lr_ratio at total_steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps  # step + 1: the first update moves at 1/warmup_steps of the peak, not at 0
    # max(1, ...): warmup may last the whole run; min(1.0, ...): no step past the end climbs the cosine back up
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class ScheduleSettings:
    """RL's optimizer steps: how many, each in how many micro-batches, and AdamW with its schedule."""
    rl_train_steps: int = 200
    """optimizer steps of RL (>= 0)"""
    rl_ga_steps: int = 2
    """micro-batches per step (gradient accumulation); bounds memory, not the result (> 0)"""
    learning_rate: float = 3e-4
    """peak learning rate of RL: 6e-4 and 1e-3 first lose most of the warm start's accuracy
    (docs/earlier-studies.md) (> 0)"""
    min_lr_ratio: float = 0.1
    """cosine decay ends at learning_rate * min_lr_ratio (in [0, 1])"""
    warmup_steps: int = 20
    """RL steps of linear learning-rate warmup before the cosine decay (>= 0)"""
    weight_decay: float = 0.01
    """AdamW weight decay on weight matrices and embeddings, not biases or LayerNorm gains (warm start and RL) (>= 0)"""
    adam_beta1: float = 0.9
    """AdamW beta1 (warm start and RL) (in [0, 1))"""
    adam_beta2: float = 0.99
    """AdamW beta2 (warm start and RL) (in [0, 1))"""
    grad_clip: float = 1.0
    """clip the global gradient norm to this; 0 disables (warm start and RL) (>= 0)"""
    rl_cuda_graphs: bool = False
    """on one CUDA device, replay each RL optimizer step (forward, backward, clipping, AdamW) as a captured CUDA graph,
    its rows padded to a power of two: eager steps are launch-bound (the adder's two at 64 prompts 12.6 ms on an H200
    against 5.1 ms of arithmetic); policy-gradient objectives, rl_ga_steps=1, no compile; not yet measured"""
    prefix_sharing: bool = False
    """the update's forward reads each prompt once for its answers in a micro-batch, not once per answer (model/gpt.py
    PromptGroups; the critic's too), and sampling's decode keeps one copy of each prompt's cache for its G answers
    (KVCache.share_prompts): the same step to float rounding; the adder's update 1.5x faster on a 2-core CPU, 1.9x at
    256 prompts, its sampling 1.15x, 2-digit multiplication's update 1.2x, its sampling 1.0x
    (results/study/prefix-sharing/); compiled with compile, not with rl_cuda_graphs"""

    @property
    def shared_group_size(self) -> int:
        """G when prefix_sharing reads each prompt once for the G answers a rollout gives it in a row, else 0."""
        return self.rl_rollout_size if self.prefix_sharing else 0

    def check_schedule(self, world_size: int = 1):
        """rl_ga_steps divides the answers each process samples a step (rl_batch_size / world_size prompts
        times rl_rollout_size), so every micro-batch has as many rows."""
        local = self.rl_batch_size // world_size * self.rl_rollout_size
        if local % self.rl_ga_steps == 0:
            return
        if world_size == 1:
            raise ConfigError(f"rl_batch_size*rl_rollout_size={local} is not divisible by "
                              f"rl_ga_steps={self.rl_ga_steps}")
        raise ConfigError(f"each of the {world_size} processes samples {local} answers per step, "
                          f"which rl_ga_steps={self.rl_ga_steps} does not divide")

    def schedule_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]: a graphed step is one micro-batch through
        the eager modules (the objective's part: rl/objectives.py graphable)."""
        return [(("rl_cuda_graphs",), self.rl_ga_steps != 1 or self.compile, "needs rl_ga_steps=1 and compile=false"),
                # a grouped pass's shapes follow the data (its prompts): compiled with dynamic shapes, not graphed
                (("prefix_sharing",), self.rl_cuda_graphs,
                 "needs rl_cuda_graphs=false (a graphed step's shapes are fixed, a grouped pass's follow its prompts)")]


@dataclass
class Learner:
    """A network the update trains: the module, what forwards it (its DDP wrapper under several
    processes, else the module), its AdamW and its learning-rate schedule."""
    module: torch.nn.Module
    wrapped: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    peak_lr: float  # the config's: a resumed run follows it, not the snapshot's (rl/snapshot.py RESUMABLE)

    @classmethod
    def build(cls, module: torch.nn.Module, wrapped: torch.nn.Module, config, lr: float) -> "Learner":
        """AdamW at peak `lr` with the RL step's schedule; wrapped: the module itself or its DDP wrapper."""
        c = config
        optimizer = configure_optimizer(module, lr=lr, weight_decay=c.weight_decay, betas=(c.adam_beta1, c.adam_beta2))
        # a multiplier of this learner's own peak lr: the policy and the critic share one schedule's shape
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, partial(
            lr_lambda, warmup_steps=c.warmup_steps, total_steps=c.rl_train_steps, min_lr_ratio=c.min_lr_ratio))
        return cls(module, wrapped, optimizer, scheduler, lr)

    def state_dict(self, keys: tuple) -> dict:
        """keys: the snapshot's names for (module, optimizer, scheduler)."""
        # (portable: rates as numbers, capturable off, whatever a graphed step made of them: rl/graphs.py)
        return dict(zip(keys, (self.module.state_dict(), portable(self.optimizer.state_dict()),
                               self.scheduler.state_dict())))

    def lr(self) -> float:
        """The rate the next optimizer step takes: LambdaLR's own formula (the group's entry may be a device tensor)."""
        return self.scheduler.base_lrs[0] * self.scheduler.lr_lambdas[0](self.scheduler.last_epoch)

    def load_state_dict(self, snap: dict, keys: tuple):
        """The saved module, optimizer and schedule position; the learning rate then follows this
        config's schedule from that position (the same number when nothing changed, so an exact resume
        stays exact; a resumed run's new peak, warmup, length or floor takes effect from its next step)."""
        for part, key in zip((self.module, self.optimizer, self.scheduler), keys):
            part.load_state_dict(snap[key])
        scheduler = self.scheduler
        scheduler.base_lrs = [self.peak_lr for _ in scheduler.base_lrs]
        for group, factor in zip(self.optimizer.param_groups, scheduler.lr_lambdas):
            group["initial_lr"] = self.peak_lr
            group["lr"] = self.peak_lr * factor(scheduler.last_epoch)  # LambdaLR's own formula
        scheduler._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def is_finite(self) -> bool:
        # what save_step asks before writing: a snapshot never holds non-finite weights
        return all(torch.isfinite(p).all() for p in self.module.parameters())


@dataclass
class UpdateBatch:
    """What the update trains on, row for row: sequences (N, P + A), generated (N, A), mask (N, A),
    advantages (N,) or (N, A); old_logp (N, A), the sampling policy's log-probs for PPO ratios when a
    rollout feeds several optimizer steps (None when it feeds one: on-policy); ref_logp (N, A), the
    frozen reference's, when a KL term is in the loss; returns and old_values (N, A), the critic's
    targets and its values when the rollout was scored (ppo_critic); pos (N, P + A), the position ids the
    answers were sampled at (None: the model's own, as for every fixed-length task). For DPO a row is a pair: every
    tensor has a second dimension of 2 (chosen, rejected), ref_logp holds sequence log-probs, and
    advantages is None. groups: which of these rows share a prompt (prefix_sharing; a micro-batch's, set by the
    Updater: a selection of rows has none)."""
    sequences: torch.Tensor
    generated: torch.Tensor
    mask: torch.Tensor
    advantages: Optional[torch.Tensor] = None
    old_logp: Optional[torch.Tensor] = None
    ref_logp: Optional[torch.Tensor] = None
    returns: Optional[torch.Tensor] = None
    old_values: Optional[torch.Tensor] = None
    pos: Optional[torch.Tensor] = None
    groups: Optional[PromptGroups] = None

    def __len__(self) -> int:
        return len(self.sequences)

    def tensors(self) -> list:
        """The names of the row tensors (every field but groups), set or not."""
        return [f.name for f in fields(self) if f.name != "groups"]

    def select(self, rows) -> "UpdateBatch":
        return UpdateBatch(*(None if getattr(self, name) is None else getattr(self, name)[rows]
                             for name in self.tensors()))

    def blank(self, pad_token: int, num_rows: int = 1) -> "UpdateBatch":
        """num_rows all-pad rows shaped like these rows, with an empty mask and zeros elsewhere: what a rank
        with nothing to forward forwards, so it still joins every gradient all-reduce."""
        def blank(name):
            t = getattr(self, name)
            if t is None:
                return None
            fill = pad_token if name in ("sequences", "generated") else 0
            return torch.full((num_rows, *t.shape[1:]), fill, dtype=t.dtype, device=t.device)
        return UpdateBatch(*(blank(name) for name in self.tensors()))

    def padded(self, rows: torch.Tensor, num_rows: int, pad_token: int) -> "UpdateBatch":
        """Rows `rows` (indices on the device), then num_rows - len(rows) rows that add nothing: copies of the first
        with an empty mask and advantage 0, whose loss and gradient are exactly 0 and every term of theirs (ratios,
        KL) as a real row's, where a blank row's pad tokens may be very unlikely; blank rows when there is none."""
        if len(rows) == 0:
            return self.blank(pad_token, num_rows)
        n = len(rows)
        out = self.select(torch.cat([rows, rows[:1].expand(num_rows - n)]))
        out.mask[n:] = 0
        if out.advantages is not None:
            out.advantages[n:] = 0
        return out


# loss_fn(part, norm) -> {"loss": tensor to backward, "total": its value (detached), and stats to sum}
LossFn = Callable[[UpdateBatch, dict], dict]


class Updater:
    """ppo_epochs passes of ppo_minibatches optimizer steps of every learner over an UpdateBatch."""

    def __init__(self, config, info: dist.DistInfo, answer_len: int, pad_token: int, *, graphed: bool = False,
                 prompt_len: int = 0):
        """graphed: replay each optimizer step from a CUDA graph (graphs_apply says where it may); prompt_len: with
        prefix_sharing, the prompts' length (the rows G to a prompt in a row, as rl/rollout.py's Rollout has them)."""
        self.config, self.info, self.answer_len, self.pad_token = config, info, answer_len, pad_token
        self.prompt_len = prompt_len if config.prefix_sharing else 0
        self.graphs = None  # graphed: the policy's CapturedSteps, made at the first optimizer step
        self.graphed = graphed
        # the most rows a minibatch can have: this rank's answers of a step, split into ppo_minibatches (rounded up)
        answers = config.rl_batch_size // info.world_size * config.rl_rollout_size
        self.most_rows = -(-answers // config.ppo_minibatches)

    def run(self, learners: list, data: UpdateBatch, loss_fn: LossFn, step: int, *, skip_zero=False) -> dict:
        """Every optimizer step of RL step `step`; returns the statistics summed over micro-batches and
        steps (this rank's): floats known on the host, and float64 tensors left on the device (the loss's, the
        gradient norm, `skipped`: > 0 where the guard skipped a step), which the trainer reads with the step's
        metrics, in one read. skip_zero: rows whose advantage is exactly 0 are not forwarded (their
        policy loss and gradient are 0; the normalisers still count them)."""
        # Nothing left on the parameters from elsewhere (a warm start's last backward) may join this step.
        for learner in learners:
            learner.optimizer.zero_grad(set_to_none=True)
        # summed over micro-batches and optimizer steps; the loss's statistics as float64 tensors, not read here
        sums = self.no_step(learners, skipped=False)
        minibatches = [rows for order in self.minibatch_orders(step, len(data))  # a short batch need not divide
                       for rows in torch.tensor_split(order, self.config.ppo_minibatches)]
        for rows, counts, forwarded in zip(minibatches, *self.minibatch_counts(data, minibatches, skip_zero)):
            self.optimizer_step(learners, data, (rows, forwarded), counts, loss_fn, sums)
        sums["skipped"] = sums.pop("skipped_steps", 0.0)  # the optimizer steps the guard skipped
        return sums

    @staticmethod
    def no_step(learners: list, skipped: bool) -> dict:
        """The statistics of an RL step before any optimizer step: every sum 0 (the trainer divides them),
        and the lr this step uses. skipped=True: what a step that takes no update at all reports."""
        return defaultdict(float, skipped=skipped, lr=learners[0].lr())

    def minibatch_orders(self, step: int, num_rows: int) -> list:
        """The row order of each of the ppo_epochs passes (a shuffle per pass when a pass has
        several minibatches), from the step's own stream so a resumed run shuffles alike."""
        c = self.config
        # each rank shuffles its own rows, on the CPU and then moved, so the order is the same on any device;
        # a single minibatch takes every row whatever the order, so it is not shuffled
        shuffle = seeding.torch_generator(c.seed, self.info.rank, step, seeding.SHUFFLE, "cpu")
        return [torch.randperm(num_rows, generator=shuffle) if c.ppo_minibatches > 1 else torch.arange(num_rows)
                for _ in range(c.ppo_epochs)]

    def minibatch_counts(self, data: UpdateBatch, minibatches: list, skip_zero: bool):
        """Each minibatch's normalisers, {tokens, rows} over all ranks (every row counted, forwarded or not), and
        its rows this rank forwards: all of them, or (skip_zero) those with an advantage that is not 0, whose
        policy loss and gradient are 0 (counted all the same, so dropping them leaves the update as it was).
        From one read of the device and one all-reduce for all minibatches, not a host sync per optimizer step."""
        per_row = [data.mask.flatten(1).sum(dim=1)]  # (N,) each row's answer tokens (a DPO row holds two answers)
        if skip_zero:
            nonzero = data.advantages != 0  # (N,) or (N, A): a row with any token's advantage
            per_row.append(nonzero.any(dim=1) if nonzero.dim() == 2 else nonzero)
        per_row = torch.stack([t.to(torch.int64) for t in per_row]).cpu()
        local = torch.tensor([[float(per_row[0][rows].sum()), len(rows)] for rows in minibatches], dtype=torch.float64)
        counts = [dict(tokens=t, rows=n) for t, n in dist.sum_on_host(local, self.info.device).tolist()]
        forwarded = [rows[per_row[1][rows].bool()] if skip_zero else rows for rows in minibatches]
        return counts, forwarded

    def optimizer_step(self, learners: list, data: UpdateBatch, rows: tuple, counts: dict, loss_fn: LossFn,
                       sums: dict):
        """One optimizer step of every learner on a minibatch, accumulated over rl_ga_steps micro-batches. rows:
        the minibatch's and those this rank forwards, on the host; counts: its normalisers (minibatch_counts);
        sums: the statistics, floats known on the host and the loss's float64 tensors on the device (add_sums)."""
        info, (rows, forwarded) = self.info, rows
        if counts["rows"] == 0:  # nothing to learn from on any rank (dynamic sampling kept nothing, no pairs)
            return
        # max_len: seq-mean-token-sum-norm's constant A (Dr. GRPO), not the longest answer in this batch
        norm = dict(num_tokens=counts["tokens"], num_sequences=counts["rows"], max_len=self.answer_len)
        sums["rows"] += len(rows)  # before skip_zero drops any: train/skipped_share's denominator
        sums["forwarded"] += len(forwarded)
        if self.prompt_len:  # a micro-batch then holds whole groups' rows: a minibatch's gradient whatever its split
            forwarded = forwarded.sort().values
        rows = forwarded.to(info.device, non_blocking=True)
        sums["optimizer_steps"] += 1
        if self.graphed:
            return self.graphed_step(learners[0], data, rows, norm, loss_fn, sums)
        # Always rl_ga_steps chunks, some perhaps empty: every rank runs as many forwards and backwards,
        # so DDP's gradient all-reduces pair up across ranks.
        chunks, loss_sum = torch.tensor_split(rows, self.config.rl_ga_steps), 0.0
        on_host = torch.tensor_split(forwarded, self.config.rl_ga_steps)  # the same rows, for their prompt groups
        for i, chunk in enumerate(chunks):
            # Every rank takes part in each gradient all-reduce, even with nothing to forward: an
            # empty micro-batch forwards one row with an empty mask (loss and gradient exactly 0).
            part = data.select(chunk) if len(chunk) else data.blank(self.pad_token)
            if self.prompt_len and len(chunk):
                part.groups = PromptGroups.of_rows(on_host[i], self.config.rl_rollout_size, self.prompt_len,
                                                   info.device)
            with ExitStack() as stack:
                if i < len(chunks) - 1 and info.distributed:  # DDP syncs gradients on the last only
                    for learner in learners:
                        stack.enter_context(learner.wrapped.no_sync())
                out = loss_fn(part, norm)
                # DDP averages gradients over ranks; the loss is already normalised by global counts,
                # so scale by world_size to turn that average into the sum.
                (out.pop("loss") * info.world_size).backward()
            # (a float total, already read, is taken too)
            loss_sum = loss_sum + torch.as_tensor(out.pop("total"), dtype=torch.float64, device=info.device)
            add_sums(sums, out)
        add_sums(sums, self.take_step(learners, loss_sum))

    def graphed_step(self, learner: Learner, data: UpdateBatch, rows: torch.Tensor, norm: dict, loss_fn: LossFn,
                     sums: dict):
        """optimizer_step as a replayed CUDA graph (rl/graphs.py): the minibatch's rows (on the device) padded to
        padded_rows (UpdateBatch.padded), one micro-batch, the policy alone; its statistics added to sums."""
        if self.graphs is None:
            self.graphs = CapturedSteps(learner.optimizer)
        names = [name for name in data.tensors() if getattr(data, name) is not None]
        part = data.padded(rows, padded_rows(len(rows), self.most_rows), self.pad_token)

        def step(tensors: tuple, numbers: dict) -> dict:  # reads nothing on the host: a graph can capture it
            out = loss_fn(UpdateBatch(**dict(zip(names, tensors))), {**numbers, "max_len": self.answer_len})
            out.pop("loss").backward()
            total = torch.as_tensor(out.pop("total"), dtype=torch.float64, device=self.info.device)
            return {**out, **self.take_step([learner], total)}
        numbers = {k: norm[k] for k in ("num_tokens", "num_sequences")}
        add_sums(sums, self.graphs.step(step, tuple(getattr(part, name) for name in names), numbers))

    def take_step(self, learners: list, loss_sum: torch.Tensor) -> dict:
        """Clip, guard and step every learner, whatever the micro-batches accumulated (loss_sum: this rank's),
        with nothing read on the host; returns {skipped_steps: 1 if the guard skipped it, grad_norm: the policy's}."""
        # grad_clip=0 turns clipping off; the norm is still measured, for the guard and train/grad_norm
        max_norm = self.config.grad_clip if self.config.grad_clip > 0 else float("inf")
        # each learner's own norm and budget: the critic's gradients never shrink the policy's
        norms = [torch.nn.utils.clip_grad_norm_(learner.module.parameters(), max_norm) for learner in learners]
        # Numerical guard: a non-finite loss (on any rank: summed over ranks) or gradient norm (the same on every
        # rank after the gradient all-reduce) skips this update everywhere, so the weights and optimizer state stay
        # finite and no rank waits for another. Decided on the device: the fused AdamW (configure_optimizer's)
        # skips its step, its step count included, where found_inf is 1, as not calling it did, bit for bit.
        checked = torch.cat([dist.all_reduce_sum(loss_sum.reshape(1)), *(norm.reshape(1).double() for norm in norms)])
        found_inf = (~torch.isfinite(checked).all()).to(torch.float32)
        for learner in learners:
            learner.optimizer.found_inf = found_inf
            learner.optimizer.step()
            learner.optimizer.zero_grad(set_to_none=True)  # stepped or skipped: nothing carries into the next
        return dict(skipped_steps=found_inf, grad_norm=norms[0])


def add_sums(sums: dict, stats: dict):
    """Add a micro-batch's or a step's statistics to the step's sums, in their order: a tensor as float64 on the
    device (not read: a host sync each on CUDA), a float on the host."""
    for k, v in stats.items():
        sums[k] = sums[k] + (v.double() if torch.is_tensor(v) else float(v))


def padded_rows(num_rows: int, most: int) -> int:
    """The rows a graphed optimizer step forwards for num_rows: the next power of two, at most `most` (the largest
    minibatch): a graph for each of a few sizes, and never twice the rows needed."""
    return max(num_rows, min(most, 1 << max(num_rows - 1, 0).bit_length()))


def graphs_apply(config, env, info: dist.DistInfo) -> bool:
    """Whether RL's optimizer steps replay CUDA graphs: asked for (schedule_unused refuses it with a setting it
    cannot follow), where a step can be captured at all (rl/graphs.py can_capture)."""
    return config.rl_cuda_graphs and can_capture(env, info)


def schedule(learners: list):
    """One RL step of every learner's schedule, taken whether the step updated or not."""
    with warnings.catch_warnings():  # a step with nothing to train on took no optimizer step: intended
        warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step", category=UserWarning)
        for learner in learners:
            learner.scheduler.step()
