"""Snapshot files: atomic writing, safe loading, which one to resume from, saving a step, and
building a model from one.

A snapshot is one dict of plain types and tensors that loads with `weights_only=True`, so a file
from elsewhere cannot run code. It carries `model_args`, so it can rebuild its own model: the one
`load_snapshot` + `model_from_snapshot` pair serves resume, evaluation and sampling alike. Where the
files live, and their names, is rl/run_dir.py's.
"""

import os

import torch

from configs.base import BaseRLConfig, ConfigError
from model.gpt import GPT, GPTConfig
from rl import dist
from rl.dist import print0
from rl.run_dir import prune_snapshots, snapshot_path, snapshot_steps


class SnapshotWriteError(RuntimeError):
    """A snapshot could not be written (a full disk, say); the previous one is intact."""


def save_atomic(obj: dict, path: str):
    """Write to a temporary file beside `path`, fsync, then rename over it: a crash mid-write
    leaves the previous file intact, never a truncated one."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_snapshot(path: str) -> dict:
    """Load a snapshot or warm-start file on the CPU; ConfigError (one line) if it is not one."""
    if not os.path.isfile(path):
        raise ConfigError(f"snapshot {path} does not exist")
    try:
        snap = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a torch file, or holding objects we refuse to unpickle
        reason = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
        raise ConfigError(f"snapshot {path} is unreadable ({reason})") from None
    if not isinstance(snap, dict) or "model" not in snap or "model_args" not in snap:
        raise ConfigError(f"{path} is not a MathRL snapshot (no model and model_args in it)")
    return snap


def newest_valid_snapshot(out_dir: str):
    """(snapshot, path) of the newest snapshot in out_dir that loads, or (None, None) if none does.
    An unreadable newer one (truncated by a full disk, say) is skipped with a one-line warning."""
    for _, path in reversed(snapshot_steps(out_dir)):
        try:
            return load_snapshot(path), path
        except ConfigError as e:
            print0(f"warning: {e}; falling back to the previous snapshot")
    return None, None


def find_resume(resume: str, config: BaseRLConfig):
    """(snapshot dict, path) to continue from, or (None, None) to start over. resume: 'auto' (the
    newest snapshot in out_dir, if any), 'never', or a path."""
    if resume == "never" and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)) > 0:
        resume = "auto"  # torchrun restarted us after a failure: continue, whatever the first start said
    if resume == "never":
        return None, None
    if resume == "auto":
        snap, path = newest_valid_snapshot(config.out_dir)
        if snap is None:
            return None, None
    else:
        path = resume
        if not os.path.isfile(path):
            raise ConfigError(f"--resume={path}: no such file (use --resume=never to start over)")
        try:
            snap = load_snapshot(path)
        except ConfigError as e:
            raise ConfigError(f"--resume: {e}; pass another file or --resume=never") from None
    if snap.get("kind") != "rl_snapshot":
        raise ConfigError(f"--resume={path} is not an RL snapshot; to start RL from its weights use --init_from={path}")
    check_compatible(snap, path, config.model_args(), config.task_args())
    return snap, path


def check_init_from(config: BaseRLConfig):
    """Refuse, before start, an init_from file that is missing, unreadable, not a snapshot, or of
    another model or task (the same one-line errors as --resume)."""
    if config.init_from in ("sft", "scratch"):
        return
    try:
        snap = load_snapshot(config.init_from)
    except ConfigError as e:
        raise ConfigError(f"--init_from: {e}; pass another file, or --init_from=sft") from None
    check_compatible(snap, config.init_from, config.model_args(), config.task_args())


def save_step(trainer, extra: dict, keep: int, info: dist.DistInfo) -> str:
    """Rank 0 writes the trainer's state (plus `extra`) as out_dir/rl_snapshot_{step}.pt and prunes
    to the newest `keep`; every rank learns whether that worked, so a full disk stops all of them."""
    out_dir = trainer.config.out_dir
    path, failure = snapshot_path(out_dir, trainer.step), None
    if info.is_main:
        if not trainer.weights_are_finite():
            failure = "the weights are not finite; refusing to save them"
        else:
            try:
                save_atomic({**trainer.state_dict(), **extra}, path)
                prune_snapshots(out_dir, keep)
            except OSError as e:
                failure = (f"could not write {path} ({e.strerror or e}); the previous snapshot is intact: "
                           f"free some space and run the same command to continue")
    if dist.any_rank(failure is not None, info.device):
        raise SnapshotWriteError(failure or "rank 0 could not write a snapshot")
    return path


def check_compatible(snap: dict, path: str, model_args: dict, task: dict):
    """One line naming both shapes (or tasks) when a snapshot does not fit the config."""
    def shape(args):
        return ", ".join(f"{k}={args.get(k)}" for k in ("n_layer", "n_head", "n_embed", "n_position", "vocab_size"))
    if snap["model_args"] != model_args:
        raise ConfigError(f"{path} holds a model of {shape(snap['model_args'])} but the config asks for "
                          f"{shape(model_args)}; use a matching config or --resume=never")
    theirs = snap.get("task")
    if theirs is None:
        raise ConfigError(f"{path} does not say which task it was trained on; it cannot be checked against "
                          f"task {task}, so it is refused")
    if theirs != task:
        raise ConfigError(f"{path} was trained on task {theirs} but the config is task {task}; "
                          f"use a matching config or --resume=never")


def model_from_snapshot(snap: dict) -> GPT:
    model = GPT(GPTConfig(**snap["model_args"]))
    model.load_state_dict(snap["model"])
    return model
