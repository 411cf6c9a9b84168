"""Rollouts: the training problems a step draws, the answers sampled to them, their rewards, and
dynamic sampling's refill rounds, up to the batch the update trains on.

One step on one rank (`RolloutCollector.collect`):
  1. Draw num_prompts training problems from the problem sampler (rl/problem_sampler.py: uniform,
     prioritized or replay), sample rl_rollout_size = G answers to each at rl_temperature, and
     score them with the configured rule rewards. That first round is what the step's metrics
     describe.
  2. Dynamic sampling (DAPO): groups whose answers all got the same reward carry no signal, so
     they are dropped and more problems drawn, in rounds sized by `refill_size`, until num_prompts
     informative groups are kept or dynamic_sampling_max_rounds more rounds are spent. Surplus
     groups are discarded; a batch the rounds could not fill stays short (the update normalises
     by what it trains on rather than diluting the step with groups that carry no signal).
  3. rft keeps only the answers that are exactly right.
Every group's outcome (its pair and how many of its G answers were exactly right) goes into the
returned `RolloutStats`, for the problem sampler to learn from once every rank's are gathered, and
so does the count of answers sampled from non-finite logits (`nonfinite`), for which the trainer
skips the step (rl/math_trainer.py); a round that meets one ends the refills.

Random streams are functions of (seed, rank, step) (rl/seeding.py): a resumed step draws what the
uninterrupted one drew, as long as the problem sampler's state is restored too.

RolloutSettings: the settings of a step's sampling (prompts, answers to each, temperature, rewards, refill
rounds) and their checks.
"""

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

from model.gpt import repeat_rows
from rl import dist, seeding
from rl.algorithms import answer_mask, group_all_equal
from rl.errors import ConfigError
from rl.math_reward import compute_rewards, exact_match, parse_reward_spec
from rl.problem_sampler import pair_keys


@dataclass
class RolloutSettings:
    """What a step samples: how many prompts, answers to each, at what temperature, scored how."""
    rl_batch_size: int = 64
    """prompts per step (global, split across ranks); 32 at lr 6e-4 ended at 0.912 on one seed of three
    (docs/earlier-studies.md) (> 0)"""
    rl_rollout_size: int = 8
    """answers sampled per prompt (> 0)"""
    rl_temperature: float = 1.0
    """sampling temperature of rollouts (> 0)"""
    rewards: str = "exact_match:1.0"
    """rewards and weights, e.g. 'exact_match:1.0,format:0.1' (exact_match, steps, digit_match, format)"""
    dynamic_sampling_max_rounds: int = 2
    """extra sampling rounds per step at most when refilling dropped groups: near 0.99 more rounds cost seconds
    for answers that are all right anyway (late batches are short instead) (>= 0)"""

    def check_rollout(self):
        """ValueError (one line) for a reward spec the task cannot score (steps needs show_work)."""
        parse_reward_spec(self.rewards, self.show_work)

    def check_rollout_split(self, world_size: int):
        """Prompts are global and split evenly across ranks."""
        if self.rl_batch_size % world_size != 0:
            raise ConfigError(f"rl_batch_size={self.rl_batch_size} is not divisible by the {world_size} processes; "
                              f"use a multiple of {world_size}")

    def rollout_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]: the refill rounds are dynamic sampling's."""
        return [(("dynamic_sampling_max_rounds",), not settings["dynamic_sampling"],
                 "belongs to dynamic sampling (dynamic_sampling=true, as rl_algorithm=dapo has it)")]


@dataclass
class Rollout:
    """Answers sampled on one rank; rows i*G ... i*G+G-1 answer the same problem."""
    prompts: torch.Tensor  # (N, prompt_len)
    solutions: torch.Tensor  # (N, A) the right answer's tokens
    generated: torch.Tensor  # (N, A)
    logp: torch.Tensor  # (N, A) log-prob of each token under the distribution it was drawn from
    entropy: torch.Tensor  # (N, A) entropy of that distribution
    rewards: Optional[torch.Tensor] = None  # (N,) the weighted sum of the rule rewards
    components: dict = field(default_factory=dict)  # reward name -> (N,)
    keys: Optional[torch.Tensor] = None  # (N,) int64, the problem's pair key (rl/problem_sampler.py)
    pos: Optional[torch.Tensor] = None  # (N, prompt_len + A) position ids it was sampled at; None: the model's own

    def __len__(self) -> int:
        return len(self.generated)

    @property
    def sequences(self) -> torch.Tensor:
        """(N, prompt_len + A) prompt and answer, as the policy reads them."""
        return torch.cat([self.prompts, self.generated], dim=1)

    def mask(self, end_token: int) -> torch.Tensor:
        """(N, A) the answer tokens the policy chose, up to and including its end token."""
        return answer_mask(self.generated, end_token)

    def select(self, index) -> "Rollout":
        """Rows `index` (bool mask, indices or a slice) of every tensor."""
        return Rollout(self.prompts[index], self.solutions[index], self.generated[index], self.logp[index],
                       self.entropy[index], self.rewards[index], {k: v[index] for k, v in self.components.items()},
                       None if self.keys is None else self.keys[index], None if self.pos is None else self.pos[index])

    @staticmethod
    def cat(parts: list) -> "Rollout":
        cat = lambda name: torch.cat([getattr(p, name) for p in parts])
        return Rollout(cat("prompts"), cat("solutions"), cat("generated"), cat("logp"), cat("entropy"), cat("rewards"),
                       {k: torch.cat([p.components[k] for p in parts]) for k in parts[0].components},
                       None if parts[0].keys is None else cat("keys"), None if parts[0].pos is None else cat("pos"))


@dataclass
class RolloutStats:
    """What one rank's sampling did in one step, over all its rounds."""
    rounds: int = 0
    answers: int = 0  # answers generated
    rollout_seconds: float = 0.0  # generating
    reward_seconds: float = 0.0  # scoring
    drawn: int = 0  # problems drawn
    selected: int = 0  # of them, chosen by the problem sampler's state (buffer or priority)
    estimate_sum: float = 0.0  # sum of the sampler's pass-rate estimates of the drawn problems that have one
    estimated: int = 0  # how many drawn problems have one
    keys: list = field(default_factory=list)  # per round, (groups,) int64 pair keys
    successes: list = field(default_factory=list)  # per round, (groups,) answers exactly right of G
    informative: list = field(default_factory=list)  # per round, (groups,) bool: its rewards are not all equal
    pairs: list = field(default_factory=list)  # per round, (groups, 2, W) uint8 operand digits (if read: reads_pairs)
    nonfinite: int = 0  # answers sampled from non-finite logits (weights that overflowed): noise, not the policy

    def outcomes(self):
        """(keys, successes, pairs) of every group of every round: int64 tensors (K,), and the operands' digits
        (K, 2, W) uint8 where the problem sampler reads them (replay of many lengths: its keys are not invertible),
        else None."""
        if not self.keys:
            return torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), None
        return (torch.from_numpy(np.concatenate(self.keys)),
                torch.from_numpy(np.concatenate(self.successes)).to(torch.int64),
                torch.from_numpy(np.concatenate(self.pairs)) if self.pairs else None)


def refill_size(num_wanted: int, num_sampled: int, num_kept: int, max_prompts: int) -> int:
    """Problems to draw in the next refill round: as many as the share kept so far says are needed
    for the missing groups, plus 25%, at most max_prompts; max_prompts when none was kept yet.
    Late in a run most groups are all right, so a step takes a few large rounds, not many small."""
    if num_kept == 0:
        return max_prompts
    return min(math.ceil(1.25 * (num_wanted - num_kept) * num_sampled / num_kept), max_prompts)


class RolloutCollector:
    """Draws problems, samples and scores answers, and refills dynamic sampling's dropped groups."""

    def __init__(self, config, env, model: torch.nn.Module, reward_weights: dict, problem_sampler, info, *,
                 keep_only_right: bool = False):
        """model: the plain (unwrapped) policy, which samples; problem_sampler: rl/problem_sampler.py;
        keep_only_right: the batch keeps only exactly right answers (the objective says: rft's)."""
        self.config, self.env, self.model, self.info = config, env, model, info
        self.reward_weights, self.problem_sampler = reward_weights, problem_sampler
        self.keep_only_right = keep_only_right

    @torch.no_grad()
    def sample_round(self, num_prompts: int, rngs: tuple, generator, stats: RolloutStats,
                     positions_rng=None) -> Rollout:
        """G scored answers to each of num_prompts problems the problem sampler draws, none drawn
        before in this step's rounds, at the position ids the environment gives (offsets from positions_rng)."""
        c, env, G = self.config, self.env, self.config.rl_rollout_size
        exclude = np.concatenate(stats.keys) if stats.keys else np.zeros(0, dtype=np.int64)
        a, b, selected, estimates = self.problem_sampler.draw(num_prompts, *rngs, exclude)
        to_device = lambda t: t.to(self.info.device, non_blocking=True)  # host-made: a copy, not a sync, on CUDA
        prompts, solutions = (to_device(t) for t in env.encode(a, b))
        pos = env.position_ids(num_prompts, positions_rng)  # None (draws nothing) for today's tasks
        pos = None if pos is None else to_device(pos)
        t0 = dist.clock(self.info.device)
        generated, logp, entropy, nonfinite = self.model.generate(
            prompts, env.answer_len, temperature=c.rl_temperature, end_token=env.end_token, pad_token=env.pad_token,
            generator=generator, num_samples=G, with_stats=True, with_nonfinite=True, pos=pos,
            share_prompts=c.prefix_sharing)
        t1 = dist.clock(self.info.device)
        keys = pair_keys(env, a, b)
        # (clone: an inference-mode tensor may not enter autograd)
        # (repeat_rows: repeat_interleave's values, without the output-size computation that may sync a CUDA device)
        rollout = Rollout(repeat_rows(prompts, G), repeat_rows(solutions, G), generated.clone(),
                          logp.clone(), entropy.clone(),
                          keys=to_device(torch.from_numpy(keys).repeat_interleave(G)),
                          pos=None if pos is None else repeat_rows(pos, G))
        rollout.rewards, rollout.components = compute_rewards(self.reward_weights, env, rollout.solutions,
                                                              rollout.generated)
        right = exact_match(env, rollout.solutions, rollout.generated).view(-1, G).sum(dim=1)
        # All the host needs of this round, read from the device at once (one host sync a round on CUDA): each
        # group's answers right (the problem sampler's), whether its rewards differ (dynamic sampling keeps it),
        # and how many answers met non-finite logits.
        parts = (right.round(), ~group_all_equal(rollout.rewards, G), nonfinite.sum().view(1))
        host = torch.cat([t.to(torch.int64) for t in parts]).cpu().numpy()
        stats.keys.append(keys)
        if self.problem_sampler.reads_pairs:  # digit arrays of one width (the step's): gathered across ranks as is
            stats.pairs.append(np.stack([a, b], axis=1))
        stats.successes.append(host[:num_prompts])
        stats.informative.append(host[num_prompts:-1].astype(bool))
        stats.rollout_seconds += t1 - t0
        stats.reward_seconds += dist.clock(self.info.device) - t1
        stats.rounds += 1
        stats.answers += len(rollout)
        stats.nonfinite += int(host[-1])
        stats.drawn += num_prompts
        stats.selected += int(selected.sum())
        stats.estimated += int(np.isfinite(estimates).sum())
        stats.estimate_sum += float(np.nansum(estimates))
        return rollout

    def collect(self, step: int, num_prompts: int):
        """This rank's answers for `step`: the first round (what the metrics describe), the batch the
        update trains on, and the RolloutStats (see the module docstring)."""
        c, G, info = self.config, self.config.rl_rollout_size, self.info
        rngs = (seeding.numpy_rng(c.seed, info.rank, step, seeding.PROBLEMS),
                seeding.numpy_rng(c.seed, info.rank, step, seeding.SELECTION))
        sampling = seeding.torch_generator(c.seed, info.rank, step, seeding.SAMPLING, info.device)
        positions = seeding.numpy_rng(c.seed, info.rank, step, seeding.POSITIONS)  # a stream of its own: none shifts
        # every round of the step at one width (many lengths only), drawn by the task or the length curriculum
        seeding.set_step_width(self.env, c.seed, step, weights=self.problem_sampler.width_weights())
        stats = RolloutStats()
        first = batch = self.sample_round(num_prompts, rngs, sampling, stats, positions)
        if c.dynamic_sampling:
            kept, num_sampled, num_kept = [], 0, 0
            while True:
                informative = stats.informative[-1]  # (groups,) bool, on the host: this round's groups to keep
                rows = torch.from_numpy(np.flatnonzero(np.repeat(informative, G)))
                kept.append(batch.select(rows.to(info.device, non_blocking=True)))
                num_sampled, num_kept = num_sampled + len(informative), num_kept + int(informative.sum())
                # a round that met non-finite logits ends the refills: the trainer skips this step anyway
                if num_kept >= num_prompts or stats.rounds > c.dynamic_sampling_max_rounds or stats.nonfinite:
                    break
                size = refill_size(num_prompts, num_sampled, num_kept, max_prompts=4 * num_prompts)
                batch = self.sample_round(size, rngs, sampling, stats, positions)
            batch = Rollout.cat(kept).select(slice(0, num_prompts * G))
        if self.keep_only_right:  # (indices: one read of the device, not one per tensor a boolean mask selects)
            batch = batch.select(torch.nonzero(exact_match(self.env, batch.solutions, batch.generated) == 1).squeeze(1))
        return first, batch, stats
