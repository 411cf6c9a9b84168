"""What guards a run against its surroundings: a folder it can write, one run per folder, and a
clean stop on a signal.

RunLock: every rank holds an exclusive `flock` on `out_dir/.lock.rank<r>` for the whole run, so a
second run pointed at the same folder is refused at start. The kernel drops the lock when the
process dies, however it dies, so a killed run never leaves a stale lock behind.

GracefulStop: SIGTERM or SIGINT only sets a flag; the training loop finishes its current step,
agrees with the other ranks that someone was asked to stop, writes a snapshot and exits 0. A
second Ctrl-C stops at once.
"""

import fcntl
import os
import signal

from rl.errors import ConfigError
from rl.run_dir import lock_path


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
