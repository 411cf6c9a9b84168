"""One way to run the entry script, rl/rl_ddp.py, in a subprocess: for the tools and the tests.

    run(["--config_name", "AdderRLConfig", "--rl_train_steps=10"], nproc=2, threads=1)
"""

import os
import subprocess
import sys

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


def run(args: list, *, nproc: int = 1, threads: int = None, log_path: str = None, check: bool = True,
        env: dict = None, timeout: float = None) -> subprocess.CompletedProcess:
    """Run to the end; the console goes to log_path (to follow with tail -f) or is captured. With check,
    a failed run raises SystemExit with the end of its console."""
    cmd, env = command(args, nproc), env or script_env(threads)
    if log_path:
        with open(log_path, "w") as log:
            proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                                  timeout=timeout)
    else:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        console = open(log_path).read() if log_path else proc.stdout + proc.stderr
        raise SystemExit(f"run failed (exit {proc.returncode}): {' '.join(cmd)}\n{console[-3000:]}")
    return proc


def start(args: list, *, nproc: int = 1, max_restarts: int = 0, threads: int = None) -> subprocess.Popen:
    """Start without waiting, in a process group of its own (so a whole torchrun tree can be signalled)."""
    return subprocess.Popen(command(args, nproc, max_restarts), cwd=REPO, env=script_env(threads),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
