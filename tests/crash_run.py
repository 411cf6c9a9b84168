"""The entry script in a process of its own, killed with SIGKILL in the middle of one chosen write
(a crash at the worst instant), or with a file-size limit (a full disk), for tests/test_run_dir.py.
What is on disk afterwards is exactly what such a crash or disk leaves (half a metrics line, half a
temporary file); only the moment is chosen.

    python tests/crash_run.py WHAT N [ARGS...]

WHAT: metrics (the N-th metrics line, half written), snapshot / progress / warm_start / truncate
(the N-th atomic write of an RL snapshot, of the warm start's progress, of the warm start, of a
rewrite of metrics.jsonl: half its temporary file written), or none (no kill).

`Runner` starts such processes by forking a server that has imported torch and its optimizer's
lazy imports (about 2.5 s) once, so each start takes a fraction of a second.
"""

import io
import multiprocessing
import os
import resource
import signal
import sys
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch  # noqa: E402

from rl import logger, rl_ddp, run_dir, snapshot  # noqa: E402

PATHS = {"snapshot": "rl_snapshot_", "progress": "warm_start_progress.pt", "warm_start": "warm_start.pt",
         "truncate": "metrics.jsonl"}


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def main(what: str, n: int, args: list) -> int:
    calls = {"n": 0}
    if what == "metrics":
        real_append = run_dir.append_line

        def append_line(path, obj):
            calls["n"] += 1
            if calls["n"] < n:
                return real_append(path, obj)
            line = (run_dir.json.dumps(obj) + "\n").encode()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, line[:len(line) // 2])
            os.fsync(fd)
            die()
        logger.append_line = append_line
    elif what in PATHS:
        real_write = run_dir.write_atomic

        def write_atomic(path, write):
            if os.path.basename(path).startswith(PATHS[what]):
                calls["n"] += 1
                if calls["n"] >= n:
                    def half(f):
                        write(f)
                        f.flush()
                        f.truncate(max(f.tell() // 2, 1))
                        os.fsync(f.fileno())
                        die()
                    return real_write(path, half)
            return real_write(path, write)
        run_dir.write_atomic = snapshot.write_atomic = write_atomic
    elif what != "none":
        raise SystemExit(f"unknown crash point {what!r}")
    return rl_ddp.main(args)


def child(what: str, n: int, args: list, console: str, max_bytes: int, threads: int, env: dict = None):
    """A forked process's life: main() with no file over max_bytes (a soft RLIMIT_FSIZE with SIGXFSZ
    ignored: a write past it fails with EFBIG, as on a full disk), its console kept in memory meanwhile
    (a file of it would be limited too) and written to console.out / console.err at the end. It computes
    on as many threads as the process that started it, so its runs equal that process's own bit for bit
    (on some CPUs a sum over 1 thread and over 2 differ in the last bits). env: its environment, when given
    (as a subprocess's env= would be)."""
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    os.chdir(REPO)  # where tools/launch.py runs the script: relative paths read the same
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if max_bytes:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    torch.set_num_threads(threads)
    try:
        code = main(what, n, args)
    except BaseException:
        traceback.print_exc()
        code = 99
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    for stream, suffix in ((sys.stdout, "out"), (sys.stderr, "err")):
        with open(f"{console}.{suffix}", "w") as f:
            f.write(stream.getvalue())
    os._exit(code)


def forkserver():
    """The context whose processes fork from one server that imported all of the above and torch._dynamo once (the
    server starts with the first process; every user sets the same preload, so whichever comes first starts it)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["crash_run", "torch._dynamo"])
    return context


class Runner:
    """Starts `child` processes from the forkserver."""

    def __init__(self, folder: str):
        self.folder, self.count = folder, 0
        self.context = forkserver()

    def start(self, args: list, what: str = "none", n: int = 0, max_bytes: int = 0, env: dict = None):
        self.count += 1
        console = os.path.join(self.folder, f"console{self.count}")
        proc = self.context.Process(target=child, args=(what, n, list(map(str, args)), console, max_bytes,
                                                        torch.get_num_threads(), env))
        proc.start()
        proc.console = console
        return proc

    def run(self, args: list, what: str = "none", n: int = 0, max_bytes: int = 0, env: dict = None):
        """(exit code: -9 for a kill, stdout, stderr) of a process run to its end."""
        proc = self.start(args, what, n, max_bytes, env)
        proc.join()
        read = lambda path: open(path).read() if os.path.exists(path) else ""  # (none after a kill)
        return (proc.exitcode, *(read(f"{proc.console}.{s}") for s in ("out", "err")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
