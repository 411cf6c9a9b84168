"""The project's error types, in one leaf module: it imports nothing of the project and no torch, so a
module that only raises or catches one of them (a file lock, the command line) stays light.

    ConfigError         bad input: a setting, a file or the environment (one line, exit 2)
    TrainingError       the run cannot go on, numbers blew up (one line, exit 1)
    SnapshotWriteError  a snapshot could not be written, on every rank (one line, exit 2)
    WriteError          a run-folder file could not be written; its previous version is intact
    MetricsError        metrics.jsonl is damaged where no crash damages it

Each is also importable from where it was first defined (configs.base, rl.evaluate and
rl.math_trainer, rl.snapshot, rl.run_dir), which re-export it.
"""


class ConfigError(ValueError):
    """A setting is invalid; the message is one line that says what is wrong and how to fix it."""


class TrainingError(RuntimeError):
    """The run cannot go on (numbers blew up); the message says why and what to try."""


class SnapshotWriteError(RuntimeError):
    """A file of the run folder could not be written (a full disk, say); the message is one line
    saying what is intact and what to do. Raised on every rank, so all stop together."""


class WriteError(OSError):
    """A file of the run folder could not be written (a full disk, say); its previous version is intact."""


class MetricsError(ValueError):
    """metrics.jsonl is damaged where no crash can damage it (not its last line)."""
