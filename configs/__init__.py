"""Config classes, found by name: any BaseRLConfig subclass in any module of this folder.

Adding a task is dropping in one file with one subclass; there is no registry to edit. A file
that fails to import (a draft with a syntax error, a missing import) is skipped, so it breaks
only the configs it defines: asking for one of those names the file and the first line of why.
"""

import difflib
import importlib
import os
import pkgutil
import traceback

from configs.base import BaseRLConfig
from rl.errors import ConfigError

# not a module of presets: the command line, which imports this package back (scanning it would loop)
NOT_SCANNED = ("cli",)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scan_configs() -> tuple:
    """({class name: class} for every config class defined in a module under configs/,
    {file: its source and why it failed to import} for every module that raised on import)."""
    found, broken = {}, {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in NOT_SCANNED:
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}")
        except Exception as e:  # noqa: BLE001  (any error of a user's file; Ctrl-C still stops the scan)
            spec = info.module_finder.find_spec(f"{__name__}.{info.name}")
            path = spec.origin if spec and spec.origin else os.path.join(info.module_finder.path, info.name)
            broken[path] = _failure(e, path)
            continue
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseRLConfig) and obj.__module__ == module.__name__:
                found[obj.__name__] = obj
    return found, broken


def all_config_classes() -> dict:
    """{class name: class} for every config class defined in a module under configs/ that imports."""
    return scan_configs()[0]


def _failure(e: Exception, path: str) -> str:
    """'NameError: name 'dataclass' is not defined, line 1': the error's first line and the line of
    `path` it came from (for an error raised deeper, the line of `path` that led there)."""
    first = (str(e).strip().splitlines() or [""])[0]
    if isinstance(e, SyntaxError) and e.filename and os.path.abspath(e.filename) == os.path.abspath(path):
        first, line = e.msg, e.lineno  # (its str repeats the file and line, said once here as for the rest)
    else:
        here = [frame.lineno for frame in traceback.extract_tb(e.__traceback__)
                if os.path.abspath(frame.filename) == os.path.abspath(path)]
        line = here[-1] if here else None
    return f"{type(e).__name__}: {first}" + (f", line {line}" if line else "")


def _shown(path: str) -> str:
    """A file as the user knows it: configs/subtractor.py, or the whole path outside the repository."""
    relative = os.path.relpath(path, REPO)
    return path if relative.startswith("..") else relative


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def get_config_class(name: str) -> type:
    classes, broken = scan_configs()
    if name not in classes:
        # A broken file whose text names the class may be where it lives; others cannot hold it, and an
        # unrelated draft should not be blamed for a typo.
        suspects = [f"{_shown(path)} failed to import ({why})" for path, why in sorted(broken.items())
                    if name in _read(path)]
        if suspects:
            them = "it" if len(suspects) == 1 else "them"
            raise ConfigError(f"unknown config {name!r}; {', '.join(suspects)}: fix {them}; "
                              f"known configs: {', '.join(sorted(classes))}")
        close = difflib.get_close_matches(name, classes, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"unknown config {name!r}; {hint}known configs: {', '.join(sorted(classes))}")
    return classes[name]
