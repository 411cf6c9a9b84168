"""Problem selection: which training problems a step asks the policy about (`problem_sampler`).

Why: a group of G answers to a problem the policy solves with probability p carries a learning
signal only when it is mixed, which happens with probability 1 - p^G - (1-p)^G (G = 8: 0.57 at
p = 0.9, 0.22 at 0.97, 0.08 at 0.99). Late in a run uniform draws therefore spend nearly every
sample on problems already solved, and draw the few still wrong as rarely as any other. A
problem's signal scales with p(1-p) (SPEED-RL, arXiv 2506.09016; LILO, 2502.12272), so these
samplers remember outcomes and draw where p(1-p) is large.

Each sampler is a small class:
  draw(n, problems_rng, selection_rng, exclude)  n training problems: operands a, b (n,), and per
        problem whether the selection state chose it and its pass-rate estimate (nan: none)
  observe(keys, successes, G, pairs)   every group of the step on every rank, in rank order, so every rank
        holds the same state: keys (K,) the pairs, successes (K,) how many of G answers were right, and
        pairs (K, 2, W) the operands' digit arrays (many lengths only, else None)
  state_dict() / load_state_dict(state)   what a snapshot stores; metrics()   what the logs show
  width_weights()   the distribution of the next step's operand length (lengths), or None: the task's own
  reads_pairs   whether observe() reads `pairs` (rollouts record and gather the digits only then)

A pair's key is a * 10^ndigit + b (ordered). Operands of many lengths (rl/long_env.py, digit arrays) do not fit
that: their key is the pair's split hash (`LongAdditionEnvironment.pair_keys`), which cannot be inverted. The
uniform sampler keeps no state and the lengths sampler one per length; the replay buffer keeps each pair's digits
beside its key (observe's `pairs`); prioritized, which enumerates every pair, is refused. Only training pairs ever
enter a state: draws come from the training split, and observe() drops any pair that is not a training pair.

SamplerSettings: which sampler, the settings each one owns, and what each needs of the task and the batch.
"""

from collections import OrderedDict
from itertools import islice
from dataclasses import dataclass

import numpy as np
import torch

from rl.errors import ConfigError
from rl.long_env import number_lengths
from rl.math_env import ENUMERATE_LIMIT, SPLITS, MathEnvironment

TRAIN = SPLITS.index("train")


def pair_keys(env: MathEnvironment, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if hasattr(env, "pair_keys"):  # digit arrays of many lengths: their hash (not invertible)
        return env.pair_keys(a, b)
    return np.asarray(a, dtype=np.int64) * 10 ** env.ndigit + np.asarray(b, dtype=np.int64)


def key_operands(env: MathEnvironment, keys: np.ndarray):
    return np.divmod(np.asarray(keys, dtype=np.int64), 10 ** env.ndigit)


def training_only(env: MathEnvironment, keys: np.ndarray, successes: np.ndarray, pairs=None):
    """The (keys, successes, pairs) whose pair is in the training split: nothing held out enters a state. The
    split is read from the operands' digits where pairs (K, 2, W) are given, else from the keys."""
    keys, successes = np.asarray(keys, dtype=np.int64), np.asarray(successes, dtype=np.float64)
    split = env.split_of(*key_operands(env, keys)) if pairs is None else env.split_of(pairs[:, 0], pairs[:, 1])
    keep = split == TRAIN
    return keys[keep], successes[keep], None if pairs is None else pairs[keep]


def at_width(digits: np.ndarray, width: int) -> np.ndarray:
    """Digit arrays (..., D) -> (..., width): columns above `width` dropped (zeros: the numbers fit), zeros added."""
    out = np.zeros(digits.shape[:-1] + (width,), dtype=np.uint8)
    out[..., :min(width, digits.shape[-1])] = digits[..., :width]
    return out


def learnability(p: np.ndarray, floor: float) -> np.ndarray:
    """The draw weights of prioritized (per pair) and lengths (per width): p(1-p) + floor for pass rates p (K,);
    all ones when every weight is 0 (floor 0, each known solved or hopeless): none is likelier than another."""
    w = p * (1.0 - p) + floor
    return w if w.sum() > 0 else np.ones_like(w)


class UniformSampler:
    """Every problem uniformly from the training split (rejection from all pairs): the original
    recipe's draws, unchanged. No state."""
    owned = ()  # config fields only this sampler reads, in its constructor's order
    reads_pairs = False  # the keys say all it needs

    def __init__(self, env: MathEnvironment):
        self.env = env

    def draw(self, n: int, problems_rng, selection_rng, exclude: np.ndarray):
        a, b = self.env.sample_operands(n, problems_rng)
        return a, b, np.zeros(n, dtype=bool), np.full(n, np.nan)

    def observe(self, keys, successes, G: int, pairs=None):
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict):
        pass

    def metrics(self) -> dict:
        return {}

    def width_weights(self):
        """The distribution of the next step's width over lo..hi (a length curriculum's), or None: the task's
        own (rl/long_env.py draw_width), or a task of one width."""
        return None


class PrioritizedSampler:
    """A pass-rate estimate for every training pair; pairs drawn in proportion to p(1-p) + floor.

    State, per training pair i (all of them, enumerated once): discounted counts of right (s_i)
    and wrong (f_i) answers. A group of G answers with k right updates
        s_i <- decay * s_i + k,    f_i <- decay * f_i + (G - k).
    The estimate is the mean of a Beta posterior whose prior is one group's worth (G answers) of
    the population's pass rate m (the mean raw pass rate s/(s+f) over pairs seen so far; 0.5
    before any):
        p_i = (s_i + G * m) / (s_i + f_i + G),
    so an unseen pair counts as a typical one, and a pair seen once is pulled towards m.
    Why a discounted Beta posterior rather than an exponential average of pass rates: the counts
    say how much evidence there is (a pair seen once with 8 of 8 right is not yet known to be
    solved), and the decay forgets what an older policy did.
    Draw: n distinct pairs, not among `exclude`, with P(i) proportional to p_i(1 - p_i) + floor;
    the floor keeps every pair reachable, solved ones included.
    Sources: p(1-p) as a prompt's learnability (LILO, arXiv 2502.12272; SPEED-RL 2506.09016);
    a Beta posterior per prompt (MoPPS, 2507.04632); sampling by 1 - success rate (Kimi k1.5).
    Memory: two float64 per training pair, for operand spaces of at most ENUMERATE_LIMIT ordered
    pairs (2-digit multiplication: 8,461 training pairs; 3-digit addition or multiplication:
    about 850,000, 14 MB); larger spaces use `replay`."""
    owned = ("priority_floor", "priority_decay")
    width_weights = UniformSampler.width_weights  # one width a task: the sampler refused for many lengths
    reads_pairs = False  # (likewise)

    def __init__(self, env: MathEnvironment, floor: float, decay: float):
        self.check_fits(env)
        self.env, self.floor, self.decay = env, floor, decay
        a, b = env.all_pairs()
        train = env.split_of(a, b) == TRAIN
        self.keys = pair_keys(env, a[train], b[train])  # sorted, since all_pairs enumerates in key order
        self.right = np.zeros(len(self.keys))
        self.wrong = np.zeros(len(self.keys))
        self.G = 1  # answers per group, set by the first observe(); the prior's weight

    @staticmethod
    def check_fits(env: MathEnvironment):
        """ValueError if the task's operand space is too large to keep a statistic per pair."""
        space = 10 ** env.ndigit
        if space * space > ENUMERATE_LIMIT:
            raise ValueError(f"problem_sampler=prioritized keeps a statistic per training pair, and {env.task} "
                             f"with ndigit={env.ndigit} has {space * space:,} ordered pairs (at most "
                             f"{ENUMERATE_LIMIT:,}); use problem_sampler=replay")

    def population_rate(self) -> float:
        seen = self.right + self.wrong > 0
        return float((self.right[seen] / (self.right[seen] + self.wrong[seen])).mean()) if seen.any() else 0.5

    def estimates(self) -> np.ndarray:
        """(K,) each training pair's estimated pass rate, p_i above."""
        m = self.population_rate()
        return (self.right + self.G * m) / (self.right + self.wrong + self.G)

    def probabilities(self, estimates: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        """(K,) the chance of each training pair to be the next one drawn: p(1-p) + floor, normalised,
        0 for the pairs in `exclude`."""
        w = learnability(estimates, self.floor)
        excluded = np.searchsorted(self.keys, exclude[np.isin(exclude, self.keys)])
        w[excluded] = 0.0
        return w / w.sum()

    def draw(self, n: int, problems_rng, selection_rng, exclude: np.ndarray):
        p = self.estimates()
        index = selection_rng.choice(len(self.keys), size=n, replace=False, p=self.probabilities(p, exclude))
        a, b = key_operands(self.env, self.keys[index])
        seen = self.right[index] + self.wrong[index] > 0
        return a, b, seen, p[index]

    def observe(self, keys, successes, G: int, pairs=None):
        keys, successes, _ = training_only(self.env, keys, successes)
        self.G = G
        # in order, so a pair seen twice in one step is updated twice, the same on every rank
        for i, k in zip(np.searchsorted(self.keys, keys).tolist(), successes.tolist()):
            self.right[i] = self.decay * self.right[i] + k
            self.wrong[i] = self.decay * self.wrong[i] + (G - k)

    def state_dict(self) -> dict:
        return {"right": torch.from_numpy(self.right.copy()), "wrong": torch.from_numpy(self.wrong.copy()),
                "G": self.G}

    def load_state_dict(self, state: dict):
        self.right, self.wrong = state["right"].numpy().copy(), state["wrong"].numpy().copy()
        self.G = state["G"]

    def metrics(self) -> dict:
        p = self.estimates()
        return {"select/unsolved_pairs": int((p < 0.5).sum()), "select/population_pass_rate": self.population_rate()}


class LengthSampler(UniformSampler):
    """A length curriculum for the task of many lengths (rl/long_env.py): each step's width w (every problem
    of the step has its longer operand of w digits) drawn where the policy is at the edge of its competence,
    the problems of that width uniformly, as UniformSampler's.

    State, per width w in lo..hi: discounted counts of right (s_w) and wrong (f_w) answers. A step at
    width w whose groups have k right answers of n updates
        s_w <- decay * s_w + k,    f_w <- decay * f_w + (n - k).
    The estimate is PrioritizedSampler's Beta mean, per width: p_w = (s_w + G m) / (s_w + f_w + G), with m
    the mean raw pass rate over the widths seen so far (0.5 before any), so an unseen width is drawn as
    a typical one until it has answers of its own.
    Width: drawn with P(w) proportional to p_w(1 - p_w) + floor, the same on every rank (the weights come
    from every rank's groups, the draw from the step's width stream). Widths the policy solves or cannot
    yet solve teach little (a group is mixed with probability 1 - p^G - (1-p)^G); the floor keeps solved
    ones practised, so the short lengths are not forgotten.
    Sources: RL adds capability at the edge of competence (Zhang, Neubig and Yue 2025); p(1-p) as a
    prompt's learnability (LILO, arXiv 2502.12272), here per length instead of per pair."""
    owned = ("length_floor", "length_decay")
    # PrioritizedSampler's counts, estimates and snapshot: one right and one wrong count per width, not per pair
    state_dict, load_state_dict = PrioritizedSampler.state_dict, PrioritizedSampler.load_state_dict
    population_rate, estimates = PrioritizedSampler.population_rate, PrioritizedSampler.estimates

    def __init__(self, env, floor: float, decay: float):
        super().__init__(env)
        self.floor, self.decay = floor, decay
        self.right = np.zeros(env.hi - env.lo + 1)  # index w - lo
        self.wrong = np.zeros(env.hi - env.lo + 1)
        self.G = 1

    def width_weights(self) -> np.ndarray:
        """(hi - lo + 1,) the chance of each width lo..hi to be the next step's: p(1-p) + floor, normalised."""
        w = learnability(self.estimates(), self.floor)
        return w / w.sum()

    def draw(self, n: int, problems_rng, selection_rng, exclude: np.ndarray):
        a, b = self.env.sample_operands(n, problems_rng)
        i = self.env.number_width - self.env.lo
        seen = self.right[i] + self.wrong[i] > 0
        return a, b, np.full(n, seen), np.full(n, self.estimates()[i])

    def observe(self, keys, successes, G: int, pairs=None):
        """Every group of the step, all of one width: the environment's current one (rl/rollout.py sets it
        for the whole step before sampling and keeps it until the next)."""
        i, successes = self.env.number_width - self.env.lo, np.asarray(successes, dtype=np.float64)
        self.G = G
        if len(successes):
            self.right[i] = self.decay * self.right[i] + successes.sum()
            self.wrong[i] = self.decay * self.wrong[i] + (G * len(successes) - successes.sum())

    def metrics(self) -> dict:
        weights = self.width_weights()
        return {"select/mean_width": float((weights * np.arange(self.env.lo, self.env.hi + 1)).sum()),
                "select/edge_width": self.env.lo + int(np.argmax(weights))}


class ReplaySampler:
    """A bounded buffer of training problems not yet solved, mixed with fresh uniform draws.

    Enter: a problem whose group was mixed or all wrong (fewer than G of G right) joins the back
    of the buffer, unless it is in it already (its last pass rate is then updated).
    Leave: a problem whose group was all right leaves; when the buffer is over `capacity`, the
    oldest entries leave first, so problems the policy cannot learn yet do not crowd out new ones.
    Draw: round(share * n) problems from the buffer, uniformly without replacement among those
    not in `exclude` (all of them if fewer are there), and the rest fresh uniform training draws.
    For any split size: the buffer holds at most `capacity` keys, whatever the split.
    Many lengths (rl/long_env.py): the buffer keeps each pair's digits (the key, a hash, cannot be inverted), and a
    step draws from it only the pairs of the step's width (the longer operand's length), written at the step's
    written width: a step's problems stay of one width, as the task draws them.
    Sources: the probe in the problem-selection review (half the prompts from a buffer of
    4,096); replaying prompts by their recent outcomes, as GRESO (arXiv 2506.02177) skips those
    whose recent groups were all equal and Kimi k1.5 (2501.12599) favours low success rates."""
    owned = ("replay_share", "replay_capacity")
    width_weights = UniformSampler.width_weights  # (likewise)

    def __init__(self, env: MathEnvironment, share: float, capacity: int):
        self.env, self.share, self.capacity = env, share, capacity
        self.buffer = OrderedDict()  # key -> pass rate of its last group, oldest first
        self.reads_pairs = hasattr(env, "pair_keys")  # many lengths: keys not invertible, so digits kept
        self.operands = {}  # key -> (2, hi) uint8 digit arrays a, b (many lengths only)
        self.widths = {}  # key -> the longer operand's length (many lengths only)

    def draw(self, n: int, problems_rng, selection_rng, exclude: np.ndarray):
        # the buffer's keys, oldest first, without those drawn before in this step (and, for many lengths, those
        # of another width): array operations, not a Python test per key (thousands at 4,096 prompts a step)
        keys = np.fromiter(self.buffer, dtype=np.int64, count=len(self.buffer))
        keep = ~np.isin(keys, exclude)
        if self.reads_pairs:
            widths = np.fromiter(map(self.widths.__getitem__, self.buffer), dtype=np.int64, count=len(keys))
            keep &= widths == self.env.number_width
        candidates = keys[keep]
        take = min(int(round(self.share * n)), len(candidates))
        chosen = selection_rng.choice(candidates, size=take, replace=False) if take else candidates[:0]
        a_old, b_old = self.chosen_operands(chosen)
        a_new, b_new = self.env.sample_operands(n - take, problems_rng)
        estimates = np.concatenate([np.fromiter(map(self.buffer.__getitem__, chosen.tolist()), np.float64, take),
                                    np.full(n - take, np.nan)])
        selected = np.arange(n) < take
        return np.concatenate([a_old, a_new]), np.concatenate([b_old, b_new]), selected, estimates

    def chosen_operands(self, chosen: np.ndarray):
        """The operands a, b of the buffered keys `chosen` (K,): (K,) ints, or digit arrays (K, width) at the
        step's written width (many lengths)."""
        if not self.reads_pairs:
            return key_operands(self.env, chosen)
        pairs = at_width(self.stacked(chosen.tolist()), self.env.width)
        return pairs[:, 0], pairs[:, 1]

    def stacked(self, keys: list) -> np.ndarray:
        """(K, 2, hi) uint8: the kept digits of the buffered `keys` (many lengths)."""
        return np.stack([self.operands[k] for k in keys]) if keys else np.zeros((0, 2, self.env.hi), np.uint8)

    def observe(self, keys, successes, G: int, pairs=None):
        keys, successes, pairs = training_only(self.env, keys, successes, pairs)
        buffer, forget = self.buffer, self.forget
        # in order, one group after another (a key may come twice in a step); the rates as k / G
        all_right, rates = (successes == G).tolist(), (successes / G).tolist()
        for i, (key, solved, rate) in enumerate(zip(keys.tolist(), all_right, rates)):
            if solved:
                forget(key)
            else:
                buffer[key] = rate  # a key already in keeps its place: age counts from entry
                if self.reads_pairs:
                    self.remember(key, at_width(pairs[i], self.env.hi))
        excess = len(buffer) - self.capacity
        if excess > 0:  # the oldest leave first (thousands at once, at 4,096 prompts a step)
            for key in list(islice(buffer, excess)):
                forget(key)

    def remember(self, key: int, operands: np.ndarray):
        self.operands[key], self.widths[key] = operands, int(number_lengths(operands).max())

    def forget(self, key: int):
        self.buffer.pop(key, None)
        if self.reads_pairs:
            self.operands.pop(key, None), self.widths.pop(key, None)

    def state_dict(self) -> dict:
        state = {"keys": torch.tensor(list(self.buffer), dtype=torch.int64),
                 "pass_rates": torch.tensor(list(self.buffer.values()), dtype=torch.float64)}
        if self.reads_pairs:  # (K, 2, hi) uint8, in the buffer's order
            state["operands"] = torch.from_numpy(self.stacked(list(self.buffer)))
        return state

    def load_state_dict(self, state: dict):
        self.buffer = OrderedDict(zip(state["keys"].tolist(), state["pass_rates"].tolist()))
        self.operands, self.widths = {}, {}
        if self.reads_pairs:
            for key, operands in zip(self.buffer, state["operands"].numpy()):
                self.remember(key, operands.copy())

    def metrics(self) -> dict:
        return {"select/replay_size": len(self.buffer)}


def make_problem_sampler(config, env: MathEnvironment):
    """The sampler `config.problem_sampler` names, built from the settings it owns."""
    cls = SAMPLER_CLASSES[config.problem_sampler]
    return cls(env, *(getattr(config, name) for name in cls.owned))


# name -> class; each class's `owned` names the config fields only it reads, in its constructor's order
SAMPLER_CLASSES = {"uniform": UniformSampler, "prioritized": PrioritizedSampler, "replay": ReplaySampler,
                   "lengths": LengthSampler}
PROBLEM_SAMPLERS = tuple(SAMPLER_CLASSES)


@dataclass
class SamplerSettings:
    """Which training problems a step draws, and the settings of each sampler (its class's `owned`)."""
    problem_sampler: str = "uniform"
    """which training problems a step draws: uniform, prioritized (by each pair's p(1-p); splits of up to 4M ordered
    pairs; one length), replay (a buffer of unsolved problems beside fresh draws; any split, any lengths) or lengths
    (each step's operand length by its p(1-p); the task of many lengths only): rl/problem_sampler.py"""
    priority_floor: float = 0.01
    """prioritized: added to every pair's p(1-p) before drawing, so solved and unseen pairs stay reachable (>= 0)"""
    priority_decay: float = 0.5
    """prioritized: a pair's older answers count this much at each new group of it (forgets an older policy)
    (in [0, 1])"""
    replay_share: float = 0.5
    """replay: share of each sampling round's problems taken from the buffer; the rest are fresh uniform draws
    (in [0, 1])"""
    replay_capacity: int = 4096
    """replay: problems the buffer holds at most; past it the oldest leave first (> 0)"""
    length_floor: float = 0.02
    """lengths: added to every width's p(1-p) before drawing a step's width, so solved lengths are still practised
    (>= 0)"""
    length_decay: float = 0.5
    """lengths: a width's older answers count this much each time a step draws it again (forgets an older policy)
    (in [0, 1])"""

    def check_sampler(self, env: MathEnvironment):
        """A known sampler that can key the task's problems: the task of many lengths (rl_ndigits) does not take
        prioritized, which enumerates pairs keyed a * 10^ndigit + b, which 100 digits do not fit; lengths needs many
        lengths; prioritized keeps a statistic per pair of env."""
        if self.problem_sampler not in PROBLEM_SAMPLERS:
            raise ConfigError(f"unknown problem_sampler {self.problem_sampler!r}; known: {', '.join(PROBLEM_SAMPLERS)}")
        if self.rl_ndigits and self.problem_sampler == "prioritized":
            raise ConfigError(f"problem_sampler={self.problem_sampler} cannot key problems of many lengths "
                              f"(rl_ndigits); use problem_sampler=uniform, lengths or replay")
        if not self.rl_ndigits and self.problem_sampler == "lengths":
            raise ConfigError(f"problem_sampler=lengths draws each step's operand length, and this task has one "
                              f"({self.ndigit} digits); set rl_ndigits (e.g. 1-20), or use another problem_sampler")
        if self.problem_sampler == "prioritized":
            PrioritizedSampler.check_fits(env)

    def sampler_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]: each sampler declares its own."""
        return [(cls.owned, name != self.problem_sampler, f"belongs to problem_sampler={name}")
                for name, cls in SAMPLER_CLASSES.items() if cls.owned]

    def check_prioritized_draws(self, world_size: int):
        """The prioritized sampler draws distinct training pairs within a step on each process, a
        refill round none drawn before in it (rl/rollout.py: up to 4 x the prompts a round, for up to
        dynamic_sampling_max_rounds rounds); past the train split's pairs numpy's draw fails mid-run."""
        if self.problem_sampler != "prioritized":
            return
        prompts = self.rl_batch_size // world_size
        rounds = self.dynamic_sampling_max_rounds if self.dynamic_sampling else 0
        most = prompts * (1 + 4 * rounds)
        pairs = self.task_environment().split_size("train")
        if most > pairs:
            refills = f" and up to {rounds} refill round{'s' if rounds > 1 else ''} of 4 x {prompts}" if rounds else ""
            raise ConfigError(f"problem_sampler=prioritized draws up to {most} distinct training pairs a step on each "
                              f"process ({prompts} prompts{refills}), but the train split has {pairs}; lower "
                              f"rl_batch_size{' or dynamic_sampling_max_rounds' if rounds else ''}, or use "
                              f"problem_sampler=replay")
