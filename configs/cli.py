"""The command line of rl/rl_ddp.py: flags, typed --KEY=VALUE overrides of a config's fields, and --help.

    --config_name NAME   a config class under configs/ (default AdderRLConfig)
    --debug              a tiny run that checks every stage (BaseRLConfig.DEBUG_OVERRIDES)
    --no_wandb           metrics go to out_dir/metrics.jsonl only
    --resume[=...]       default: continue from the newest snapshot in out_dir; =never starts over;
                         =PATH continues from that file
    --KEY=VALUE          (or --KEY VALUE) any config field, typed by the field

Overrides are strict: an unknown key, a wrong type, a non-finite number, an empty value or an
option given twice is a ConfigError of one line (with the closest known key), never an exec of
user text, never a silent default or a silent last-one-wins.
"""

import difflib
import inspect
import math
from dataclasses import dataclass, field, fields, is_dataclass

from configs import get_config_class
from configs.base import BaseRLConfig
from configs.fields import field_docs, field_type
from rl.algorithms import ALGORITHM_FIELDS, resolve
from rl.errors import ConfigError

FLAGS = ("config_name", "debug", "no_wandb", "resume", "help")


@dataclass
class CommandLine:
    config_name: str = "AdderRLConfig"
    debug: bool = False
    no_wandb: bool = False
    resume: str = ""  # "" = not given: auto, except under --debug where it means never
    help: bool = False
    overrides: dict = field(default_factory=dict)  # field name -> the text given for it

    @property
    def resume_mode(self) -> str:
        return self.resume or ("never" if self.debug else "auto")


def parse_command_line(argv: list) -> CommandLine:
    """Split argv into the flags and raw --key=value overrides (typed later, per config class).
    Each option may be given once: were the last to win, a long command's earlier value would be
    silently dropped. An empty value is refused too: `--out_dir=$DIR` with DIR unset would otherwise
    run, and start over, in the default folder."""
    cli, i, given = CommandLine(), 0, {}  # given: option -> its text, for the message of a repeat
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            cli.help = True
            continue
        if not arg.startswith("--") or arg == "--":
            raise ConfigError(f"unexpected argument {arg!r}; options look like --key=value (see --help)")
        key, has_value, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        if key in ("debug", "no_wandb"):
            if has_value:
                raise ConfigError(f"--{key} takes no value")
        elif key == "resume":
            if has_value and not value:
                raise ConfigError("--resume= is empty; give --resume=auto, --resume=never or --resume=PATH of a "
                                  "snapshot (--resume alone means auto)")
        elif not has_value:  # --key value
            if i >= len(argv) or argv[i].startswith("--"):
                raise ConfigError(f"--{key} needs a value, e.g. --{key}=VALUE")
            value, i = argv[i], i + 1
        written = arg if has_value or key in ("debug", "no_wandb", "resume") else f"{arg} {value}"
        if key in given:
            both = f" ({given[key]}, then {written})" if given[key] != written else ""
            raise ConfigError(f"--{key} is given more than once{both}; give it once")
        given[key] = written
        if key in ("debug", "no_wandb"):
            setattr(cli, key, True)
        elif key == "resume":
            cli.resume = value or "auto"
        elif key == "config_name":
            if not value:
                raise ConfigError(f"--config_name is empty; name a config, or leave --config_name out for "
                                  f"{cli.config_name}")
            cli.config_name = value
        else:
            cli.overrides[key] = value  # an empty value is refused once the key is known (build_config)
    return cli


def parse_value(name: str, kind: type, text: str):
    """Typed value of one --key=value override, or ConfigError saying what was expected."""
    if kind is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"--{name} expects true or false, got {text!r}")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"--{name} expects an integer, got {text!r}") from None
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"--{name} expects a number, got {text!r}") from None
        if not math.isfinite(value):
            raise ConfigError(f"--{name} must be a finite number, got {text!r}")
        return value
    return text


def build_config(cli: CommandLine) -> BaseRLConfig:
    """Config class defaults, then --debug presets, then explicit overrides; validated and resolved."""
    cls = get_config_class(cli.config_name)
    kinds = {f.name: field_type(f) for f in fields(cls)}
    values = dict(cls.DEBUG_OVERRIDES) if cli.debug else {}
    for key, text in cli.overrides.items():
        if key not in kinds:
            close = difflib.get_close_matches(key, list(kinds) + list(FLAGS), n=1)
            hint = f"did you mean --{close[0]}? " if close else ""
            raise ConfigError(f"unknown option --{key}; {hint}(--help lists every option)")
        if not text:  # even where the field's default is empty (out_dir): an unset shell variable, most likely
            raise ConfigError(f"--{key} is empty; give it a value, or leave --{key} out for its default")
        values[key] = parse_value(key, kinds[key], text)
    unused = next((key for key in ("wandb_project", "wandb_run_name") if cli.no_wandb and key in cli.overrides), None)
    if unused:  # every setting matters or is refused (configs/base.py); these two only the flag can turn off
        raise ConfigError(f"--{unused} has no effect with --no_wandb (metrics go to out_dir/metrics.jsonl only); "
                          f"drop one of them")
    return cls(**values).get_args_ready(debug=cli.debug)


USAGE = ("usage: python rl/rl_ddp.py [--config_name NAME] [--debug] [--no_wandb] [--resume[=auto|never|PATH]] "
         "[--KEY=VALUE ...] [--help]")


def field_help(cls: type) -> list:
    """[(field, its default in cls, the reason of the class that introduced it, (preset, its own reason)
    or None)] for every field of cls. The introducing class's docstring (a group's, beside the code that
    reads the field) carries the allowed values and the range; a preset's says why it chose its value,
    which would otherwise hide them."""
    docs = {klass: field_docs(klass) for klass in cls.__mro__ if is_dataclass(klass)}
    rows = []
    for f in fields(cls):
        owners = [klass for klass in docs if f.name in inspect.get_annotations(klass)]  # most derived first
        setter, introducer = owners[0], owners[-1]
        reason = docs[setter].get(f.name, "")
        # a preset's own reason: one that differs from what it inherits (field_docs merges, subclass wins)
        # (a part of presets, not one itself, such as configs/gpu.py's OnOneGPU, is named by the preset it is in)
        name = setter.__name__ if issubclass(setter, BaseRLConfig) else cls.__name__
        own = (name, reason) if len(owners) > 1 and reason != docs[owners[1]].get(f.name, "") else None
        rows.append((f.name, getattr(cls, f.name), docs[introducer].get(f.name, ""), own))
    return rows


def print_help(cli: CommandLine):
    """Usage, the flags, then every field of the chosen config: --name=default, the base's reason and
    range, the preset's own reason when it overrides the field, and what a None default stands for."""
    cls = get_config_class(cli.config_name)  # an unknown name is bad input like any other (exit 2)
    try:  # None in an algorithm-table setting takes rl_algorithm's row, resolved as get_args_ready does
        row = resolve(cls.rl_algorithm, {k: getattr(cls, k) for k in ALGORITHM_FIELDS}, cls.rl_rollout_size,
                      cls.kl_estimator)
    except ValueError:  # a preset with a bad algorithm: its own run says so; help still prints
        row = {}
    print(USAGE + "\n")
    print(__doc__.strip().split("\n\n")[1])
    print(f"\nfields of {cls.__name__} (--KEY=VALUE, default shown; under it the reason and range, then a "
          f"preset's own reason):")
    one_line = lambda text: " ".join(text.split())  # docstrings wrap in the source; one line each greps whole
    for name, default, reason, own in field_help(cls):
        resolved = f"  ({cls.rl_algorithm}: {row[name]})" if default is None and name in row else ""
        print(f"  --{name}={default!r}{resolved}\n      {one_line(reason)}")
        if own:
            print(f"      {own[0]}: {one_line(own[1])}")
        if default is None and name in ALGORITHM_FIELDS:
            print("      None: rl_algorithm's value, from its row of the algorithm table (rl/algorithms.py)")
