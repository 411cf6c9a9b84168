"""One way to run the entry script, rl/rl_ddp.py, in a subprocess: for the tools and the tests.

    run(["--config_name", "AdderRLConfig", "--rl_train_steps=10"], nproc=2, threads=1)
    check_command(["--config_name", "AdderRLConfig", "--rl_batch_size=0"])   # the script's refusal, before any run

A tool stopped while a run is in progress (Ctrl-C, SIGTERM from `kill` or `timeout`, a closed terminal) stops the
run the way rl/rl_ddp.py stops itself: at the end of its step, with a snapshot. The tool waits for that, then exits
128 + the signal's number, rather than dying alone and leaving the run training on in the background.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def command(args: list, nproc: int = 1, max_restarts: int = 0) -> list:
    """python rl/rl_ddp.py ARGS, or the same under torchrun with nproc processes."""
    if nproc > 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                f"--max-restarts={max_restarts}", "rl/rl_ddp.py", *args]
    return [sys.executable, "rl/rl_ddp.py", *args]


def script_env(threads: int = None) -> dict:
    """The environment of a run: wandb off, unbuffered output, and OMP_NUM_THREADS when given."""
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def passing_signals_to(proc: subprocess.Popen):
    """While proc runs, a signal to this process reaches it instead: the first as SIGTERM (rl/rl_ddp.py's graceful
    stop), a second as SIGINT (its "stop now"). Yields the list of signals received."""
    received = []
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield received
        return

    def handle(signum, frame):
        received.append(signum)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM if len(received) == 1 else signal.SIGINT)
    previous = {s: signal.signal(s, handle) for s in FORWARDED}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def check_command(args: list, nproc: int = 1):
    """Refuse in one line, before any run's minutes, the command rl/rl_ddp.py would refuse at its start: a tool
    that runs many would otherwise fail at its first run of a bad --set, or after the runs before it."""
    from rl.errors import ConfigError  # (the tools' launcher needs no config otherwise)
    from rl.rl_ddp import check_start
    try:
        check_start(args, nproc)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


def run(args: list, *, nproc: int = 1, threads: int = None, log_path: str = None, check: bool = True,
        env: dict = None, timeout: float = None) -> subprocess.CompletedProcess:
    """Run to the end; the console goes to log_path (to follow with tail -f) or is captured. With check,
    a failed run raises SystemExit with the end of its console. The run is in a session of its own, so a
    Ctrl-C reaches it once, through this process (the module docstring)."""
    cmd, env = command(args, nproc), env or script_env(threads)
    log = open(log_path, "w") if log_path else None
    try:
        with subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log or subprocess.PIPE, text=True,
                              stderr=subprocess.STDOUT if log else subprocess.PIPE, start_new_session=True) as popen:
            with passing_signals_to(popen) as received:
                try:
                    stdout, stderr = popen.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:  # as subprocess.run does
                    popen.kill()
                    popen.communicate()
                    raise
    finally:
        if log:
            log.close()
    proc = subprocess.CompletedProcess(cmd, popen.returncode, stdout, stderr)
    if received:
        name = signal.Signals(received[0]).name
        print(f"stopped by {name}: the run it started stopped too, at the end of a step (exit {proc.returncode})"
              f"{'; its console: ' + log_path if log_path else ''}", file=sys.stderr)
        raise SystemExit(128 + received[0])
    if check and proc.returncode != 0:
        console = open(log_path).read() if log_path else proc.stdout + proc.stderr
        raise SystemExit(f"run failed (exit {proc.returncode}): {' '.join(cmd)}\n{console[-3000:]}")
    return proc


def start(args: list, *, nproc: int = 1, max_restarts: int = 0, threads: int = None) -> subprocess.Popen:
    """Start without waiting, in a process group of its own (so a whole torchrun tree can be signalled)."""
    return subprocess.Popen(command(args, nproc, max_restarts), cwd=REPO, env=script_env(threads),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
