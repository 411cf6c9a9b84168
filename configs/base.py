"""BaseRLConfig: every setting of a run, composed from groups that live beside the code that reads them.

    group              module                  its fields
    LongTaskSettings   rl/long_env.py          the task (TaskSettings, rl/math_env.py) and its many lengths
    ModelSettings      model/gpt.py            the policy's shape and how it runs
    WarmStartSettings  rl/warm_start.py        where RL starts from; the supervised warm start
    ObjectiveSettings  rl/objectives.py        rl_algorithm, its row of the table, each objective's own
    RolloutSettings    rl/rollout.py           prompts, answers to each, temperature, rewards, refill rounds
    SamplerSettings    rl/problem_sampler.py   which training problems a step draws
    ScheduleSettings   rl/update.py            RL's optimizer steps and their learning-rate schedule
    RunSettings        rl/run_control.py       seed, folder, evaluations, snapshots, console, device, wandb

Each field is followed by a one-line docstring, its reason and, for a number, its range (configs/fields.py
reads and checks those); `python rl/rl_ddp.py --help` prints them. Each group checks its own fields; this
class runs the checks in order, refuses a setting nothing would read, and fills in the derived fields.
A preset is a small subclass that overrides only what differs (see configs/adder.py).
"""

import os
from dataclasses import asdict, dataclass, fields, replace

from configs.fields import check_fields, field_docs
from model.gpt import ModelSettings
from rl.dist import check_device_and_backend
from rl.errors import ConfigError  # (re-exported: from configs.base import ConfigError keeps working)
from rl.long_env import LongTaskSettings
from rl.objectives import ObjectiveSettings
from rl.problem_sampler import SamplerSettings
from rl.rollout import RolloutSettings
from rl.run_control import RunSettings
from rl.update import ScheduleSettings
from rl.warm_start import WarmStartSettings


# A dataclass lists its bases' fields from the last base to the first: the task's first, the run's last, as the
# table above, the command line's --help and docs/configuration.md order them.
@dataclass
class BaseRLConfig(RunSettings, ScheduleSettings, SamplerSettings, RolloutSettings, ObjectiveSettings,
                   WarmStartSettings, ModelSettings, LongTaskSettings):
    """Every setting of a run (the groups above), checked together and resolved by get_args_ready."""

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
        """Validate every field and return a copy with the derived fields filled in (vocab_size, max_seq_len,
        out_dir, and rl_algorithm's row in place of each None). Each group checks its own fields, and what
        it finds wrong becomes a ConfigError of one line; the checks that need what the others checked first
        (the resolved row, the environments) come last."""
        check_fields(self)  # every field's type, the range its docstring states, what an int64 holds
        try:
            self.check_task()
            env, envs = self.task_environment(), self.environments()
            self.check_model(env.vocab_size)
            settings = self.resolve_algorithm()
            check_device_and_backend(self.device, self.backend)  # (rl/dist.py, which picks them at start)
            self.check_rollout()
            self.check_sampler(env)
            self.check_schedule()
            self.check_warm_start()
        except ValueError as e:  # an owner's own check (MathEnvironment, GPTConfig, resolve): one line
            raise ConfigError(str(e)) from None
        self.refuse_unused(settings, debug)
        self.check_minibatch_rows(settings, world_size=1)  # one process has the most rows; validate_world_size: N
        self.check_worked_examples(env)
        self.check_positions(env, envs)
        every = [envs["sft"], envs["rl"], *envs["eval"].values()]
        out_dir = self.out_dir or f"out/{self.name}{'-debug' if debug else ''}"
        return replace(self, vocab_size=env.vocab_size, max_seq_len=max(e.seq_len for e in every), out_dir=out_dir,
                       **settings)

    def refuse_unused(self, settings: dict, debug: bool = False):
        """Refuse a setting the resolved run would silently ignore: a user who sets an option and sees a run
        finish believes the option did something. Each group says which of its settings nothing reads, and
        when. Row settings count as set when given (not None); the others when they differ from the
        preset's default (and from --debug's)."""
        preset = type(self)
        given = lambda name: getattr(self, name) is not None
        # --debug's presets are its own, not the user's: a setting at its debug value counts as unchanged
        changed = lambda name: getattr(self, name) != getattr(preset, name) and not (
            debug and getattr(self, name) == preset.DEBUG_OVERRIDES.get(name, getattr(preset, name)))
        fix = self.objective_ignores(settings, given, changed)  # what the chosen objective would ignore
        rules = [*self.objective_unused(settings), *self.sampler_unused(settings), *self.task_unused(settings),
                 *self.run_unused(settings), *self.rollout_unused(settings), *self.warm_start_unused(settings),
                 *self.schedule_unused(settings)]
        for names, unused, owner in rules:
            name = next((n for n in names if unused and changed(n)), None)
            if name and not fix:
                fix = f"{name}={getattr(self, name)!r} has no effect here: it {owner}; set that, or leave {name} unset"
        if fix:
            raise ConfigError(fix)

    def validate_world_size(self, world_size: int):
        """Batches are global and split evenly across ranks: each group checks its share."""
        self.check_rollout_split(world_size)
        self.check_warm_start_split(world_size)
        self.check_schedule(world_size)
        self.check_minibatch_rows(self.to_dict(), world_size)
        self.check_prioritized_draws(world_size)

    def to_dict(self) -> dict:
        return asdict(self)

    def portable_dict(self) -> dict:
        """to_dict without where this machine keeps files (out_dir, an init_from path): what a
        snapshot stores, so a copied snapshot says nothing about the machine that made it."""
        init = self.init_from if self.init_from in ("sft", "scratch") else os.path.basename(self.init_from)
        return {**self.to_dict(), "out_dir": "", "init_from": init}

    def __str__(self):
        # a resolved config marks the row settings its objective never reads (rft's advantage_mode, dpo's four)
        unread = self.objective_unread()
        lines = [f"  {f.name} = {getattr(self, f.name)!r}" + (f"  (not read by objective={self.objective})"
                                                               if f.name in unread else "") for f in fields(self)]
        return f"{self.name}(\n" + "\n".join(lines) + "\n)"

    @classmethod
    def field_docs(cls) -> dict:
        """{field: its one-line docstring}: each group's, or a preset's own reason where it gives one."""
        return field_docs(cls)
