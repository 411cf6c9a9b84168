"""What guards a run against its surroundings: a folder it can write, one run per folder, and a
clean stop on a signal.

RunLock: every rank holds an exclusive `flock` on `out_dir/.lock.rank<r>` for the whole run, so a
second run pointed at the same folder is refused at start. The kernel drops the lock when the
process dies, however it dies, so a killed run never leaves a stale lock behind.

watch_launcher: under torchrun, a worker whose launcher is gone ends itself at once (SIGKILL), also one whose
launcher was gone before it looked (its agent's store refuses connections).

GracefulStop: SIGTERM or SIGINT only sets a flag; the training loop finishes its current step,
agrees with the other ranks that someone was asked to stop, writes a snapshot and exits 0. A
second Ctrl-C stops at once.

RunSettings: the run's settings beside the algorithm's: its seed and folder, how often it evaluates, logs
and saves, when it stops early, where it runs (rl/dist.py checks the device and backend names) and its
wandb names.
"""

import fcntl
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass

from rl.errors import ConfigError
from rl.run_dir import lock_path


@dataclass
class RunSettings:
    """The run around the algorithm: seed, folder, evaluations, snapshots, console, device, wandb."""
    seed: int = 1337
    """seeds model init, problem streams and sampling; the held-out set never depends on it (>= 0)"""
    out_dir: str = ""
    """run folder for snapshots, warm start and metrics; empty means out/<config name>"""
    eval_interval: int = 10
    """RL steps between evaluations on the test and validation sets (plus one at start and end); about 1 s each (> 0)"""
    rl_target_accuracy: float = 0.0
    """stop RL early once validation accuracy is at least this at rl_target_evals evaluations in a row, so a
    fast device does not spend rl_train_steps sized for a CPU (0: always run rl_train_steps) (in [0, 1])"""
    rl_target_evals: int = 2
    """evaluations in a row that must reach rl_target_accuracy: held, not touched once; each reads the same
    num_eval problems, whose own sampling error only a larger num_eval narrows (> 0)"""
    save_interval: int = 50
    """RL steps between snapshots (one is also written at the end) (> 0)"""
    keep_snapshots: int = 3
    """newest snapshots kept in out_dir; older ones are deleted once a newer one is complete (> 0)"""
    max_bad_steps: int = 5
    """stop after this many updates in a row skipped for a non-finite loss, gradient norm or sampling logits (> 0)"""
    log_interval: int = 10
    """RL steps between console lines (> 0)"""
    eval_batch_size: int = 500
    """held-out problems decoded at once per rank (> 0)"""
    num_mistakes: int = 3
    """wrong held-out answers printed at each evaluation (>= 0)"""
    device: str = "auto"
    """'auto' (CUDA when present, else CPU), 'cpu' or 'cuda'"""
    backend: str = "auto"
    """process-group backend under torchrun: 'auto' (nccl on CUDA, gloo on CPU), 'gloo' or 'nccl'"""
    wandb_project: str = "mathrl"
    """wandb project name"""
    wandb_run_name: str = ""
    """wandb run name; empty means the config name"""

    def run_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]"""
        return [(("rl_target_evals",), self.rl_target_accuracy == 0, "needs rl_target_accuracy > 0")]


_watched = []  # the launcher this process watches, once a process


def watch_launcher(interval: float = 0.2):
    """Under torchrun: end this worker at once, as a crash would (SIGKILL), when the launcher that
    started it is gone. torchrun starts each worker in a session of its own, so a launcher killed
    with SIGKILL (out of memory, a scheduler's hard stop) would otherwise leave its workers training
    on, holding the run lock. A thread watches the parent pid (a dead parent's orphans are adopted by
    another process); the next run of the same command resumes from the last snapshot. The entry
    script starts it before its own imports: they take seconds, and a launcher killed in them (a
    worker restarted just before, say) would otherwise be gone before anyone looked. Once a process."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or _watched:  # plain python: no launcher to watch
        return
    launcher = os.getppid()
    _watched.append(launcher)

    def watch():
        # A launcher killed in the interpreter's first moments, before this thread began, is already gone: the
        # pid read above is then whoever adopted this process, and would never change. Its store tells: it is
        # closed (then the worker would wait minutes at dist.init to connect, holding the run lock).
        if not agent_store_gone():
            while os.getppid() == launcher:
                time.sleep(interval)
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="watch-launcher", daemon=True).start()


def agent_store_gone(timeout: float = 5.0) -> bool:
    """Whether torchrun's agent, which serves its workers' store (TORCHELASTIC_USE_AGENT_STORE) at MASTER_ADDR:
    MASTER_PORT from before it starts them until it exits, refuses a connection there: it is gone. False whenever
    that cannot be told (no agent store, a connection that times out)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":  # (then rank 0 serves the store, later)
        return False
    try:
        socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])), timeout).close()
    except ConnectionRefusedError:
        return True
    except (OSError, KeyError, ValueError):
        pass
    return False


def check_writable(out_dir: str):
    """ConfigError (one line) unless out_dir exists or can be made, and takes a file."""
    try:
        os.makedirs(out_dir, exist_ok=True)
        probe = os.path.join(out_dir, f".write_probe.{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise ConfigError(f"cannot write to out_dir {out_dir!r} ({e.strerror}); "
                          f"pass --out_dir=<a writable folder>") from None


class RunLock:
    def __init__(self, out_dir: str, rank: int):
        self.path = lock_path(out_dir, rank)
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise ConfigError(f"another run is using {out_dir} ({holder}); wait for it to finish, stop it, "
                              f"or pass another --out_dir") from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"pid {os.getpid()}")
        self.file.flush()

    def release(self):
        if not self.file.closed:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()


class GracefulStop:
    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signum = None
        self.previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}

    def _handle(self, signum, frame):
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        self.signum = signum

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def restore(self):
        for s, handler in self.previous.items():
            signal.signal(s, handler)
