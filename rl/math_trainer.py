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

The numerical guard covers the whole step: the step takes no update, and counts in
train/skipped_steps (max_bad_steps in a row raise TrainingError), when the loss or a gradient norm
is not finite on any rank (rl/update.py), or when sampling met non-finite logits on any rank
(weights finite but so large that the logits overflow: generate replaces them and says so). A
step of broken sampling updates nothing at all: its answers came from stand-in logits, not from
the policy, so neither the baseline nor the problem sampler learns from their rewards (a pass
rate of noise would steer prioritized and replay selection), and it forwards nothing.

The policy samples and is updated in eval mode (dropout, if any, belongs to the warm start), so
the update's log-probs are exactly those of the policy that sampled.

The trainer never parses digits: the environment encodes problems and targets as tokens, rewards
compare token tensors.
"""

import copy
import math

import torch

from configs.base import BaseRLConfig
from model.gpt import GPT, GPTConfig, autocast_dtype_for
from rl import dist
from rl.algorithms import (KL_PLACEMENT, READS_BATCH_STATISTICS, compute_kl, group_all_equal, kl_reward_penalty,
                           masked, policy_logprobs, update_baseline)
from rl.errors import TrainingError  # (re-exported: from rl.math_trainer import TrainingError keeps working)
from rl.evaluate import EvalResult, evaluate
from rl.math_env import MathEnvironment
from rl.math_reward import exact_match, parse_reward_spec
from rl.objectives import make_objective
from rl.problem_sampler import make_problem_sampler
from rl.rollout import Rollout, RolloutCollector, RolloutStats
from rl.update import Learner, Updater, graphs_apply, schedule

POLICY_KEYS = ("model", "optimizer", "scheduler")  # the policy's names in a snapshot
# what the update sums for every objective, beside the objective's own `sums`, for the metrics
UPDATE_SUMS = ("policy_loss", "kl_loss", "entropy_loss", "clip_low", "clip_high", "ratio_sum", "tokens", "forwarded",
               "rows")


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    ref = copy.deepcopy(model).eval()  # a copy: the policy moves on, the reference stays where it was
    for p in ref.parameters():
        p.requires_grad_(False)  # no graph is built through it, and nothing can train it by mistake
    return ref


def perf_metrics(answers: float, sampled: RolloutStats, seconds: dict) -> dict:
    """Answers per second and each stage's share of this rank's step (stage clocks sync the device: rl/dist.py)."""
    stages = {"rollout": sampled.rollout_seconds, "reward": sampled.reward_seconds, "update": seconds["update"]}
    shares = {f"perf/{k}_share": v / seconds["step"] for k, v in stages.items()}
    # the rest: advantages, the reference's log-probs, the guard's agreement over ranks
    return {"perf/samples_per_second": answers / seconds["step"],  # all ranks' answers, sampled in this time
            "perf/step_seconds": seconds["step"], **shares, "perf/other_share": 1.0 - sum(shares.values())}


class MathRLTrainer:
    def __init__(self, config: BaseRLConfig, env: MathEnvironment, policy: torch.nn.Module, info: dist.DistInfo, *,
                 sft_env=None, eval_envs: dict = None):
        """policy: the GPT, already DDP-wrapped when there is more than one process; env: RL's problems; sft_env:
        the warm start's (None: env's); eval_envs: {length: environment} evaluated (None: {None: env}, env alone)."""
        self.config, self.env, self.policy, self.info = config, env, policy, info
        self.sft_env, self.eval_envs = sft_env or env, eval_envs or {None: env}
        self.model = dist.unwrap(policy)  # samples and is saved; only the update's forward goes through DDP
        self.actor = Learner.build(self.model, policy, config, config.learning_rate)  # the policy, trained
        self.objective = make_objective(config, env, info)  # stages 3-4: rl/objectives.py
        self.updater = Updater(config, info, env.answer_len, env.pad_token, graphed=graphs_apply(config, env, info),
                               prompt_len=env.prompt_len)
        self.reward_weights = parse_reward_spec(config.rewards, env.show_work)
        self.local_prompts = config.rl_batch_size // info.world_size  # exact: validate_world_size saw to it
        self.kl_placement = KL_PLACEMENT[config.kl_estimator] if config.kl_coef > 0 else None
        # the frozen policy RL starts from, kept only when a KL term or DPO needs it
        self.needs_reference = self.kl_placement is not None or self.objective.needs_reference
        self.ref_model = None  # made on the first step: the warm start (or init_from) is loaded after this
        self.problem_sampler = make_problem_sampler(config, env)  # which training problems a step draws
        self.rollouts = RolloutCollector(config, env, self.model, self.reward_weights, self.problem_sampler, info,
                                         keep_only_right=self.objective.keep_only_right)
        self.baseline = None  # None until the first step; then a float, identical on every rank
        self.step = 0  # RL steps taken
        self.bad_steps_in_a_row = 0  # RL steps in a row with an update skipped for non-finite numbers
        self.num_skipped_steps = 0
        self._eval_sets = {}  # (split, length) -> operands, drawn once: every evaluation scores the same problems
        self.evals_at_target = 0  # evaluations in a row with validation accuracy >= rl_target_accuracy
        # how the policy runs (model/gpt.py): the same for sampling, update, evaluation, reference and critic
        self.model.configure_runtime(autocast_dtype=autocast_dtype_for(config.precision, info.device.type),
                                     cuda_graphs=config.cuda_graphs, matmul_attention=config.matmul_attention,
                                     compile=config.compile)

    @classmethod
    def build(cls, config: BaseRLConfig, info: dist.DistInfo = None) -> "MathRLTrainer":
        """Environment, model (seeded, DDP-wrapped for several processes) and trainer, as the entry
        script builds them: one recipe for the scripts and the tests."""
        info = info or dist.DistInfo()
        torch.manual_seed(config.seed)  # identical initial weights on every rank
        model = GPT(GPTConfig(**config.model_args())).to(info.device)
        policy = dist.wrap(model, info)
        envs = config.environments()  # one MathEnvironment for all phases, or one per phase and evaluated length
        return cls(config, envs["rl"], policy, info, sft_env=envs["sft"], eval_envs=envs["eval"])

    @property
    def learners(self) -> list:
        """Every network the update trains, the policy first (the critic, if any, after it)."""
        return [self.actor, *self.objective.learners]

    def start_models(self):
        """On the first step, the models that start from the policy as RL found it: the frozen
        reference (KL, DPO) and the objective's (ppo_critic's critic). A resumed run loads them instead."""
        if self.needs_reference and self.ref_model is None:
            self.ref_model = frozen_copy(self.model)
        self.objective.start(self.model)

    # ---- one step ---------------------------------------------------------------------------
    def train_step(self) -> dict:
        """One RL step, the stages of the module docstring; returns its metrics, reduced over ranks."""
        t0 = dist.clock(self.info.device)  # every stage boundary syncs a CUDA device (rl/dist.py): honest shares
        self.model.eval()  # no dropout: the update's log-probs are the sampler's
        self.start_models()
        first, batch, sampled = self.sample(self.step)  # 1-2. draw problems, sample and score answers
        # the guard on sampling (module docstring), agreed once a step: answers drawn from non-finite
        # logits on any rank are noise, not the policy's, and nothing learns from them
        broken = dist.any_rank(sampled.nonfinite > 0, self.info.device)
        if not broken:
            self.observe_outcomes(sampled)  # every rank's groups teach the problem sampler, identically
        targets, stats = self.advantages(first, batch)  # 3. the objective's targets
        t_update = dist.clock(self.info.device)
        # 4. the objective's loss, every learner's optimizer steps
        update = self.updater.no_step(self.learners, skipped=True) if broken else self.update(batch, targets)
        t_end = dist.clock(self.info.device)
        seconds = dict(update=t_end - t_update, step=t_end - t0)
        s = self.step_sums(first, batch, stats, update, sampled)  # 5. the step's one read for its metrics...
        self.move_baseline(stats, s, learn=not broken)  # ...its reward statistics (unless the advantages read them)...
        self.finish_step(s["skipped"] > 0, broken)  # ...and the guard's skips; the metrics report the step taken
        return self.metrics(s, stats, update, sampled, seconds)

    # ---- 1-2. sample and score (rl/rollout.py) ------------------------------------------------
    def sample(self, step: int):
        """This rank's first sampling round, the batch the update trains on, and the RolloutStats."""
        return self.rollouts.collect(step, self.local_prompts)

    def observe_outcomes(self, stats: RolloutStats):
        """Every rank's groups of this step, in rank order, into the problem sampler: every rank
        then holds the same selection state."""
        # gathered before any rank updates: a state built from one rank's groups would differ per rank; one
        # process's own groups are already on the host
        gather = (lambda t: dist.all_gather_rows(t.to(self.info.device)).cpu()) if self.info.distributed else None
        keys, successes, pairs = (None if t is None else (gather(t) if gather else t).numpy() for t in stats.outcomes())
        self.problem_sampler.observe(keys, successes, self.config.rl_rollout_size, pairs)

    # ---- 3. advantages ----------------------------------------------------------------------
    def advantages(self, first: Rollout, batch: Rollout):
        """What the objective's loss needs of the batch's rewards (PolicyTargets or Pairs: see
        rl/objectives.py), with the baseline from before this step; and what the metrics report. The reward
        statistics over all ranks are read now only where the advantages need them (reads_reward_statistics),
        else with the metrics (step_sums): one host sync less a step."""
        rewards, stats = batch.rewards, {}
        if self.kl_placement == "reward":  # k1: the KL to the reference is a penalty on the reward
            rewards, stats = self.kl_penalised_rewards(batch)
        sums = self.reward_sums(first, rewards)
        if self.reads_reward_statistics():
            stats.update(self.reward_statistics(dist.reduce_sums(sums, self.info.device)))
        else:  # summed over ranks and read with the metrics (move_baseline); the baseline is the step before's
            stats.update(reward_sums=sums, baseline_used=self.baseline)  # (None on a first step, until that read)
        return self.objective.targets(batch, rewards, stats), stats

    def reads_reward_statistics(self) -> bool:
        """Whether this step's advantages need the reward statistics of all ranks before the update: batch_zscore's
        mean and std, and the baseline's start (the first step's advantages are centred on its own mean reward)."""
        mode = self.config.advantage_mode
        return mode in READS_BATCH_STATISTICS or (mode == "baseline" and self.baseline is None)

    @staticmethod
    def reward_sums(first: Rollout, rewards: torch.Tensor) -> dict:
        """This rank's sums of the first round's rewards (what the baseline follows) and of the batch's (what
        batch_zscore normalises by), summed over ranks by reduce_sums: tensors, so nothing is read yet."""
        # sums and sums of squares, not per-rank means: dynamic sampling and rft leave ranks batches of
        # different sizes, and a mean of means would weigh a small one like a full one
        return {"rewards.first_sum": first.rewards.sum(), "rewards.first_sq": (first.rewards ** 2).sum(),
                "rewards.first_n": len(first), "rewards.sum": rewards.sum(), "rewards.sq": (rewards ** 2).sum(),
                "rewards.n": len(rewards)}

    def reward_statistics(self, s: dict) -> dict:
        """Mean and spread of the first round's rewards and of the batch's, from reward_sums summed over ranks, and
        the baseline the advantages use: the one from before this step, or on the first step its mean reward."""
        first_n, n = s["rewards.first_n"], s["rewards.n"]
        # first_n is never 0 (every rank samples a first round) but the batch can be empty everywhere
        # (say rft with nothing right); batch_std is unbiased (n - 1), as torch.std is on one rank's batch
        mean, batch_mean = s["rewards.first_sum"] / first_n, s["rewards.sum"] / max(n, 1.0)
        return dict(mean_reward=mean, first_n=first_n, batch_mean=batch_mean,
                    batch_std=math.sqrt(max(s["rewards.sq"] - n * batch_mean ** 2, 0.0) / max(n - 1, 1.0)),
                    reward_std=math.sqrt(max(s["rewards.first_sq"] / first_n - mean ** 2, 0.0)),
                    baseline_used=mean if self.baseline is None else self.baseline)

    def move_baseline(self, stats: dict, s: dict, learn: bool):
        """The reward statistics from the step's sums s, where the advantages did not read them first; then the
        baseline follows this step's mean reward (unless learn=False: the step learnt nothing)."""
        if "mean_reward" not in stats:
            stats.update(self.reward_statistics(s))
        if learn:  # every objective reports it
            self.baseline = update_baseline(stats["baseline_used"], stats["mean_reward"], self.config.baseline_momentum)

    @torch.no_grad()
    def kl_penalised_rewards(self, batch: Rollout):
        """r - kl_coef * sum_t (log pi - log pi_ref) over each answer (kl_estimator=k1: the KL in the
        reward), and the KL's per-token sums for the metrics."""
        c, mask = self.config, batch.mask(self.env.end_token)
        logp, ref_logp = (policy_logprobs(m, batch.sequences, batch.generated, self.env.prompt_len, c.rl_temperature,
                                          c.rl_ga_steps, pos=batch.pos, group_size=c.shared_group_size)
                          for m in (self.model, self.ref_model))
        penalty = kl_reward_penalty(logp, ref_logp, mask)
        kl = masked(compute_kl(logp, ref_logp, "k3"), mask).sum()  # train/kl is k3's value, whatever shapes the reward
        # not in place: `first` may be this very rollout, and the metrics and the baseline read its raw rewards
        return batch.rewards - c.kl_coef * penalty, {"kl_sum": kl, "kl_tokens": mask.sum()}  # read with the metrics

    # ---- 4. update (rl/update.py, the loss from rl/objectives.py) -----------------------------
    def update(self, batch: Rollout, targets) -> dict:
        """ppo_epochs passes of ppo_minibatches optimizer steps of every learner over the rows the
        objective trains on (a single step for the on-policy algorithms); returns the statistics
        summed over micro-batches and steps."""
        data = self.objective.update_batch(batch, targets, self.ref_model)
        loss_fn = lambda part, norm: self.objective.loss(self.policy, part, norm)  # DDP's: its backward syncs
        return self.updater.run(self.learners, data, loss_fn, self.step, skip_zero=self.objective.skip_zero)

    def finish_step(self, skipped: bool, broken_sampling: bool = False):
        """Count the step; skipped: it took no update (broken_sampling: because its sampling met
        non-finite logits, which the message of the max_bad_steps-th skip in a row then names)."""
        schedule(self.learners)  # the schedule follows RL steps, skipped or not
        self.step += 1
        self.bad_steps_in_a_row = self.bad_steps_in_a_row + 1 if skipped else 0  # only skips in a row stop a run
        self.num_skipped_steps += int(skipped)
        if self.bad_steps_in_a_row < self.config.max_bad_steps:  # both flags agree on every rank: all raise
            return
        if broken_sampling:
            raise TrainingError(f"non-finite logits while sampling ({self.bad_steps_in_a_row} steps in a row skipped, "
                                f"up to step {self.step}): the policy's weights have overflowed; lower learning_rate, "
                                f"keep grad_clip on, or check the file init_from loaded")
        raise TrainingError(f"non-finite loss or gradient norm for {self.bad_steps_in_a_row} steps in a row "
                            f"(up to step {self.step}); lower learning_rate, keep grad_clip on, "
                            f"or check the rewards")

    # ---- 5. metrics ---------------------------------------------------------------------------
    def step_sums(self, first: Rollout, batch: Rollout, stats: dict, update: dict, sampled: RolloutStats) -> dict:
        """What the step's metrics are made of, summed over ranks by name: one all-reduce and one read of the device
        (the update's statistics are still there), the guard's skipped optimizer steps among them."""
        G, env = self.config.rl_rollout_size, self.env
        first_mask = first.mask(env.end_token)
        # This rank's sums: one all-reduce below, and every share is taken of the sums (a mean of
        # per-rank shares would weigh a rank whose dynamic sampling kept little like a full one).
        local = {"exact": exact_match(env, first.solutions, first.generated).sum(),
                 "groups_equal": group_all_equal(first.rewards, G).sum(), "groups": len(first) // G,
                 "answer_tokens": first_mask.sum(), "entropy": masked(first.entropy, first_mask).sum(),
                 "informative": stats["informative"], "batch": len(batch), "rounds": sampled.rounds,
                 "answers": sampled.answers, "drawn": sampled.drawn, "selected": sampled.selected,
                 "estimate_sum": sampled.estimate_sum, "estimated": sampled.estimated,
                 **self.kl_measured(stats, update), **stats.get("reward_sums", {}),
                 **{k: update[k] for k in UPDATE_SUMS}, **self.objective.local_sums(stats, update),
                 **{f"reward/{k}": v.sum() for k, v in first.components.items()},
                 # every rank holds the same gradients, so the same norm: rank 0's alone is summed
                 "grad_norm": update["grad_norm"] if self.info.rank == 0 else 0.0, "skipped": update["skipped"]}
        return dist.reduce_sums(local, self.info.device)

    def metrics(self, s: dict, stats: dict, update: dict, sampled: RolloutStats, seconds: dict) -> dict:
        """The step's metrics (docs/configuration.md "Metrics" says what each means) from its sums (step_sums)."""
        # per first-round answer (what the policy does, refills excluded), per optimizer step
        n, steps, step_seconds = stats["first_n"], max(update["optimizer_steps"], 1.0), seconds["step"]
        tokens = max(s["tokens"], 1.0)  # 0 when the update trained on nothing (no row kept, no pair formed)
        metrics = {
            "train/step": self.step,
            "train/policy_loss": s["policy_loss"] / steps,
            "train/kl_loss": s["kl_loss"] / steps,
            "train/entropy_loss": s["entropy_loss"] / steps,
            "train/accuracy": s["exact"] / n,
            "train/avg_reward": stats["mean_reward"],
            "train/reward_std": stats["reward_std"],
            # already moved by this step (NaN until a step sets it); advantage_baseline is the one it used
            "train/baseline": self.baseline if self.baseline is not None else math.nan,
            "train/advantage_baseline": stats["baseline_used"],
            "train/lr": update["lr"],  # the lr this step's update used, read before the schedule moved it
            "train/entropy": s["entropy"] / max(s["answer_tokens"], 1.0),
            "train/kl": s["kl_sum"] / max(s["kl_tokens"], 1.0) if self.kl_placement else 0.0,
            "train/clip_low_frac": s["clip_low"] / tokens,
            "train/clip_high_frac": s["clip_high"] / tokens,
            "train/ratio_mean": s["ratio_sum"] / tokens,
            "train/grad_norm": s["grad_norm"] / steps,
            "train/answer_tokens": s["answer_tokens"] / n,
            "train/groups_all_equal": s["groups_equal"] / s["groups"],
            "train/batch_answers": s["batch"],
            "train/informative_share": s["informative"] / max(s["batch"], 1.0),
            "train/skipped_share": 1.0 - s["forwarded"] / max(s["rows"], 1.0),
            "train/sampling_rounds": s["rounds"] / self.info.world_size,  # a mean: each rank samples its own rounds
            "train/answers_generated": s["answers"],
            "train/skipped_steps": self.num_skipped_steps,
            **perf_metrics(s["answers"], sampled, seconds),
        }
        if self.config.problem_sampler != "uniform":
            metrics["select/selected_share"] = s["selected"] / max(s["drawn"], 1.0)
            if s["estimated"]:  # (none on a first step of replay, whose buffer is still empty)
                metrics["select/drawn_pass_rate"] = s["estimate_sum"] / s["estimated"]
            metrics.update(self.problem_sampler.metrics())
        metrics.update(self.objective.metrics(s, stats, steps))
        metrics.update({k: v / n for k, v in s.items() if k.startswith("reward/")})
        return metrics

    def kl_measured(self, adv_stats: dict, update: dict) -> dict:
        """Sum and count of the per-token KL estimate (k3) to the reference, wherever it was measured:
        on the whole batch for a KL in the reward, on the trained tokens for a KL in the loss."""
        source = adv_stats if self.kl_placement == "reward" else {"kl_sum": update["kl_sum"],
                                                                  "kl_tokens": update["tokens"]}
        return {"kl_sum": source.get("kl_sum", 0.0), "kl_tokens": source.get("kl_tokens", 0.0)}

    # ---- evaluation ---------------------------------------------------------------------------
    def observe_validation(self, accuracy: float) -> bool:
        """Count an evaluation towards rl_target_accuracy's rule (reached, or the count starts over); True
        when the rule is now met."""
        target = self.config.rl_target_accuracy
        self.evals_at_target = self.evals_at_target + 1 if target > 0 and accuracy >= target else 0
        return self.target_held()

    def target_held(self) -> bool:
        """Validation has held rl_target_accuracy for rl_target_evals evaluations in a row: RL is done."""
        return self.config.rl_target_accuracy > 0 and self.evals_at_target >= self.config.rl_target_evals

    def eval_set(self, split: str, length=None):
        """The fixed evaluation set of `split` at an evaluated length (None: the only environment evaluated)."""
        if (split, length) not in self._eval_sets:
            self._eval_sets[split, length] = self.eval_envs[length].eval_operands(self.config.num_eval, split)
        return self._eval_sets[split, length]

    def accuracy(self, split: str = "test") -> EvalResult:
        """Greedy final-answer accuracy on the fixed evaluation set of `split` (test for reporting,
        validation for choosing); with eval_ndigits, on each length's own set, and their mean."""
        c = self.config
        results = {length: evaluate(self.policy, env, *self.eval_set(split, length), self.info,
                                    batch_size=c.eval_batch_size, num_mistakes=c.num_mistakes, split=split)
                   for length, env in self.eval_envs.items()}
        return results[None] if None in results else EvalResult.mean_over_lengths(results)

    # ---- full state -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs; random streams are derived from (seed, rank, step)
        (see rl/seeding.py), so `step` also restores every RNG."""
        c = self.config
        return {
            "kind": "rl_snapshot",  # --resume refuses anything else (a warm start goes to --init_from)
            **self.actor.state_dict(POLICY_KEYS),
            "baseline": self.baseline,
            "step": self.step,
            "bad_steps_in_a_row": self.bad_steps_in_a_row,
            "num_skipped_steps": self.num_skipped_steps,
            "evals_at_target": self.evals_at_target,
            "problem_sampler": self.problem_sampler.state_dict(),
            "config_name": c.name,
            "config": c.portable_dict(),
            "model_args": c.model_args(),  # so the snapshot rebuilds its own model (rl/snapshot.py)
            "task": c.task_args(),  # so a snapshot of another task is refused, not loaded
            **({"ref_model": self.ref_model.state_dict()} if self.ref_model is not None else {}),
            **self.objective.state_dict(),  # the critic, for ppo_critic
        }

    def load_state_dict(self, snap: dict):
        self.actor.load_state_dict(snap, POLICY_KEYS)
        self.baseline = snap["baseline"]
        self.step = snap["step"]
        self.bad_steps_in_a_row = snap["bad_steps_in_a_row"]
        self.num_skipped_steps = snap["num_skipped_steps"]
        self.evals_at_target = snap.get("evals_at_target", 0)  # (a snapshot older than the rule has none)
        self.problem_sampler.load_state_dict(snap["problem_sampler"])
        if "ref_model" in snap:
            # the policy's shape, then the saved weights: the reference is where RL started, not the policy now
            self.ref_model = frozen_copy(self.model)
            self.ref_model.load_state_dict(snap["ref_model"])
        self.objective.load_state_dict(snap, self.model)

    def weights_are_finite(self) -> bool:
        return all(learner.is_finite() for learner in self.learners)
