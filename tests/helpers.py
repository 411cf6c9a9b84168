"""Shared by the tests: run the real script in a subprocess, build a trainer in-process, compare states."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from configs import get_config_class
from model.gpt import GPT, GPTConfig
from rl.dist import DistInfo
from rl.math_env import MathEnvironment
from rl.math_trainer import MathRLTrainer

REPO = Path(__file__).resolve().parents[1]
# A tiny model and task so each run takes seconds; digit_match gives a random policy a reward
# signal, so updates really change the weights.
TINY = dict(n_layer=1, n_embed=32, n_head=2, ndigit=2, init_from="scratch", rewards="digit_match:1.0",
            learning_rate=1e-3, rl_batch_size=16, rl_rollout_size=4, num_eval=100, warmup_steps=2)
TINY_ARGS = [f"--{k}={v}" for k, v in TINY.items()]


def script_env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "PYTHONUNBUFFERED": "1"}


def command(args, torchrun=0, max_restarts=0):
    if torchrun:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}",
                f"--max-restarts={max_restarts}", "rl/rl_ddp.py", *args]
    return [sys.executable, "rl/rl_ddp.py", *args]


def run(args, torchrun=0, check=True, env=None, timeout=300):
    proc = subprocess.run(command(args, torchrun), cwd=REPO, env=env or script_env(), capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def start(args, torchrun=0, max_restarts=0):
    """Start the script in its own process group (so the whole torchrun tree can be signalled)."""
    return subprocess.Popen(command(args, torchrun, max_restarts), cwd=REPO, env=script_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(path: Path, proc=None, timeout=120):
    t0 = time.time()
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (exit {proc.returncode}) before {path} appeared:\n{proc.communicate()}")
        if time.time() - t0 > timeout:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.005)


def metrics(out_dir):
    """Logged metrics without timings (those differ between any two runs)."""
    with open(Path(out_dir) / "metrics.jsonl") as f:
        rows = [json.loads(line) for line in f]
    return [{k: v for k, v in row.items() if not k.startswith("perf/")} for row in rows]


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_state(a: dict, b: dict):
    """Model, optimizer and scheduler tensors bit for bit, and the counters."""
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), f"model tensor {name} differs"
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for k in sa[i]:
            assert torch.equal(torch.as_tensor(sa[i][k]), torch.as_tensor(sb[i][k])), f"optimizer state {i}.{k} differs"
    for key in ("scheduler", "baseline", "step", "bad_steps_in_a_row", "num_skipped_steps"):
        assert a[key] == b[key], key


def make_trainer(config_name="AdderRLConfig", **overrides):
    """A single-process trainer built the way rl_ddp.py builds one."""
    config = get_config_class(config_name)(**{**TINY, **overrides}).get_args_ready()
    env = MathEnvironment(config.task, config.ndigit, config.reverse_answer, config.use_format, config.test_fraction)
    torch.manual_seed(config.seed)
    model = GPT(GPTConfig(**config.model_args()))
    a, b = env.eval_operands(config.num_eval)
    return MathRLTrainer(config, env, model, DistInfo(), a, b)
