"""Config classes, found by name: any BaseRLConfig subclass in any module of this folder.

Adding a task is dropping in one file with one subclass; there is no registry to edit.
"""

import difflib
import importlib
import pkgutil

from configs.base import BaseRLConfig
from rl.errors import ConfigError

# not a module of presets: the command line, which imports this package back (scanning it would loop)
NOT_SCANNED = ("cli",)


def all_config_classes() -> dict:
    """{class name: class} for every config class defined in a module under configs/."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in NOT_SCANNED:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseRLConfig) and obj.__module__ == module.__name__:
                found[obj.__name__] = obj
    return found


def get_config_class(name: str) -> type:
    classes = all_config_classes()
    if name not in classes:
        close = difflib.get_close_matches(name, classes, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"unknown config {name!r}; {hint}known configs: {', '.join(sorted(classes))}")
    return classes[name]
