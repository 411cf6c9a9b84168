"""Run the entry script and kill it with SIGKILL in the middle of one chosen write: a crash at the
worst instant, for tests/test_run_dir.py. What is on disk afterwards is exactly what such a crash
leaves (half a metrics line, half a temporary file); only the moment is chosen.

    python tests/crash_run.py WHAT N [ARGS...]

WHAT: metrics (the N-th metrics line, half written), snapshot / progress / warm_start / truncate
(the N-th atomic write of an RL snapshot, of the warm start's progress, of the warm start, of a
rewrite of metrics.jsonl: half its temporary file written), or none (no kill).
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
