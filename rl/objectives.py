"""What the update optimises: one class per objective, chosen once by `make_objective`.

Each objective answers the same four questions of a step, and the trainer asks nothing else:
  targets(batch, rewards, stats)     stage 3: what the loss needs of the rewards, typed
                                     (`PolicyTargets` or `Pairs`), and the count of informative rows
  update_batch(batch, targets, ref)  the rows the update trains on (rl/update.py's UpdateBatch)
  loss(part, norm)                   stage 4: one micro-batch's loss and the statistics it sums
  metrics(s, stats, steps)           what only this objective has to report
plus `learners`, the networks it trains beside the policy (the critic), and their state.

  objective        class               stage 3                          stage 4
  policy_gradient  PolicyGradient      advantages (advantage_mode)      clipped policy loss, KL, entropy
  (gae)            ActorCritic         GAE from a learned critic        ... plus the clipped value loss
  (token_zscore)   TokenCredit         each token's correctness on the  the clipped policy loss, per token
                                       solution's path, z-scored per place
  rft              RejectionSampling   every kept (right) answer: 1     the policy loss with A = 1
  dpo              Preference          pairs (chosen, rejected)         the DPO loss against the reference

Adding one: a class here with these methods, its entry in `OBJECTIVES` (the one list of objectives), and a
row of rl/algorithms.py's `ALGORITHMS` table (docs/algorithms.md "Adding an algorithm").

ObjectiveSettings: the settings of what the update optimises (rl_algorithm, its row, each objective's own),
the fix for one the chosen objective would ignore, and the rows a step's minibatches split.
"""

from dataclasses import dataclass
from typing import Optional

import torch

from model.gpt import Critic, PromptGroups
from rl import dist
from rl.algorithms import (ALGORITHM_FIELDS, KL_PLACEMENT, aggregate, answer_logits, compute_advantages,
                           compute_entropy, compute_gae, compute_kl, compute_policy_loss, compute_value_loss, dpo_loss,
                           explained_variance, masked, policy_logprobs, preference_pairs, resolve, sequence_logprobs,
                           token_group_zscore, token_logprobs, token_rewards, whiten)
from rl.errors import ConfigError
from rl.rollout import Rollout
from rl.update import Learner, UpdateBatch

CRITIC_KEYS = ("critic", "critic_optimizer", "critic_scheduler")  # the critic's names in a snapshot


def critic_values(critic, sequences: torch.Tensor, pos, prompt_len: int, groups: PromptGroups = None) -> torch.Tensor:
    """V (N, A) of the state before each answer token: the critic over sequences[:, :-1] (N, P + A - 1), from the
    prompt's last token on (pos (N, P + A) or None: the model's own ids); groups: each prompt read once for its rows
    (a grouped pass, prefix_sharing)."""
    values = critic(sequences[:, :-1], pos=None if pos is None else pos[:, :-1], groups=groups)
    return values if groups is not None else values[:, prompt_len - 1:]


@dataclass
class PolicyTargets:
    """Stage 3 for the policy gradient: advantages (N,), or (N, A) per token from GAE; with a critic,
    returns (N, A) it regresses on and old_values (N, A), its values when the batch was scored."""
    advantages: torch.Tensor
    returns: Optional[torch.Tensor] = None
    old_values: Optional[torch.Tensor] = None


@dataclass
class Pairs:
    """Stage 3 for DPO: row indices of the batch, pair i is (chosen[i], rejected[i]), both (num_pairs,)."""
    chosen: torch.Tensor
    rejected: torch.Tensor


class PolicyGradient:
    """The policy-gradient family (reinforce, grpo, rloo, ppo, dapo): per-answer advantages from the
    rewards, the clipped policy loss, a KL term (k2/k3) and an entropy bonus when configured."""
    sums = ()  # statistics of its own that the update sums, beside the trainer's
    owned = ()  # config fields only this objective reads (refused with any other)
    owner = ""  # how a message names it
    unread = ()  # algorithm-row settings it never reads (the resolved config still holds the row's values)
    needs_reference = False  # the frozen policy RL starts from (a KL term asks for it too)
    graphable = True  # rl_cuda_graphs can replay its optimizer steps: one learner, every statistic a tensor
    groups_rows = True  # its update's rows are the rollout's, G to a prompt in a row (prefix_sharing reads them so)
    keep_only_right = False  # rollouts drop every answer that is not exactly right

    def __init__(self, config, env, info: dist.DistInfo):
        self.config, self.env, self.info = config, env, info
        self.learners = []  # networks trained beside the policy
        # k2 and k3 are terms of this loss; k1 is a penalty on the reward, which the trainer applies in stage 3
        self.kl_in_loss = config.kl_coef > 0 and KL_PLACEMENT[config.kl_estimator] == "loss"
        # An answer with advantage exactly 0 adds nothing to the policy loss; unless a KL or entropy
        # term in the loss gives it a gradient of its own, it need not be forwarded.
        self.skip_zero = not self.kl_in_loss and config.entropy_coef == 0

    @staticmethod
    def ignored(config, settings: dict, given, changed) -> str:
        """The fix for a setting this objective would silently ignore, or "" (ObjectiveSettings asks before
        start). given(name): a row setting set explicitly; changed(name): off the preset's."""
        return ""

    def start(self, model: torch.nn.Module):
        """On the first RL step: the networks that start from the policy as RL found it (none here)."""

    def advantages(self, rewards: torch.Tensor, stats: dict) -> torch.Tensor:
        c = self.config
        # the baseline from before this step; the batch's mean and std over all ranks, so batch_zscore
        # scales every rank's rows alike (the trainer reads them first only for the modes that use them)
        return compute_advantages(rewards, c.rl_rollout_size, c.advantage_mode, baseline=stats.get("baseline_used"),
                                  batch_mean=stats.get("batch_mean"), batch_std=stats.get("batch_std"))

    def targets(self, batch: Rollout, rewards: torch.Tensor, stats: dict) -> PolicyTargets:
        targets = PolicyTargets(self.advantages(rewards, stats))
        stats["informative"] = (targets.advantages != 0).sum()  # (N,): one advantage per answer; read with the metrics
        return targets

    def update_batch(self, batch: Rollout, targets: PolicyTargets, ref_model) -> UpdateBatch:
        c, env = self.config, self.env
        data = UpdateBatch(batch.sequences, batch.generated, batch.mask(env.end_token), targets.advantages,
                           returns=targets.returns, old_values=targets.old_values, pos=batch.pos)
        if c.ppo_epochs * c.ppo_minibatches > 1:
            # A rollout that feeds several optimizer steps takes PPO ratios against the policy that
            # sampled it: the sampler's own log-probs, kept from generation, so no extra forward pass.
            data.old_logp = batch.logp
        if self.kl_in_loss:  # the reference is frozen: its log-probs once a step serve every epoch and minibatch
            data.ref_logp = policy_logprobs(ref_model, data.sequences, data.generated, env.prompt_len,
                                            c.rl_temperature, c.rl_ga_steps, pos=data.pos,
                                            group_size=c.shared_group_size)
        return data

    def loss(self, policy, part: UpdateBatch, norm: dict) -> dict:
        """The policy-gradient loss of one micro-batch (normalised by whole-minibatch counts), with the
        entropy and KL terms that apply, and its statistics."""
        c = self.config
        # (n, A, V) at the sampling temperature: the distribution the answers were drawn from
        logits = answer_logits(policy, part.sequences, self.env.prompt_len, c.rl_temperature, pos=part.pos,
                               groups=part.groups)
        logp = token_logprobs(logits, part.generated)
        # old_logp None (one update per rollout): the plain policy gradient; else PPO's clipped ratio,
        # -min(r A, clip(r, 1 - clip_low, 1 + clip_high) A) per token (Schulman et al. 2017, eq. 7); norm
        # holds the whole minibatch's counts over all ranks, so every rank's micro-batch losses add up to its loss
        policy_loss, stats = compute_policy_loss(logp, part.old_logp, part.advantages, part.mask, clip_low=c.clip_low,
                                                 clip_high=c.clip_high, aggregation=c.loss_aggregation, **norm)
        out = dict(policy_loss=policy_loss.detach(), **stats)  # a statistic; the graph goes on in `loss`
        loss = policy_loss
        if c.entropy_coef > 0:  # a bonus: the loss falls as the policy's entropy rises
            # of the tempered distribution the answers came from, aggregated as the policy loss is
            entropy = compute_entropy(logits, part.mask)
            out["entropy_loss"] = -c.entropy_coef * aggregate(entropy, part.mask, c.loss_aggregation, **norm)
            loss = loss + out["entropy_loss"]
        if part.ref_logp is not None:  # the KL term, with the estimator asked for
            # differentiated through logp: k2's gradient is that of KL(pi || pi_ref), k3's that of the
            # forward KL(pi_ref || pi) (rl/algorithms.py, KL_PLACEMENT)
            # (where the mask is empty, logp is the reference's: a masked token's log-ratio may be so large that
            # k3's exp overflows, and its gradient would be nan, not 0, though the mask zeroes its value)
            kl = compute_kl(torch.where(part.mask.bool(), logp, part.ref_logp), part.ref_logp, c.kl_estimator)
            out["kl_loss"] = c.kl_coef * aggregate(kl, part.mask, c.loss_aggregation, **norm)
            loss = loss + out["kl_loss"]
            # what train/kl reports is always k3, whichever estimator the loss uses
            out["kl_sum"] = masked(compute_kl(logp.detach(), part.ref_logp, "k3"), part.mask).sum()
        out.update(loss=loss, total=loss.detach())  # total: for the numerical guard, read with the gradient norms
        # only `loss` keeps its graph, for backward; the rest are statistics the updater sums (on the device)
        return {k: v.detach() if torch.is_tensor(v) and k != "loss" else v for k, v in out.items()}

    def local_sums(self, stats: dict, update: dict) -> dict:
        """This rank's counts for metrics(), summed over ranks by the trainer."""
        return {k: update[k] for k in self.sums}

    def metrics(self, s: dict, stats: dict, steps: float) -> dict:
        return {}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, snap: dict, model: torch.nn.Module):
        pass


class RejectionSampling(PolicyGradient):
    """objective=rft: rollouts keep only the answers that are exactly right (rl/rollout.py), and each
    has advantage 1: the policy loss is then their log-likelihood."""
    keep_only_right = True
    groups_rows = False  # only the right answers are kept: a prompt's rows are no longer G in a row
    unread = ("advantage_mode",)  # every right answer has advantage 1

    @staticmethod
    def ignored(config, settings: dict, given, changed) -> str:
        if config.kl_coef > 0 and KL_PLACEMENT[config.kl_estimator] == "reward":
            return ("kl_estimator=k1 puts the KL in the reward, which rft never reads (every right answer has "
                    "advantage 1); use kl_estimator=k2 or k3")
        if given("advantage_mode"):
            return "advantage_mode has no effect with objective=rft: every right answer has advantage 1; leave it unset"
        if given("loss_aggregation"):
            return ("loss_aggregation has no effect with objective=rft: every answer it trains on is exactly right, "
                    "so of full length, and all aggregations agree; leave it unset")
        if changed("rewards") and not settings["dynamic_sampling"]:
            return ("rewards have no effect with objective=rft: it keeps the answers that are exactly right; "
                    "leave rewards at its default")
        return ""

    def advantages(self, rewards: torch.Tensor, stats: dict) -> torch.Tensor:
        return torch.ones_like(rewards)


class TokenCredit(PolicyGradient):
    """advantage_mode=token_zscore: credit per token rather than per answer. Each answer token is right or
    wrong against the solution's token at its place (the problem has one right answer, worked steps and all);
    at each place the answers still on the solution's path are z-scored over the group, and an answer's tokens
    past its first wrong one get 0 (rl/algorithms.py token_group_zscore). The rule rewards still score the
    answers (the metrics, the baseline, and dynamic sampling's filter, which so drops a group whose answers are
    all wrong, even at different places); the update reads only the tokens. The signal supervised training has
    at every digit, learnt from the policy's own samples (measured on long sums: docs/results.md "Where RL's
    signal is")."""

    @staticmethod
    def ignored(config, settings: dict, given, changed) -> str:
        if changed("rewards") and not settings["dynamic_sampling"]:
            return ("rewards have no effect with advantage_mode=token_zscore: it credits each answer token against "
                    "the solution's; leave rewards at its default")
        if config.kl_coef > 0 and KL_PLACEMENT[config.kl_estimator] == "reward":
            return ("kl_estimator=k1 puts the KL in the reward, which advantage_mode=token_zscore never reads; "
                    "use kl_estimator=k2 or k3")
        return ""

    def targets(self, batch: Rollout, rewards: torch.Tensor, stats: dict) -> PolicyTargets:
        correct = (batch.generated == batch.solutions).float()  # (N, A)
        targets = PolicyTargets(token_group_zscore(correct, self.config.rl_rollout_size))
        stats["informative"] = (targets.advantages != 0).any(dim=1).sum()  # answers with a token to learn
        return targets


class ActorCritic(PolicyGradient):
    """advantage_mode=gae (ppo_critic): a critic, a second GPT with a scalar head started from the
    warm start, gives the value of every answer prefix; the reward sits on the answer's last token,
    advantages are GAE per token whitened over the batch, and the critic's clipped value loss joins
    the policy's in one backward, its own AdamW beside the policy's."""
    sums = ("value_loss", "value_clipped")
    owned = ("gamma", "gae_lambda", "value_clip", "critic_learning_rate")
    owner = "the critic (advantage_mode=gae, rl_algorithm=ppo_critic)"
    graphable = False  # two learners, two AdamWs

    def __init__(self, config, env, info: dist.DistInfo):
        super().__init__(config, env, info)
        self.skip_zero = False  # the value loss needs every answer, advantage 0 or not
        self.critic = None  # a Learner from the first step (or a snapshot) on

    def start(self, model: torch.nn.Module):
        if self.critic is None:  # a resumed run's critic came from its snapshot
            self.set_critic(Critic.from_policy(model))

    def set_critic(self, critic: Critic):
        self.critic = Learner.build(critic, dist.wrap(critic, self.info), self.config, self.config.critic_learning_rate)
        self.learners = [self.critic]

    @torch.no_grad()
    def targets(self, batch: Rollout, rewards: torch.Tensor, stats: dict) -> PolicyTargets:
        """Per-token advantages by GAE from the critic's values, whitened over the batch of all ranks,
        and the returns the critic regresses on; adds the critic's explained variance to stats."""
        c, P = self.config, self.env.prompt_len
        mask = batch.mask(self.env.end_token)
        # V of the state before each answer token (with prefix_sharing each prompt read once, as the update reads it)
        G = c.shared_group_size
        groups = PromptGroups.of_rows(torch.arange(len(batch.sequences)), G, P, self.info.device) if G else None
        values = critic_values(self.critic.module, batch.sequences, batch.pos, P, groups)
        # GAE (Schulman et al. 2016): delta_t = r_t + gamma V_{t+1} - V_t, A_t = delta_t + gamma lam A_{t+1}
        advantages, returns = compute_gae(token_rewards(rewards, mask), values, mask, c.gamma, c.gae_lambda)
        errors = masked(returns - values, mask)  # what the critic misses, for its explained variance
        # sums and squares over all ranks: advantages are whitened with the whole batch's mean and std
        # (Huang et al. 2024), the same on every rank whatever its share; in float64 on the device, nothing read
        tokens = mask.sum()
        n, sum_a, sum_a2 = dist.all_reduce_sum(torch.stack([t.to(torch.float64) for t in (
            tokens, advantages.sum(), (advantages ** 2).sum())]))
        n = n.clamp(min=1.0)
        mean, std = sum_a / n, torch.sqrt(torch.clamp(sum_a2 / n - (sum_a / n) ** 2, min=0.0))
        # the explained variance's sums are read with the metrics (local_sums)
        stats["explained"] = {"explained.n": tokens, "explained.sum_r": returns.sum(),
                              "explained.sum_r2": (returns ** 2).sum(), "explained.sum_e": errors.sum(),
                              "explained.sum_e2": (errors ** 2).sum()}
        advantages = whiten(advantages, mask, mean, std)
        stats["informative"] = (advantages != 0).any(dim=1).sum()
        return PolicyTargets(advantages, returns=returns, old_values=values)  # old: the clipped value loss's anchor

    def loss(self, policy, part: UpdateBatch, norm: dict) -> dict:
        out = super().loss(policy, part, norm)
        c = self.config
        # the critic's own loss: separate parameters, one backward with the policy's; forwarded through its
        # DDP wrapper here, which syncs its gradients (targets used the bare module: no gradient there)
        values = critic_values(self.critic.wrapped, part.sequences, part.pos, self.env.prompt_len, part.groups)
        # 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -value_clip, value_clip) - R)^2) per token (PPO's code)
        value_loss, value_stats = compute_value_loss(values, part.old_values, part.returns, part.mask,
                                                     clip=c.value_clip, aggregation=c.loss_aggregation, **norm)
        out.update(value_loss=value_loss.detach(), **value_stats)
        out["loss"] = out["loss"] + value_loss  # unweighted: it reaches only the critic, with its own AdamW and clip
        out["total"] = out["loss"].detach()  # the guard checks both losses
        return out

    def local_sums(self, stats: dict, update: dict) -> dict:
        return {**super().local_sums(stats, update), **stats["explained"]}

    def metrics(self, s: dict, stats: dict, steps: float) -> dict:
        explained = {k.removeprefix("explained."): v for k, v in s.items() if k.startswith("explained.")}
        return {"train/value_loss": s["value_loss"] / steps,
                "train/explained_variance": explained_variance(explained),
                "train/value_clip_frac": s["value_clipped"] / max(s["tokens"], 1.0)}

    def state_dict(self) -> dict:
        return self.critic.state_dict(CRITIC_KEYS) if self.critic is not None else {}

    def load_state_dict(self, snap: dict, model: torch.nn.Module):
        if CRITIC_KEYS[0] in snap:
            self.set_critic(Critic(model.config).to(self.info.device))
            self.critic.load_state_dict(snap, CRITIC_KEYS)


class Preference:
    """objective=dpo (online DPO): answers to the same prompt paired, higher reward chosen and lower
    rejected, and the DPO loss against the frozen policy RL started from."""
    sums = ("pairs", "preferred", "chosen_reward", "rejected_reward")
    owned = ("dpo_beta",)
    owner = "objective=dpo"
    unread = ("advantage_mode", "loss_aggregation", "clip_low", "clip_high")  # the DPO loss reads pairs
    skip_zero = False  # a pair has no advantage to test
    groups_rows = False  # a row is a pair of answers
    needs_reference = True  # the DPO loss is measured against the policy RL started from
    keep_only_right = False
    graphable = False  # its pairs are formed on the host, and its loss reads their count as a number

    def __init__(self, config, env, info: dist.DistInfo):
        self.config, self.env, self.info = config, env, info
        self.learners = []

    @staticmethod
    def ignored(config, settings: dict, given, changed) -> str:
        if config.kl_coef > 0:
            return "kl_coef has no effect with objective=dpo: dpo_beta is DPO's KL strength; set kl_coef=0"
        if config.entropy_coef > 0:
            return "entropy_coef has no effect with objective=dpo: the DPO loss has no entropy term; set entropy_coef=0"
        name = next((n for n in Preference.unread if given(n)), None)
        if name:
            return f"{name} has no effect with objective=dpo: the DPO loss reads pairs, not advantages; leave it unset"
        return ""

    def start(self, model: torch.nn.Module):
        pass

    def targets(self, batch: Rollout, rewards: torch.Tensor, stats: dict) -> Pairs:
        G = self.config.rl_rollout_size
        chosen, rejected = preference_pairs(rewards, G)  # within each group of G: a group all equal gives none
        # both answers of a pair carry signal; groups_paired gives train/groups_without_pair
        stats.update(pairs=len(chosen), informative=2 * len(chosen), groups_paired=len(set((chosen // G).tolist())))
        return Pairs(chosen, rejected)

    def update_batch(self, batch: Rollout, pairs: Pairs, ref_model) -> UpdateBatch:
        """A row per pair: every tensor (num_pairs, 2, ...), chosen then rejected; ref_logp holds the
        reference's sequence log-probs."""
        c, env = self.config, self.env
        sequences, mask = batch.sequences, batch.mask(env.end_token)
        # the reference is frozen: its sequence log-probs once a step, for every epoch
        ref = sequence_logprobs(policy_logprobs(ref_model, sequences, batch.generated, env.prompt_len,
                                                c.rl_temperature, c.rl_ga_steps, pos=batch.pos), mask)
        pair = lambda t: None if t is None else torch.stack([t[pairs.chosen], t[pairs.rejected]], dim=1)  # (n, 2, ...)
        return UpdateBatch(pair(sequences), pair(batch.generated), pair(mask), ref_logp=pair(ref), pos=pair(batch.pos))

    def loss(self, policy, part: UpdateBatch, norm: dict) -> dict:
        """The DPO loss of one micro-batch of pairs (normalised by the minibatch's pairs, all ranks)."""
        c, (n, _, A) = self.config, part.generated.shape
        # chosen and rejected in one forward: (n, 2, ...) flattened to (2n, ...) and back
        pos = None if part.pos is None else part.pos.flatten(0, 1)
        logits = answer_logits(policy, part.sequences.flatten(0, 1), self.env.prompt_len, c.rl_temperature, pos=pos)
        logp = sequence_logprobs(token_logprobs(logits, part.generated.flatten(0, 1)).view(n, 2, A), part.mask)
        # -log sigmoid(beta [(log pi - log pi_ref)(chosen) - (log pi - log pi_ref)(rejected)]) (Rafailov et al.
        # 2023); the reference's log-probs were taken once per step (update_batch); pairs counted over all ranks
        loss, stats = dpo_loss(logp[:, 0], logp[:, 1], part.ref_logp[:, 0], part.ref_logp[:, 1], c.dpo_beta,
                               num_pairs=norm["num_sequences"])
        # The empty stand-in of a rank with nothing to forward has log-probs all 0: a loss of log 2 and one pair
        # counted. Zeroed by a product (1 for real pairs: exactly as they were; no host sync to ask which), so its
        # backward still runs (DDP's all-reduce needs every rank) with gradient 0.
        real = part.mask.any().to(loss.dtype)
        loss, stats = loss * real, {k: v * real for k, v in stats.items()}
        return dict(loss=loss, total=loss.detach(), policy_loss=loss.detach(), **stats)

    def local_sums(self, stats: dict, update: dict) -> dict:
        return {"pairs_formed": stats["pairs"], "groups_paired": stats["groups_paired"],
                **{k: update[k] for k in self.sums}}

    def metrics(self, s: dict, stats: dict, steps: float) -> dict:
        pairs = max(s["pairs"], 1.0)  # the pairs trained on, each once per epoch
        return {"train/pairs": s["pairs_formed"],
                "train/groups_without_pair": 1.0 - s["groups_paired"] / s["groups"],
                "train/preference_accuracy": s["preferred"] / pairs,
                "train/chosen_reward": s["chosen_reward"] / pairs,
                "train/rejected_reward": s["rejected_reward"] / pairs,
                "train/reward_margin": (s["chosen_reward"] - s["rejected_reward"]) / pairs}

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, snap: dict, model: torch.nn.Module):
        pass


# The one dispatch: an objective's class by name (the `objective` setting's values, and a row's). The policy
# gradient whose advantages come from a learned critic (advantage_mode=gae) is a class of its own, since the
# critic is a second network; so is the one crediting each token (advantage_mode=token_zscore), since its
# advantages read the tokens, not the rewards. rl/algorithms.py's resolve() allows both only with policy_gradient.
OBJECTIVES = {"policy_gradient": PolicyGradient, "dpo": Preference, "rft": RejectionSampling}


def objective_class(objective: str, advantage_mode: str) -> type:
    return {"gae": ActorCritic, "token_zscore": TokenCredit}.get(advantage_mode) or OBJECTIVES[objective]


def make_objective(config, env, info: dist.DistInfo):
    return objective_class(config.objective, config.advantage_mode)(config, env, info)


@dataclass
class ObjectiveSettings:
    """What the update optimises: rl_algorithm's row of the table (rl/algorithms.py ALGORITHMS), each of its
    settings None to take the row's value, and the terms and settings each objective adds."""
    rl_algorithm: str = "dapo"
    """dapo (measured best here), reinforce (moving-average baseline), grpo, rloo, ppo, ppo_critic, dpo or rft"""
    # ---- the algorithm's row: None takes rl_algorithm's value ----
    advantage_mode: Optional[str] = None
    """none, baseline, group_mean, group_zscore, rloo, batch_zscore or token_zscore (credit per token)"""
    loss_aggregation: Optional[str] = None
    """token-mean, seq-mean-token-mean or seq-mean-token-sum-norm (Dr. GRPO)"""
    ppo_epochs: Optional[int] = None
    """passes over each rollout; more than one pass makes the update off-policy (PPO ratios) (> 0)"""
    ppo_minibatches: Optional[int] = None
    """optimizer steps per pass over a rollout (> 0)"""
    clip_low: Optional[float] = None
    """PPO clips the ratio below at 1 - clip_low (in (0, 1))"""
    clip_high: Optional[float] = None
    """PPO clips the ratio above at 1 + clip_high (DAPO's clip-higher raises it to 0.28) (> 0)"""
    dynamic_sampling: Optional[bool] = None
    """drop prompt groups whose answers all got the same reward and refill with fresh prompts"""
    objective: Optional[str] = None
    """what the update optimises: policy_gradient, dpo (preference pairs) or rft (the right answers' likelihood)"""
    # ---- the terms and settings of one objective or advantage mode ----
    baseline_momentum: float = 0.9
    """baseline <- m * baseline + (1 - m) * mean reward of the step (in [0, 1])"""
    kl_coef: float = 0.0
    """weight of the KL penalty to the frozen policy RL starts from; 0 keeps no reference model (>= 0)"""
    kl_estimator: str = "k2"
    """k1 (in the reward), k2 (in the loss) or k3 (in the loss, GRPO's: the gradient of the forward KL); see
    docs/algorithms.md"""
    entropy_coef: float = 0.0
    """weight of the entropy bonus (>= 0)"""
    gamma: float = 1.0
    """ppo_critic: discount over an answer's tokens (1: every token answers for the final reward) (in [0, 1])"""
    gae_lambda: float = 0.95
    """ppo_critic: GAE's lambda, between the critic's estimate (0) and the answer's return (1) (in [0, 1])"""
    value_clip: float = 0.2
    """ppo_critic: the value loss clips the critic's move from its value when the answer was scored (>= 0)"""
    critic_learning_rate: float = 1e-4
    """ppo_critic: peak learning rate of the critic (the policy's schedule) (> 0)"""
    dpo_beta: float = 0.1
    """dpo: strength of the implicit KL to the frozen starting policy (Rafailov et al.'s beta) (> 0)"""

    def resolve_algorithm(self) -> dict:
        """The row's settings with the explicit ones in place (rl/algorithms.py resolve); ValueError (one line)
        for an unknown name or a setting the formulas cannot take."""
        settings = resolve(self.rl_algorithm, {k: getattr(self, k) for k in ALGORITHM_FIELDS},
                           self.rl_rollout_size, self.kl_estimator)
        if settings["objective"] not in OBJECTIVES:
            raise ValueError(f"unknown objective {settings['objective']!r}; known: {', '.join(OBJECTIVES)}")
        return settings

    def objective_ignores(self, settings: dict, given, changed) -> str:
        """The fix for a setting the resolved objective would silently ignore, or "". given(name): a row
        setting set explicitly; changed(name): off the preset's value."""
        fix = objective_class(settings["objective"], settings["advantage_mode"]).ignored(self, settings, given, changed)
        if not fix and settings["ppo_epochs"] * settings["ppo_minibatches"] == 1:
            name = next((n for n in ("clip_low", "clip_high") if given(n)), None)
            if name:
                fix = (f"{name} has no effect when each rollout feeds one optimizer step (the PPO ratio is 1); "
                       f"raise ppo_epochs or ppo_minibatches, or leave it unset")
        return fix

    def objective_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]: each objective's own, and the terms'."""
        chosen = objective_class(settings["objective"], settings["advantage_mode"])
        return [*[(cls.owned, cls is not chosen, f"belongs to {cls.owner}")
                  for cls in (ActorCritic, *OBJECTIVES.values()) if cls.owned],
                (("kl_estimator",), self.kl_coef == 0, "needs kl_coef > 0"),
                (("baseline_momentum",), settings["advantage_mode"] != "baseline",
                 "belongs to advantage_mode=baseline"),
                (("rl_cuda_graphs",), not chosen.graphable,
                 "needs a policy-gradient objective (not ppo_critic or dpo)"),
                (("prefix_sharing",), not chosen.groups_rows,
                 "needs an objective that trains on whole groups of answers (not rft or dpo)")]

    def objective_unread(self) -> tuple:
        """The row settings a resolved config's objective never reads (rft's advantage_mode, dpo's four)."""
        return objective_class(self.objective, self.advantage_mode).unread if self.objective else ()

    def check_minibatch_rows(self, settings: dict, world_size: int):
        """Each process splits its rows of a step into ppo_minibatches optimizer steps (rl/update.py):
        more minibatches than rows leave some with nothing, steps that never happen (so any such value
        equals the row count). A row is an answer, or a pair of answers for dpo (at most G // 2 to a
        prompt); rft trains on the right answers only, at most every answer. Fewer rows in a minibatch
        than rl_ga_steps is harmless: the empty micro-batches forward a blank row with gradient 0."""
        prompts, minibatches = self.rl_batch_size // world_size, settings["ppo_minibatches"]
        dpo = settings["objective"] == "dpo"
        rows = prompts * (self.rl_rollout_size // 2 if dpo else self.rl_rollout_size)
        if minibatches > rows:
            share = f"rl_batch_size={self.rl_batch_size}" + (f" / {world_size} processes = {prompts}"
                                                             if world_size > 1 else "")
            each = (f"rl_rollout_size={self.rl_rollout_size} // 2 pairs" if dpo
                    else f"rl_rollout_size={self.rl_rollout_size} answers")
            raise ConfigError(f"ppo_minibatches={minibatches} is more than the {rows} "
                              f"{'preference pairs' if dpo else 'answers'} each process trains on per step at most "
                              f"({share} prompts x {each}), so some optimizer steps would have nothing to train on; "
                              f"use at most {rows}")
