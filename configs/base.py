"""BaseRLConfig: every setting of a run, with its reason, its validation and its derived values.

A preset is a small subclass that overrides only what differs (see configs/adder.py). Each field
is followed by a one-line docstring; `python rl/rl_ddp.py --help` prints them.
"""

import ast
import functools
import inspect
import math
import numbers
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Optional, Union, get_args, get_origin

from model.gpt import GPTConfig, autocast_dtype_for
from rl.algorithms import ALGORITHMS, resolve
from rl.dist import check_device_and_backend
from rl.errors import ConfigError  # (re-exported: from configs.base import ConfigError keeps working)
from rl import long_env
from rl.math_env import MathEnvironment
from rl.math_reward import parse_reward_spec
from rl.objectives import OBJECTIVES, objective_class
from rl.problem_sampler import PROBLEM_SAMPLERS, SAMPLER_CLASSES, PrioritizedSampler

# Field checks by kind: each range is written once, at the end of its field's docstring, "(> 0)", "(>= 0)",
# "(in [0, 1])" or "(in [0, 1))", and checked from there (field_ranges); each owner (the environment, the
# model, the algorithm table, the rewards) checks the rest itself.
RANGE_MARK = re.compile(r"\((> 0|>= 0|in \[0, 1\]|in \[0, 1\))\)$")


@functools.lru_cache(maxsize=1)
def field_ranges() -> dict:
    """{field: "> 0" | ">= 0" | "in [0, 1]" | "in [0, 1)"}, read from BaseRLConfig's own field docstrings."""
    docs = BaseRLConfig.field_docs(own=True)
    return {name: m.group(1) for name, doc in docs.items() if (m := RANGE_MARK.search(doc))}


ALGORITHM_FIELDS = tuple(next(iter(ALGORITHMS.values())))  # the settings a row of the table fixes
# Upper bounds of integer settings: torch and numpy hold sizes, counts and indices in int64, so a larger
# value fails deep in a run (a batch of 2**63 problems: "Maximum allowed dimension exceeded"). The seed
# goes to torch.manual_seed, which takes up to 2**64 - 1 (numpy's SeedSequence takes any size).
# Tighter bounds have owners: ndigit (1 to 9, the environment), the derived fields (0), ppo_minibatches
# (the rows of a step: _check_minibatch_rows), rl_ga_steps (divides them), sft_worked_examples (the
# train split's pairs).
INT_MAX = {"seed": (2 ** 64 - 1, "2**64 - 1", "the seeds torch.manual_seed takes")}
INT64 = (2 ** 63 - 1, "2**63 - 1", "torch and numpy hold sizes and counts in 64-bit integers")
BOUNDED_BY_OWNER = ("ndigit", "vocab_size", "max_seq_len")
# The warm start's settings: with no warm start to run (init_from is not sft, or sft_max_steps=0)
# nothing reads them. dropout too: RL samples and updates in eval mode.
# MathEnvironment's arguments; task_args() adds the task of many lengths' settings when they are set
MATH_ENV_KEYS = long_env.MATH_ENV_KEYS
LONG_TASK_KEYS = ("rl_ndigits", "sft_ndigits", "positions", "max_position_offset")
# nothing reads these without rl_ndigits
LONG_TASK_FIELDS = ("sft_ndigits", "eval_ndigits", "positions", "max_position_offset")
WARM_START_FIELDS = ("sft_max_steps", "sft_batch_size", "sft_learning_rate", "sft_warmup_steps",
                     "sft_target_accuracy", "sft_eval_interval", "sft_num_eval", "sft_save_interval",
                     "sft_worked_examples", "sft_patience")


def parse_range(name: str, text: str) -> tuple:
    """'lo-hi' (or one length 'L') -> (lo, hi), 1 <= lo <= hi; ConfigError (one line) for anything else."""
    try:
        return long_env.parse_range(name, text)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def parse_lengths(text: str) -> list:
    """eval_ndigits '5,10,20' -> [5, 10, 20] (sorted, distinct; [] for ""); ConfigError for anything else."""
    try:
        return long_env.parse_lengths(text)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def field_type(f) -> type:
    """int, float, bool or str: the type of a field, seen through Optional[...]."""
    if get_origin(f.type) is Union:
        return next(t for t in get_args(f.type) if t is not type(None))
    return f.type


@dataclass
class BaseRLConfig:
    # ---- task --------------------------------------------------------------------------------
    task: str = "adder"
    """operation to learn: a name registered in rl/math_env.py (adder, subtractor, multiplier)"""
    ndigit: int = 3
    """digits per operand; operands are drawn uniformly from 0 .. 10^ndigit - 1 (1 to 9)"""
    reverse_answer: bool = True
    """write the answer least-significant digit first, so carries flow in writing order"""
    use_format: bool = True
    """write the operator and '=' in the prompt ('123+045='); False gives bare digits ('123045')"""
    show_work: bool = False
    """write the operation's steps before the final answer ('12*34=840+0630=8040$'), for tasks that define them"""
    test_fraction: float = 0.1
    """share of operand pairs in the test split: held out, never trained on, every reported accuracy
    (in (0, 1); with validation_fraction below 1)"""
    validation_fraction: float = 0.05
    """share of operand pairs in the validation split: held out, what choices (warm-start stopping, sweeps) look at
    (in (0, 1); with test_fraction below 1)"""
    num_eval: int = 1000
    """problems in each fixed evaluation set, test and validation (all of a split when it has fewer) (> 0)"""
    rl_ndigits: str = ""
    """'lo-hi': RL on addition of operands of lo to hi digits each, a step's problems written at one width, their
    longer operand's (rl/long_env.py; task=adder, show_work=false); "" = the fixed ndigit task"""
    sft_ndigits: str = ""
    """'lo-hi': operand lengths of the warm start's problems (with rl_ndigits); "" = rl_ndigits's"""
    eval_ndigits: str = ""
    """operand lengths evaluated, each on its own fixed sets, e.g. '5,10,20,40,100' (with rl_ndigits):
    eval/accuracy_len<L> each, eval/accuracy their mean; "" = the rl_ndigits range alone"""
    positions: str = "absolute"
    """with rl_ndigits: absolute (the model's 0, 1, 2, ...) or coupled (digit i of a, b and the sum share one id,
    Cho et al. 2024), which can extrapolate to longer numbers"""
    max_position_offset: int = 0
    """positions=coupled: each training problem's ids shifted by a random offset of up to this, so the ids of long
    numbers are trained by short ones (evaluation uses 0) (>= 0)"""

    # ---- model -------------------------------------------------------------------------------
    n_layer: int = 4
    """transformer blocks (> 0)"""
    n_head: int = 8
    """attention heads per block; must divide n_embed (> 0)"""
    n_embed: int = 256
    """width of the residual stream (> 0)"""
    n_position: int = 64
    """position embeddings: the longest sequence the model can read (prompt + answer must fit) (> 0)"""
    dropout: float = 0.0
    """dropout probability of the warm start; RL samples and updates in eval mode, so it never applies there
    (in [0, 1])"""
    bias: bool = False
    """biases in Linear and LayerNorm layers (nanoGPT found none to be slightly better and faster)"""
    tie_weights: bool = True
    """share the token embedding with the output head"""
    vocab_size: int = 0
    """derived from the task (digits, operator, '=', end, pad); do not set"""
    max_seq_len: int = 0
    """derived from the task: prompt plus answer plus end token; do not set"""

    # ---- warm start --------------------------------------------------------------------------
    init_from: str = "sft"
    """policy RL starts from: 'sft' (supervised warm start, cached in out_dir), 'scratch', or a file"""
    sft_max_steps: int = 1000
    """upper bound on supervised steps of the warm start (>= 0)"""
    sft_batch_size: int = 256
    """problems per supervised step (global, split across ranks) (> 0)"""
    sft_learning_rate: float = 1e-3
    """peak learning rate of the warm start (linear warmup, then constant) (> 0)"""
    sft_warmup_steps: int = 50
    """warm start steps of linear learning-rate warmup (>= 0)"""
    sft_target_accuracy: float = 0.5
    """stop the warm start once validation accuracy reaches this (supervised steps climb 0.42 -> 0.58 in 10 steps
    here, far faster than RL, so a higher start saves RL steps; still at most 0.60) (in [0, 1])"""
    sft_eval_interval: int = 5
    """warm start steps between validation checks of the stopping rule (every step once past half the target) (> 0)"""
    sft_num_eval: int = 250
    """validation problems the stopping rule checks (the first of the validation set; fewer keeps it cheap) (> 0)"""
    sft_save_interval: int = 200
    """warm start steps between progress saves, so a crash or a stop loses at most this many (> 0)"""
    sft_worked_examples: int = 0
    """training pairs whose worked answers the warm start may see, a fixed draw from the train split shared by
    every seed (0: all of them); RL still trains on every training problem, from the final-answer reward only
    (docs/results.md "What RL adds") (>= 0)"""
    sft_patience: int = 0
    """stop the warm start once validation accuracy has not improved for this many steps: supervised training
    for as long as it helps (0: only sft_target_accuracy and sft_max_steps stop it) (>= 0)"""

    # ---- RL ----------------------------------------------------------------------------------
    rl_algorithm: str = "dapo"
    """dapo (measured best here), reinforce (moving-average baseline), grpo, rloo, ppo, ppo_critic, dpo or rft"""
    rl_train_steps: int = 200
    """optimizer steps of RL (>= 0)"""
    rl_batch_size: int = 64
    """prompts per step (global, split across ranks); 32 at lr 6e-4 ended at 0.912 on one seed of three
    (docs/earlier-studies.md) (> 0)"""
    rl_rollout_size: int = 8
    """answers sampled per prompt (> 0)"""
    rl_ga_steps: int = 2
    """micro-batches per step (gradient accumulation); bounds memory, not the result (> 0)"""
    rl_temperature: float = 1.0
    """sampling temperature of rollouts (> 0)"""
    baseline_momentum: float = 0.9
    """baseline <- m * baseline + (1 - m) * mean reward of the step (in [0, 1])"""
    rewards: str = "exact_match:1.0"
    """rewards and weights, e.g. 'exact_match:1.0,format:0.1' (exact_match, steps, digit_match, format)"""

    # ---- algorithm details: None takes rl_algorithm's value (rl/algorithms.py, ALGORITHMS) ---
    advantage_mode: Optional[str] = None
    """none, baseline, group_mean, group_zscore, rloo or batch_zscore"""
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
    problem_sampler: str = "uniform"
    """which training problems a step draws: uniform, prioritized (by each pair's p(1-p); splits of up to 4M ordered
    pairs) or replay (a buffer of unsolved problems beside fresh draws; any split): rl/problem_sampler.py"""
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
    dynamic_sampling_max_rounds: int = 2
    """extra sampling rounds per step at most when refilling dropped groups: near 0.99 more rounds cost seconds
    for answers that are all right anyway (late batches are short instead) (>= 0)"""
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

    # ---- optimizer ---------------------------------------------------------------------------
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

    # ---- run ---------------------------------------------------------------------------------
    seed: int = 1337
    """seeds model init, problem streams and sampling; the held-out set never depends on it (>= 0)"""
    out_dir: str = ""
    """run folder for snapshots, warm start and metrics; empty means out/<config name>"""
    eval_interval: int = 10
    """RL steps between evaluations on the test and validation sets (plus one at start and end); about 1 s each (> 0)"""
    rl_target_accuracy: float = 0.0
    """stop RL early once validation accuracy is at least this at rl_target_evals evaluations in a row, so a
    fast device does not spend rl_train_steps sized for a CPU (0: always run rl_train_steps) (in [0, 1])"""
    rl_target_evals: int = 2
    """evaluations in a row that must reach rl_target_accuracy: held, not touched once (> 0)"""
    save_interval: int = 50
    """RL steps between snapshots (one is also written at the end) (> 0)"""
    keep_snapshots: int = 3
    """newest snapshots kept in out_dir; older ones are deleted once a newer one is complete (> 0)"""
    max_bad_steps: int = 5
    """stop after this many updates in a row skipped for a non-finite loss, gradient norm or sampling logits (> 0)"""
    log_interval: int = 10
    """RL steps between console lines (> 0)"""
    eval_batch_size: int = 500
    """held-out problems decoded at once per rank (> 0)"""
    num_mistakes: int = 3
    """wrong held-out answers printed at each evaluation (>= 0)"""
    device: str = "auto"
    """'auto' (CUDA when present, else CPU), 'cpu' or 'cuda'"""
    backend: str = "auto"
    """process-group backend under torchrun: 'auto' (nccl on CUDA, gloo on CPU), 'gloo' or 'nccl'"""
    precision: str = "auto"
    """'auto' (bf16 autocast and TF32 on CUDA, fp32 on the CPU), 'fp32' or 'bf16': every forward of sampling,
    update and evaluation alike, so PPO's ratios compare like with like"""
    cuda_graphs: bool = True
    """on CUDA, decode (sampling and evaluation) by replaying a CUDA graph captured once per batch shape:
    one launch instead of ~70 a token; the CPU ignores it"""
    wandb_project: str = "mathrl"
    """wandb project name"""
    wandb_run_name: str = ""
    """wandb run name; empty means the config name"""

    # Applied by --debug before explicit --key=value overrides: a run of well under a minute that
    # goes through warm start, rollouts, updates, evaluation and snapshots. 30 supervised steps
    # teach no exact answer yet, so a little partial credit gives the update something to train on.
    DEBUG_OVERRIDES = dict(
        sft_max_steps=30, sft_batch_size=64, sft_eval_interval=10, rl_train_steps=6, rl_batch_size=16,
        rl_rollout_size=4, eval_interval=3, save_interval=3, log_interval=1, num_eval=200, sft_num_eval=100,
        warmup_steps=2, dynamic_sampling_max_rounds=1, rewards="exact_match:1.0,digit_match:0.1",
    )

    @property
    def name(self) -> str:
        return type(self).__name__

    def get_args_ready(self, debug: bool = False) -> "BaseRLConfig":
        """Validate every field and return a copy with the derived fields filled in. Each owner checks
        its own settings (the environment, the model, the algorithm table, the rewards); whatever it
        finds wrong becomes a ConfigError of one line."""
        self._check_numbers()
        self._check_lengths()
        try:
            env = MathEnvironment(**{k: getattr(self, k) for k in MATH_ENV_KEYS})
            envs = self.environments()
            GPTConfig(**{**self.model_args(), "vocab_size": env.vocab_size})
            settings = resolve(self.rl_algorithm, {k: getattr(self, k) for k in ALGORITHM_FIELDS},
                               self.rl_rollout_size, self.kl_estimator)
            check_device_and_backend(self.device, self.backend)
            autocast_dtype_for(self.precision, "cpu")
            parse_reward_spec(self.rewards, self.show_work)
            if self.problem_sampler == "prioritized":
                PrioritizedSampler.check_fits(env)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self._check_run_settings()
        self._check_every_setting_matters(settings, debug)
        self._check_minibatch_rows(settings, world_size=1)  # one process has the most rows; validate_world_size: N
        if self.init_from == "sft" and self.sft_worked_examples:
            # counted where the space is enumerated; a larger space's train split holds millions of pairs
            pairs = env.split_size("train")
            if pairs is not None and self.sft_worked_examples > pairs:
                raise ConfigError(f"sft_worked_examples={self.sft_worked_examples} but the train split has only "
                                  f"{pairs} pairs; set it to at most {pairs} (0 for all)")
        if not self.rl_ndigits and env.seq_len > self.n_position:
            raise ConfigError(f"{self.task} with ndigit={self.ndigit} needs {env.seq_len} positions "
                              f"(prompt {env.prompt_len} + answer {env.answer_len}) but n_position={self.n_position}; "
                              f"raise n_position to at least {env.seq_len}")
        every = [envs["sft"], envs["rl"], *envs["eval"].values()]
        need = max(e.num_position_ids for e in every) if self.rl_ndigits else 0
        if need > self.n_position:
            raise ConfigError(f"positions={self.positions} at lengths up to {max(e.hi for e in every)} digits"
                              f"{f' and offsets up to {self.max_position_offset}' if self.max_position_offset else ''} "
                              f"need {need} position ids but n_position={self.n_position}; raise n_position to {need}")
        out_dir = self.out_dir or f"out/{self.name}{'-debug' if debug else ''}"
        return replace(self, vocab_size=env.vocab_size, max_seq_len=max(e.seq_len for e in every), out_dir=out_dir,
                       **settings)

    def _check_lengths(self):
        """The task of many lengths (rl_ndigits): well-formed ranges, addition as the adder writes it, and the
        uniform problem sampler (the others key pairs by a * 10^ndigit + b, which 100 digits do not fit)."""
        for name in ("rl_ndigits", "sft_ndigits"):
            if getattr(self, name):
                parse_range(name, getattr(self, name))
        parse_lengths(self.eval_ndigits)
        if not self.rl_ndigits:
            return
        if (self.task, self.show_work, self.reverse_answer, self.use_format) != ("adder", False, True, True):
            raise ConfigError("rl_ndigits needs task=adder with show_work=false, reverse_answer=true and "
                              "use_format=true (addition of many lengths, rl/long_env.py); set those, or rl_ndigits=''")
        if self.problem_sampler != "uniform":
            raise ConfigError(f"problem_sampler={self.problem_sampler} cannot key problems of many lengths "
                              f"(rl_ndigits); use problem_sampler=uniform")

    def environments(self) -> dict:
        """The environment of each phase: {"sft": warm start, "rl": RL, "eval": {length: env}} (rl/long_env.py
        environments, from task_args(): the same environments a file's task builds). ValueError from an
        environment's own checks."""
        return long_env.environments(self.task_args(), parse_lengths(self.eval_ndigits))

    def _check_numbers(self):
        for f in fields(self):
            value, kind = getattr(self, f.name), field_type(f)
            if kind is float and value is not None and not (isinstance(value, (int, float))
                                                            and math.isfinite(value)):
                raise ConfigError(f"{f.name} must be a finite number, got {value!r}")
            # (the command line types every value; a config built in Python may not)
            if kind is int and value is not None and (isinstance(value, bool)
                                                      or not isinstance(value, numbers.Integral)):
                raise ConfigError(f"{f.name} must be an integer, got {value!r}")
            if kind is bool and value is not None and not isinstance(value, bool):
                raise ConfigError(f"{f.name} must be true or false, got {value!r}")
        for key, kind in field_ranges().items():
            value = getattr(self, key)
            if value is None:  # (an algorithm-row setting left to the algorithm: the table's value is in range)
                continue
            if kind == "> 0" and value <= 0:
                raise ConfigError(f"{key} must be positive, got {value}")
            if kind == ">= 0" and value < 0:
                raise ConfigError(f"{key} must be zero or positive, got {value}")
            if kind.startswith("in") and (not 0.0 <= value <= 1.0 or (value == 1.0 and kind.endswith(")"))):
                raise ConfigError(f"{key} must be {kind}, got {value}")
        for f in fields(self):
            value = getattr(self, f.name)
            if field_type(f) is not int or value is None or f.name in BOUNDED_BY_OWNER:
                continue
            top, top_text, why = INT_MAX.get(f.name, INT64)
            if value > top:
                low = 1 if field_ranges().get(f.name) == "> 0" or f.name in ALGORITHM_FIELDS else 0
                raise ConfigError(f"{f.name}={value} is outside [{low}, {top_text}] ({why}); "
                                  f"use a value in that range")

    def _check_run_settings(self):
        if self.problem_sampler not in PROBLEM_SAMPLERS:
            raise ConfigError(f"unknown problem_sampler {self.problem_sampler!r}; known: {', '.join(PROBLEM_SAMPLERS)}")
        if self.vocab_size or self.max_seq_len:
            raise ConfigError("vocab_size and max_seq_len are derived from the task; do not set them")
        if (self.rl_batch_size * self.rl_rollout_size) % self.rl_ga_steps != 0:
            raise ConfigError(f"rl_batch_size*rl_rollout_size={self.rl_batch_size * self.rl_rollout_size} "
                              f"is not divisible by rl_ga_steps={self.rl_ga_steps}")
        if self.init_from not in ("sft", "scratch") and not os.path.isfile(self.init_from):
            raise ConfigError(f"init_from={self.init_from!r} is neither 'sft', 'scratch' nor an existing file")

    def _check_every_setting_matters(self, settings: dict, debug: bool = False):
        """Refuse a setting the resolved algorithm would silently ignore: a user who sets an option and
        sees a run finish believes the option did something. Row settings count as set when given
        (not None); the others when they differ from the preset's default (and from --debug's)."""
        mode = settings["advantage_mode"]
        given = lambda name: getattr(self, name) is not None
        # --debug's presets are its own, not the user's: a setting at its debug value counts as unchanged
        debug_value = lambda name: type(self).DEBUG_OVERRIDES.get(name, getattr(type(self), name))
        changed = lambda name: getattr(self, name) != getattr(type(self), name) and not (
            debug and getattr(self, name) == debug_value(name))
        chosen = objective_class(settings["objective"], mode)
        fix = chosen.ignored(self, settings, given, changed)  # what this objective would ignore
        if not fix and settings["ppo_epochs"] * settings["ppo_minibatches"] == 1:
            name = next((n for n in ("clip_low", "clip_high") if given(n)), None)
            if name:
                fix = (f"{name} has no effect when each rollout feeds one optimizer step (the PPO ratio is 1); "
                       f"raise ppo_epochs or ppo_minibatches, or leave it unset")
        owners = [(cls.owned, cls is not chosen, f"belongs to {cls.owner}") for cls in OBJECTIVES.values() if cls.owned]
        owners += [(cls.owned, name != self.problem_sampler, f"belongs to problem_sampler={name}")
                   for name, cls in SAMPLER_CLASSES.items() if cls.owned]  # each sampler declares its own
        owners += [(("kl_estimator",), self.kl_coef == 0, "needs kl_coef > 0"),
                  (("baseline_momentum",), mode != "baseline", "belongs to advantage_mode=baseline"),
                  (LONG_TASK_FIELDS, not self.rl_ndigits, "belongs to the task of many lengths (rl_ndigits)"),
                  (("rl_target_evals",), self.rl_target_accuracy == 0, "needs rl_target_accuracy > 0"),
                  (("dynamic_sampling_max_rounds",), not settings["dynamic_sampling"],
                   "belongs to dynamic sampling (dynamic_sampling=true, as rl_algorithm=dapo has it)"),
                  (WARM_START_FIELDS, self.init_from != "sft", "belongs to the warm start (init_from=sft)"),
                  # A file's model_args carry its dropout and must match the config's (rl/snapshot.py), so
                  # only a start from scratch ignores it.
                  (("dropout",), self.init_from == "scratch",
                   "applies only to the warm start, init_from=sft (RL samples and updates in eval mode)"),
                  (WARM_START_FIELDS[1:] + ("dropout",), self.sft_max_steps == 0,
                   "needs sft_max_steps > 0 (no warm start step runs)")]
        for names, unused, owner in owners:
            name = next((n for n in names if unused and changed(n)), None)
            if name and not fix:
                fix = f"{name}={getattr(self, name)!r} has no effect here: it {owner}; set that, or leave {name} unset"
        if fix:
            raise ConfigError(fix)

    def validate_world_size(self, world_size: int):
        """Batches are global and split evenly across ranks (the warm start's only when there is one)."""
        for key in ("rl_batch_size", "sft_batch_size"):
            if key == "sft_batch_size" and (self.init_from != "sft" or self.sft_max_steps == 0):
                continue
            if getattr(self, key) % world_size != 0:
                raise ConfigError(f"{key}={getattr(self, key)} is not divisible by the {world_size} processes; "
                                  f"use a multiple of {world_size}")
        local = self.rl_batch_size // world_size * self.rl_rollout_size
        if local % self.rl_ga_steps != 0:
            raise ConfigError(f"each of the {world_size} processes samples {local} answers per step, "
                              f"which rl_ga_steps={self.rl_ga_steps} does not divide")
        self._check_minibatch_rows({k: getattr(self, k) for k in ALGORITHM_FIELDS}, world_size)
        if self.problem_sampler == "prioritized":
            self._check_prioritized_draws(world_size)

    def _check_minibatch_rows(self, settings: dict, world_size: int):
        """Each process splits its rows of a step into ppo_minibatches optimizer steps (rl/update.py):
        more minibatches than rows leave some with nothing, steps that never happen (so any such value
        equals the row count). A row is an answer, or a pair of answers for dpo (at most G // 2 to a
        prompt); rft trains on the right answers only, at most every answer. Fewer rows in a minibatch
        than rl_ga_steps is harmless: the empty micro-batches forward a blank row with gradient 0."""
        prompts = self.rl_batch_size // world_size
        per_prompt = self.rl_rollout_size // 2 if settings["objective"] == "dpo" else self.rl_rollout_size
        rows, minibatches = prompts * per_prompt, settings["ppo_minibatches"]
        if minibatches > rows:
            what = "preference pairs" if settings["objective"] == "dpo" else "answers"
            share = f"rl_batch_size={self.rl_batch_size}" + (f" / {world_size} processes = {prompts}"
                                                             if world_size > 1 else "")
            each = (f"rl_rollout_size={self.rl_rollout_size} // 2 pairs" if settings["objective"] == "dpo"
                    else f"rl_rollout_size={self.rl_rollout_size} answers")
            raise ConfigError(f"ppo_minibatches={minibatches} is more than the {rows} {what} each process trains "
                              f"on per step at most ({share} prompts x {each}), so some optimizer steps would "
                              f"have nothing to train on; use at most {rows}")

    def _check_prioritized_draws(self, world_size: int):
        """The prioritized sampler draws distinct training pairs within a step on each process, a
        refill round none drawn before in it (rl/rollout.py: up to 4 x the prompts a round, for up to
        dynamic_sampling_max_rounds rounds); past the train split's pairs numpy's draw fails mid-run."""
        prompts = self.rl_batch_size // world_size
        rounds = self.dynamic_sampling_max_rounds if self.dynamic_sampling else 0
        most = prompts * (1 + 4 * rounds)
        pairs = MathEnvironment(**self.task_args()).split_size("train")
        if most > pairs:
            refills = f" and up to {rounds} refill round{'s' if rounds > 1 else ''} of 4 x {prompts}" if rounds else ""
            raise ConfigError(f"problem_sampler=prioritized draws up to {most} distinct training pairs a step on each "
                              f"process ({prompts} prompts{refills}), but the train split has {pairs}; lower "
                              f"rl_batch_size{' or dynamic_sampling_max_rounds' if rounds else ''}, or use "
                              f"problem_sampler=replay")

    def model_args(self) -> dict:
        keys = ("vocab_size", "n_position", "n_layer", "n_head", "n_embed", "dropout", "bias", "tie_weights")
        return {k: getattr(self, k) for k in keys}

    def task_args(self) -> dict:
        """What defines the problems, as MathEnvironment(**config.task_args()) takes it, and the task of many
        lengths' settings only when set (so the snapshots and warm starts made before them stay valid); a snapshot
        of another task cannot be resumed under this one."""
        long = {k: getattr(self, k) for k in LONG_TASK_KEYS if getattr(self, k) != getattr(BaseRLConfig, k)}
        return {**{k: getattr(self, k) for k in MATH_ENV_KEYS}, **long}

    def to_dict(self) -> dict:
        return asdict(self)

    def portable_dict(self) -> dict:
        """to_dict without where this machine keeps files (out_dir, an init_from path): what a
        snapshot stores, so a copied snapshot says nothing about the machine that made it."""
        init = self.init_from if self.init_from in ("sft", "scratch") else os.path.basename(self.init_from)
        return {**self.to_dict(), "out_dir": "", "init_from": init}

    def __str__(self):
        # a resolved config marks the row settings its objective never reads (rft's advantage_mode, dpo's four)
        unread = objective_class(self.objective, self.advantage_mode).unread if self.objective else ()
        lines = [f"  {f.name} = {getattr(self, f.name)!r}" + (f"  (not read by objective={self.objective})"
                                                               if f.name in unread else "") for f in fields(self)]
        return f"{self.name}(\n" + "\n".join(lines) + "\n)"

    @classmethod
    def field_docs(cls, own: bool = False) -> dict:
        """{field: its one-line docstring}, read from the class bodies (subclass docs win); own: this class's
        body alone."""
        docs = {}
        for klass in [cls] if own else reversed(cls.__mro__):
            if not (isinstance(klass, type) and issubclass(klass, BaseRLConfig)):
                continue
            body = ast.parse(inspect.getsource(klass)).body[0].body
            for stmt, nxt in zip(body, body[1:]):
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)):
                    docs[stmt.target.id] = str(nxt.value.value).strip()
        return docs
