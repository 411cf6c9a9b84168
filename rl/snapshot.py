"""Snapshot files: atomic writing, safe loading, which one to resume from and what a resume may
change, saving a step, and building a model from one.

A snapshot is one dict of plain types and tensors that loads with `weights_only=True`, so a file
from elsewhere cannot run code. It carries `model_args`, so it can rebuild its own model: the one
`load_snapshot` + `model_from_snapshot` pair serves resume, evaluation and sampling alike. Where the
files live, their names, and the folder's crash-consistency invariants are rl/run_dir.py's. A
`config` here is the resolved BaseRLConfig (configs/base.py), read only through its fields and its
model_args(), task_args() and portable_dict(), so this file needs no import of the configs.

Every way a file can be bad (missing, empty, truncated, not a torch file, holding code, of another
kind, of another model or task, with tensors missing, misshapen or not finite) is a ConfigError of one line,
and `newest_valid_snapshot` falls back past each such file to an older snapshot.
"""

import os
import pickle
from dataclasses import dataclass, field
from typing import Optional

import torch

from model.gpt import GPT, GPTConfig
from rl import dist
from rl.dist import print0
from rl.errors import ConfigError, SnapshotWriteError, WriteError  # noqa: F401 (re-exported here)
from rl.run_dir import prune_snapshots, snapshot_path, snapshot_steps, write_atomic, write_reason

# What a resumed run may change: each shapes only the steps from the resumed one on (the schedule is
# recomputed from the config at every load: rl/update.py), and a change is recorded in config.json and
# in later snapshots under "changed_on_resume". Any other setting shaped the run's past (its task, model,
# algorithm, batches, seed, warm start), so a change to it is refused, never silently kept or dropped.
RESUMABLE = ("learning_rate", "critic_learning_rate", "min_lr_ratio", "warmup_steps", "rl_train_steps",
             "eval_interval", "save_interval", "keep_snapshots", "max_bad_steps", "log_interval", "eval_batch_size",
             "num_eval", "num_mistakes", "device", "backend", "wandb_project", "wandb_run_name", "out_dir",
             "precision", "cuda_graphs", "matmul_attention", "compile", "sft_cuda_graphs", "rl_cuda_graphs",
             "prefix_sharing", "rl_target_accuracy", "rl_target_evals")
# what a snapshot of RL holds beside the model (MathRLTrainer.state_dict); checked before anything is loaded
RL_KEYS = ("optimizer", "scheduler", "baseline", "step", "bad_steps_in_a_row", "num_skipped_steps", "problem_sampler",
           "config")


def save_atomic(obj: dict, path: str):
    """torch.save through run_dir.write_atomic: the previous file survives any failure (WriteError)."""
    write_atomic(path, lambda f: torch.save(obj, f))


def save_on_main(write, path: str, intact: str, info: dist.DistInfo):
    """Rank 0 calls write(); every rank learns whether it worked, and all raise SnapshotWriteError
    (one line naming the file, the reason and what is intact) if it did not."""
    failure = None
    if info.is_main:
        try:
            write()
        except OSError as e:  # WriteError, or a move or copy of rl/run_dir.py's that the disk refused
            failure = (f"could not write {path} ({write_reason(e)}); {intact}: free some space and run the same "
                       f"command to continue")
    if dist.any_rank(failure is not None, info.device):
        raise SnapshotWriteError(failure or f"rank 0 could not write {path}")


# ---- loading ---------------------------------------------------------------------------------------
def unreadable_reason(path: str, e: BaseException) -> str:
    """Why torch.load refused a file, in a few words (its own messages run to paragraphs, or are empty)."""
    if os.path.getsize(path) == 0:
        return "the file is empty"
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        return "not a file written by torch.save"
    if isinstance(e, pickle.UnpicklingError) and "weights only load failed" in str(e).lower():
        return "it holds code or objects other than tensors and plain types, which are refused"
    first = (str(e).strip().splitlines() or [""])[0][:80]
    return f"truncated or damaged: {type(e).__name__}{': ' + first if first else ''}"


def load_snapshot(path: str) -> dict:
    """Load a snapshot or warm-start file on the CPU; ConfigError (one line) if it is not one."""
    if not os.path.isfile(path):
        raise ConfigError(f"snapshot {path} does not exist")
    try:
        snap = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a torch file, or holding objects we refuse to unpickle
        raise ConfigError(f"snapshot {path} is unreadable ({unreadable_reason(path, e)})") from None
    if not isinstance(snap, dict) or not isinstance(snap.get("model"), dict) or not isinstance(
            snap.get("model_args"), dict):
        raise ConfigError(f"{path} is not a MathRL snapshot (no model and model_args in it)")
    check_weights(snap, path)
    return snap


def check_weights(snap: dict, path: str):
    """ConfigError unless snap["model"] holds exactly the tensors, of the shapes, that a GPT of
    snap["model_args"] has (checked on the meta device: no memory, no time), all finite."""
    try:
        with torch.device("meta"):
            expected = GPT(GPTConfig(**snap["model_args"])).state_dict()
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{path} has model_args no GPT takes ({e})") from None
    weights = snap["model"]
    missing = [k for k in expected if k not in weights]
    extra = [k for k in weights if k not in expected]
    shapes = [k for k in expected if k in weights and (not torch.is_tensor(weights[k])
                                                        or weights[k].shape != expected[k].shape)]
    for what, names in (("lacks", missing), ("has unexpected", extra), ("has misshapen", shapes)):
        if names:
            raise ConfigError(f"{path} {what} weights ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) "
                              f"for its model_args; it is damaged or not a MathRL snapshot")
    broken = [k for k in expected if weights[k].is_floating_point() and not torch.isfinite(weights[k]).all()]
    if broken:  # (this project never saves such weights: rl/snapshot.py save_step, rl/warm_start.py)
        raise ConfigError(f"{path} holds non-finite weights ({', '.join(broken[:3])}); it cannot be started from")


def check_rl_snapshot(snap: dict, path: str):
    """ConfigError unless snap is an RL snapshot with everything a resume loads."""
    if snap.get("kind") != "rl_snapshot":
        raise ConfigError(f"{path} is not an RL snapshot ({snap.get('kind', 'no kind')}); to start RL from its "
                          f"weights use --init_from={path}")
    missing = [k for k in RL_KEYS if k not in snap]
    if missing or not isinstance(snap["step"], int) or snap["step"] < 0:
        raise ConfigError(f"{path} is an RL snapshot without {', '.join(missing) or 'a valid step'}; "
                          f"it is damaged or from another version")


def newest_valid_snapshot(out_dir: str):
    """(snapshot, path, [unusable newer paths]) of the newest RL snapshot in out_dir that loads, or
    (None, None, [every path]) if none does. Each unusable one is skipped with a one-line warning."""
    found = snapshot_steps(out_dir)
    for i in range(len(found) - 1, -1, -1):
        path = found[i][1]
        try:
            snap = load_snapshot(path)
            check_rl_snapshot(snap, path)
            return snap, path, [p for _, p in found[i + 1:]]
        except ConfigError as e:
            print0(f"warning: {e}; " + ("falling back to the previous snapshot" if i else "no older snapshot is left"))
    return None, None, [p for _, p in found]


# ---- where a run starts --------------------------------------------------------------------------------
@dataclass
class Resume:
    """Where RL continues from: the snapshot (None: start over) and what continuing from it needs."""
    snap: Optional[dict] = None
    path: Optional[str] = None
    later: list = field(default_factory=list)  # snapshots of another future, set aside before continuing
    elsewhere: bool = False  # the snapshot is not this folder's: its metrics and snapshots are another history
    changes: dict = field(default_factory=dict)  # setting -> (the snapshot's value, this run's): applied

    @property
    def step(self) -> int:
        return self.snap["step"] if self.snap is not None else 0


def find_resume(resume: str, config) -> Resume:
    """Where to continue from (read-only: what it finds is acted on only once every check passed).
    resume: 'auto' (the newest readable snapshot in out_dir, if any), 'never', or a path."""
    if resume == "never" and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)) > 0:
        resume = "auto"  # torchrun restarted us after a failure: continue, whatever the first start said
    if resume == "never":
        return Resume()
    out_dir = config.out_dir
    if resume == "auto":
        snap, path, later = newest_valid_snapshot(out_dir)
        if snap is None:
            if later:  # snapshots are there, and none can be read: never start over by ourselves
                raise ConfigError(f"none of the {len(later)} snapshot(s) in {out_dir} can be read (see the warnings "
                                  f"above) and nothing was changed; pass --resume=never to start over (it deletes "
                                  f"them), or --resume=PATH to continue from another file")
            return Resume()
        elsewhere = False
    else:
        path = resume
        if not os.path.isfile(path):
            raise ConfigError(f"--resume={path}: no such file (use --resume=never to start over)")
        try:
            snap = load_snapshot(path)
            check_rl_snapshot(snap, path)
        except ConfigError as e:
            raise ConfigError(f"--resume: {e}; pass another file or --resume=never") from None
        elsewhere = not os.path.isdir(out_dir) or not os.path.samefile(os.path.dirname(os.path.abspath(path)), out_dir)
        # another folder's snapshot starts another history here: all of this folder's snapshots make way
        later = [p for step, p in snapshot_steps(out_dir) if elsewhere or step > snap["step"]]
    check_compatible(snap, path, config.model_args(), config.task_args())
    return Resume(snap, path, later, elsewhere, changed_settings(snap, path, config))


def changed_settings(snap: dict, path: str, config) -> dict:
    """{setting: (the snapshot's value, this run's)} of the RESUMABLE settings that differ; ConfigError
    (one line naming it) for any other setting that differs, or a run already past rl_train_steps."""
    theirs, ours = snap["config"], config.portable_dict()
    changes = {}
    for name, value in ours.items():
        if name not in theirs or theirs[name] == value:  # (a snapshot older than the setting has no value)
            continue
        if name not in RESUMABLE:
            raise ConfigError(f"{name}={value!r}, but {path} was made with {name}={theirs[name]!r}, and a resumed "
                              f"run cannot change what shaped its past; use {name}={theirs[name]!r}, or "
                              f"--resume=never to start over with it")
        changes[name] = (theirs[name], value)
    if config.rl_train_steps < snap["step"]:
        raise ConfigError(f"rl_train_steps={config.rl_train_steps}, but {path} is already at step {snap['step']}; "
                          f"pass rl_train_steps >= {snap['step']}, or --resume=<an earlier snapshot>")
    return changes


def check_init_from(config):
    """Refuse, before start, an init_from file that is missing, unreadable, not a snapshot, or of
    another model or task (the same one-line errors as --resume)."""
    if config.init_from in ("sft", "scratch"):
        return
    try:
        snap = load_snapshot(config.init_from)
    except ConfigError as e:
        raise ConfigError(f"--init_from: {e}; pass another file, or --init_from=sft") from None
    check_compatible(snap, config.init_from, config.model_args(), config.task_args(), INIT_FIX)


# ---- saving --------------------------------------------------------------------------------------------
def save_step(trainer, extra: dict, keep: int, info: dist.DistInfo) -> str:
    """Rank 0 writes the trainer's state (plus `extra`) as out_dir/rl_snapshot_{step}.pt and prunes
    to the newest `keep`; every rank learns whether that worked, so a full disk stops all of them."""
    out_dir = trainer.config.out_dir
    path = snapshot_path(out_dir, trainer.step)
    finite = trainer.weights_are_finite() if info.is_main else True
    if dist.any_rank(not finite, info.device):
        raise SnapshotWriteError(f"the weights are not finite at step {trainer.step}; refusing to save them "
                                 f"(the previous snapshot is intact)")

    def write():
        save_atomic({**trainer.state_dict(), **extra}, path)
        prune_snapshots(out_dir, keep)
    save_on_main(write, path, "the previous snapshot is intact", info)
    return path


RESUME_FIX = "use a matching config or --resume=never"
INIT_FIX = "use a matching config, or --init_from=sft"  # (--resume=never would refuse the same file again)


def check_compatible(snap: dict, path: str, model_args: dict, task: dict, fix: str = RESUME_FIX):
    """One line naming both shapes (or tasks) when a snapshot does not fit the config, and the fix (resumed or
    started from: fix)."""
    shown = ["n_layer", "n_head", "n_embed", "n_position", "vocab_size"]  # and whatever else differs (dropout, say)
    shown += sorted(k for k in {*snap["model_args"], *model_args} - set(shown)
                    if snap["model_args"].get(k) != model_args.get(k))

    def shape(args):
        return ", ".join(f"{k}={args.get(k)}" for k in shown)
    if snap["model_args"] != model_args:
        raise ConfigError(f"{path} holds a model of {shape(snap['model_args'])} but the config asks for "
                          f"{shape(model_args)}; {fix}")
    theirs = snap.get("task")
    if theirs is None:
        raise ConfigError(f"{path} does not say which task it was trained on; it cannot be checked against "
                          f"task {task}, so it is refused")
    if theirs != task:
        raise ConfigError(f"{path} was trained on task {theirs} but the config is task {task}; {fix}")


def model_from_snapshot(snap: dict) -> GPT:
    model = GPT(GPTConfig(**snap["model_args"]))
    model.load_state_dict(snap["model"])
    return model
