"""The run folder: every file a run writes in out_dir is named here and nowhere else, with what lists,
prunes, truncates and reads them (for the entry script, the tools and the tests alike).

    out_dir/rl_snapshot_{step}.pt   RL state every save_interval steps (MathRLTrainer.state_dict)
    out_dir/warm_start.pt           the supervised warm start, reused while its settings match
    out_dir/warm_start_progress.pt  a warm start in progress, continued by the same command
    out_dir/metrics.jsonl           one JSON line of metrics per logged step
    out_dir/config.json             the resolved config, written when RL starts
    out_dir/summary.json            the run's result, written at its end
    out_dir/run.log                 the console, when a tool launches the run
    out_dir/.lock.rank<r>           rank r's lock, held for the whole run (rl/run_control.py)
"""

import json
import os
import re

SNAPSHOT_RE = re.compile(r"^rl_snapshot_(\d+)\.pt$")


def snapshot_path(out_dir: str, step: int) -> str:
    return os.path.join(out_dir, f"rl_snapshot_{step}.pt")


def warm_start_path(out_dir: str) -> str:
    return os.path.join(out_dir, "warm_start.pt")


def progress_path(out_dir: str) -> str:
    return os.path.join(out_dir, "warm_start_progress.pt")


def metrics_path(out_dir: str) -> str:
    return os.path.join(out_dir, "metrics.jsonl")


def config_path(out_dir: str) -> str:
    return os.path.join(out_dir, "config.json")


def summary_path(out_dir: str) -> str:
    return os.path.join(out_dir, "summary.json")


def log_path(out_dir: str) -> str:
    return os.path.join(out_dir, "run.log")


def lock_path(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f".lock.rank{rank}")


# ---- snapshots ------------------------------------------------------------------------------------
def snapshot_steps(out_dir: str) -> list:
    """[(step, path)] of the RL snapshots in out_dir, oldest first (by step: 9 before 10)."""
    if not os.path.isdir(out_dir):
        return []
    found = [(int(m.group(1)), os.path.join(out_dir, name))
             for name in os.listdir(out_dir) if (m := SNAPSHOT_RE.match(name))]
    return sorted(found)


def prune_snapshots(out_dir: str, keep: int):
    """Delete all but the newest `keep` snapshots; called only after a new one is complete."""
    for _, path in snapshot_steps(out_dir)[:-keep]:
        os.remove(path)


def remove_snapshots(out_dir: str) -> int:
    """A fresh run replaces the old one's snapshots (the cached warm start stays); returns how many."""
    old = snapshot_steps(out_dir)
    for _, path in old:
        os.remove(path)
    return len(old)


# ---- metrics and results ----------------------------------------------------------------------------
def read_metrics(out_dir: str) -> list:
    """Every logged line of out_dir/metrics.jsonl, as dicts, in order ([] before the first)."""
    path = metrics_path(out_dir)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


def truncate_metrics(out_dir: str, step: int = -1):
    """Drop the lines logged after `step` (a resumed run redoes them); the default, -1, drops them
    all (a run that starts over)."""
    path = metrics_path(out_dir)
    if os.path.exists(path):
        with open(path) as f:
            kept = [line for line in f if json.loads(line)["step"] <= step]
        with open(path, "w") as f:
            f.writelines(kept)


def read_summary(out_dir: str) -> dict:
    with open(summary_path(out_dir)) as f:
        return json.load(f)


def read_config(out_dir: str) -> dict:
    with open(config_path(out_dir)) as f:
        return json.load(f)


def write_json(path: str, obj: dict):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
