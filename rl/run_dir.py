"""The run folder: every file a run writes in out_dir is named here and nowhere else, with what
writes, lists, prunes, sets aside, truncates and reads them (for the entry script, the tools and
the tests alike).

    out_dir/rl_snapshot_{step}.pt   RL state every save_interval steps (MathRLTrainer.state_dict)
    out_dir/warm_start.pt           the supervised warm start, reused while its settings match
    out_dir/warm_start_progress.pt  a warm start in progress, continued by the same command
    out_dir/warm_start_padded.pt    its padded phase (sft_pad_ndigits), which RL then starts from
    out_dir/metrics.jsonl           one JSON line of metrics per logged step
    out_dir/config.json             the resolved config, written when RL starts
    out_dir/summary.json            the run's result, written at its end
    out_dir/run.log                 the console, when a tool launches the run
    out_dir/.lock.rank<r>           rank r's lock, held for the whole run (rl/run_control.py)
    out_dir/set_aside/<when>-step<s>/  what a resume from step s took out of the way (below)

Crash consistency: whenever the process dies (kill -9, a full disk, a power cut), the folder holds
one consistent history, and the same command continues it. The invariants, each tested
(tests/test_run_dir.py, tests/test_resume.py):
  1. Every file but metrics.jsonl is replaced atomically (`write_atomic`: a temporary file beside
     it, fsynced, renamed over it): a reader sees the old file or the new one, never a mix. A
     temporary left by a killed writer is never read, and is removed at the next start.
  2. metrics.jsonl is only appended to, one line per write, so a kill can leave at most a torn
     last line; reading drops it and says so in one line. Dropping lines is itself an atomic
     rewrite, so no kill loses the lines kept.
  3. Nothing is deleted before its replacement is on disk: a snapshot is pruned only once a newer
     one is complete; the warm start's progress is removed only once the warm start is saved.
  4. Starting over deletes only when the user asked for it (--resume=never), and only after every
     check of what the run will start from has passed. A folder whose snapshots cannot be read is
     never started over by itself: the run refuses, with one line saying how.
  5. Resuming from a snapshot at step s sets aside everything of another future: the snapshots
     after s (an earlier snapshot given to --resume, or unreadable newer ones) and a copy of the
     metrics with the lines after s move to out_dir/set_aside/, so no later run can resume from
     them and nothing is lost; only then are the metrics after s dropped.
"""

import json
import os
import re
import shutil
import time

from rl.errors import MetricsError, WriteError  # (re-exported: from rl.run_dir import WriteError keeps working)

SNAPSHOT_RE = re.compile(r"^rl_snapshot_(\d+)\.pt$")
TMP_RE = re.compile(r"\.tmp\.\d+$")  # write_atomic's temporaries: <name>.tmp.<pid>
SET_ASIDE = "set_aside"


def snapshot_path(out_dir: str, step: int) -> str:
    return os.path.join(out_dir, f"rl_snapshot_{step}.pt")


def warm_start_path(out_dir: str) -> str:
    return os.path.join(out_dir, "warm_start.pt")


def padded_path(out_dir: str) -> str:
    return os.path.join(out_dir, "warm_start_padded.pt")


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


# ---- writing ---------------------------------------------------------------------------------------
def write_reason(e: BaseException) -> str:
    """What the operating system said about a failed write, however deep the writer wrapped it
    (torch's zip writer raises a RuntimeError while the OSError of a full disk is being handled)."""
    while e is not None:
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        e = e.__cause__ or e.__context__
    return "the write failed"


def write_atomic(path: str, write):
    """Call write(f) on a temporary file beside `path`, fsync, then rename it over `path`: a crash or a
    full disk mid-write leaves the previous file intact, never a truncated one. WriteError (one line of
    reason) if anything failed; the temporary is gone then."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # RuntimeError: torch's writer, wrapping the OSError
        raise WriteError(write_reason(e)) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path: str, obj: dict, unless_equal: bool = False):
    """write_atomic of obj as JSON; unless_equal: not when the file already holds exactly that."""
    text = json.dumps(obj, indent=2).encode()
    if unless_equal and os.path.isfile(path):
        with open(path, "rb") as f:
            if f.read() == text:
                return
    write_atomic(path, lambda f: f.write(text))


def append_line(path: str, obj: dict):
    """One JSON line appended in one write (WriteError if it fails): a kill tears at most this line."""
    line = (json.dumps(obj) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while line:  # a nearly full disk takes part of a line; the rest then fails with the reason
                line = line[os.write(fd, line):]
        finally:
            os.close(fd)
    except OSError as e:
        raise WriteError(write_reason(e)) from None


def remove_temporaries(out_dir: str) -> list:
    """Delete the temporaries a killed writer left (none is ever read; under the run lock nobody else
    is writing); returns their names."""
    if not os.path.isdir(out_dir):
        return []
    found = sorted(name for name in os.listdir(out_dir) if TMP_RE.search(name))
    for name in found:
        os.remove(os.path.join(out_dir, name))
    return found


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
    """--resume=never: the user asked to replace the old run's snapshots (the cached warm start
    stays); returns how many were deleted."""
    old = snapshot_steps(out_dir)
    for _, path in old:
        os.remove(path)
    return len(old)


def set_aside(out_dir: str, step: int, snapshots: list) -> str:
    """Move `snapshots` (paths in out_dir) and summary.json, with copies of metrics.jsonl and
    config.json, into a new out_dir/set_aside/<time>-step<step>/ (invariant 5); returns that folder.
    The copies go first: a kill mid-way leaves every snapshot still in out_dir beside metrics that
    still describe it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(out_dir, SET_ASIDE, f"{stamp}-step{step}")
    folder, n = base, 1
    while os.path.exists(folder):
        n += 1
        folder = f"{base}-{n}"
    os.makedirs(folder)
    for name in (metrics_path, config_path):
        if os.path.exists(name(out_dir)):
            shutil.copyfile(name(out_dir), name(folder))
    for path in [*snapshots, summary_path(out_dir)]:
        if os.path.exists(path):
            os.replace(path, os.path.join(folder, os.path.basename(path)))
    return folder


# ---- metrics and results ----------------------------------------------------------------------------
def _metrics_lines(out_dir: str, warn=None) -> list:
    """[(raw line, parsed dict)] of metrics.jsonl: see read_metrics."""
    path = metrics_path(out_dir)
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline that ends the last complete line
    parsed = []
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or "step" not in row:
                raise ValueError("not a metrics line")
        except ValueError:
            if i == len(lines) - 1:
                (warn or print)(f"note: dropped the torn last line of {path} (a run stopped while writing it)")
                break
            raise MetricsError(f"{path} line {i + 1} is not a metrics line, and only a last line can be torn "
                               f"by a crash; move the file aside (or delete that line) and run again") from None
        parsed.append((line, row))
    return parsed


def read_metrics(out_dir: str, warn=None) -> list:
    """Every logged line of out_dir/metrics.jsonl, as dicts, in order ([] before the first). A torn
    last line (a kill while it was written) is dropped, and warn(one line) says so (print by
    default); a damaged line before the last is MetricsError, since no crash makes one."""
    return [row for _, row in _metrics_lines(out_dir, warn)]


def truncate_metrics(out_dir: str, step: int = -1, warn=None):
    """Keep the lines of steps up to `step`, byte for byte (a resumed run redoes the later ones); the
    default, -1, keeps none (--resume=never). An atomic rewrite: a kill leaves the old file or the new."""
    path = metrics_path(out_dir)
    if os.path.exists(path):
        kept = b"".join(line + b"\n" for line, row in _metrics_lines(out_dir, warn) if row["step"] <= step)
        if os.path.getsize(path) != len(kept):  # (unchanged: nothing to write, not even on a full disk)
            write_atomic(path, lambda f: f.write(kept))


def read_summary(out_dir: str) -> dict:
    with open(summary_path(out_dir)) as f:
        return json.load(f)


def read_config(out_dir: str) -> dict:
    with open(config_path(out_dir)) as f:
        return json.load(f)
