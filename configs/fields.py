"""What every setting has, whichever group defines it: a type, a one-line reason and, for a number, a range.

A group of settings (TaskSettings in rl/math_env.py, ModelSettings in model/gpt.py, ...) is a dataclass in
the module that reads it, each field followed by a one-line docstring. A numeric field's range ends that
docstring, "(> 0)", "(>= 0)", "(in [0, 1])" or "(in [0, 1))", and is checked from there (`field_ranges`,
`check_fields`), so each range is written once, beside its field; each group checks the rest itself.
"""

import ast
import functools
import inspect
import math
import numbers
import re
from dataclasses import fields, is_dataclass
from typing import Union, get_args, get_origin

from rl.algorithms import ALGORITHM_FIELDS
from rl.errors import ConfigError

RANGE_MARK = re.compile(r"\((> 0|>= 0|in \[0, 1\]|in \[0, 1\))\)$")
# Upper bounds of integer settings: torch and numpy hold sizes, counts and indices in int64, so a larger
# value fails deep in a run (a batch of 2**63 problems: "Maximum allowed dimension exceeded"). The seed
# goes to torch.manual_seed, which takes up to 2**64 - 1 (numpy's SeedSequence takes any size).
# Tighter bounds have owners: ndigit (1 to 9, the environment), the derived fields (0), ppo_minibatches
# (the rows of a step: ObjectiveSettings.check_minibatch_rows), rl_ga_steps (divides them),
# sft_worked_examples (the train split's pairs).
INT_MAX = {"seed": (2 ** 64 - 1, "2**64 - 1", "the seeds torch.manual_seed takes")}
INT64 = (2 ** 63 - 1, "2**63 - 1", "torch and numpy hold sizes and counts in 64-bit integers")
BOUNDED_BY_OWNER = ("ndigit", "vocab_size", "max_seq_len")


def field_type(f) -> type:
    """int, float, bool or str: the type of a field, seen through Optional[...]."""
    if get_origin(f.type) is Union:
        return next(t for t in get_args(f.type) if t is not type(None))
    return f.type


@functools.lru_cache(maxsize=None)
def own_docs(klass: type) -> dict:
    """{field: its one-line docstring} of the fields written in klass's own body (read once a class: finding a
    class's source parses its module, 20-30 ms, and --help asks for every class of a preset's line many times).
    The caller must not change the dict."""
    if not is_dataclass(klass):
        return {}
    docs, body = {}, ast.parse(inspect.getsource(klass)).body[0].body
    for stmt, nxt in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant)):
            docs[stmt.target.id] = str(nxt.value.value).strip()
    return docs


def field_docs(cls: type) -> dict:
    """{field: its one-line docstring} over cls and the classes it derives from (a preset's docs win)."""
    docs = {}
    for klass in reversed(cls.__mro__):
        docs.update(own_docs(klass))
    return docs


@functools.lru_cache(maxsize=None)
def field_ranges(cls: type) -> dict:
    """{field: "> 0" | ">= 0" | "in [0, 1]" | "in [0, 1)"}, each read from the docstring of the group that
    defines the field (a preset's reason may repeat the range; it never sets one)."""
    seen, ranges = set(), {}
    for klass in reversed(cls.__mro__):
        for name, doc in own_docs(klass).items():
            if name not in seen and (m := RANGE_MARK.search(doc)):
                ranges[name] = m.group(1)
            seen.add(name)
    return ranges


def check_fields(config):
    """ConfigError (one line) for a value of the wrong type, outside the range its docstring states, or
    past what an int64 holds. (The command line types every value; a config built in Python may not.)"""
    for f in fields(config):
        value, kind = getattr(config, f.name), field_type(f)
        if kind is float and value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
            raise ConfigError(f"{f.name} must be a finite number, got {value!r}")
        if kind is int and value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
            raise ConfigError(f"{f.name} must be an integer, got {value!r}")
        if kind is bool and value is not None and not isinstance(value, bool):
            raise ConfigError(f"{f.name} must be true or false, got {value!r}")
    ranges = field_ranges(type(config))
    for key, kind in ranges.items():
        value = getattr(config, key)
        if value is None:  # (an algorithm-row setting left to the algorithm: the table's value is in range)
            continue
        if kind == "> 0" and value <= 0:
            raise ConfigError(f"{key} must be positive, got {value}")
        if kind == ">= 0" and value < 0:
            raise ConfigError(f"{key} must be zero or positive, got {value}")
        if kind.startswith("in") and (not 0.0 <= value <= 1.0 or (value == 1.0 and kind.endswith(")"))):
            raise ConfigError(f"{key} must be {kind}, got {value}")
    for f in fields(config):
        value = getattr(config, f.name)
        if field_type(f) is not int or value is None or f.name in BOUNDED_BY_OWNER:
            continue
        top, top_text, why = INT_MAX.get(f.name, INT64)
        if value > top:
            low = 1 if ranges.get(f.name) == "> 0" or f.name in ALGORITHM_FIELDS else 0
            raise ConfigError(f"{f.name}={value} is outside [{low}, {top_text}] ({why}); use a value in that range")
