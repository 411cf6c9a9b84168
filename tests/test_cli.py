"""The real entry script in subprocesses: --debug runs on 1 and 2 processes, resume, bad input.
Run: python -m pytest tests/test_cli.py"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
# A tiny model and task so each run takes seconds; digit_match gives a random policy a reward
# signal, so updates really change the weights.
TINY = ["--n_layer=1", "--n_embed=32", "--n_head=2", "--ndigit=2", "--init_from=scratch",
        "--rewards=digit_match:1.0", "--learning_rate=1e-3"]


def run(args, torchrun=0, check=True):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    if torchrun:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}",
               "rl/rl_ddp.py", *args]
    else:
        cmd = [sys.executable, "rl/rl_ddp.py", *args]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def metrics(out_dir):
    with open(Path(out_dir) / "metrics.jsonl") as f:
        rows = [json.loads(line) for line in f]
    return [{k: v for k, v in row.items() if not k.startswith("perf/")} for row in rows]  # timings differ


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_state(a, b):
    for key in ("model",):
        assert a[key].keys() == b[key].keys()
        for name in a[key]:
            assert torch.equal(a[key][name], b[key][name]), name
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for k in sa[i]:
            assert torch.equal(sa[i][k], sb[i][k]), (i, k)
    assert a["scheduler"] == b["scheduler"] and a["baseline"] == b["baseline"] and a["step"] == b["step"]


@pytest.mark.slow
def test_debug_run_one_process(tmp_path):
    out = tmp_path / "run"
    proc = run(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", f"--out_dir={out}"])
    assert "Final held-out accuracy: " in proc.stdout and "(200 problems, greedy)" in proc.stdout
    assert "RL starts from held-out accuracy" in proc.stdout
    steps = sorted(int(p.stem.split("_")[-1]) for p in out.glob("rl_snapshot_*.pt"))
    assert steps == [3, 6]
    snap = load(out / "rl_snapshot_6.pt")  # weights_only: plain types and tensors only
    assert snap["step"] == 6 and snap["config"]["rl_train_steps"] == 6 and snap["model_args"]["n_layer"] == 4
    rows = metrics(out)
    assert [r["step"] for r in rows] == list(range(7))
    assert rows[6]["eval/accuracy"] == float(proc.stdout.split("Final held-out accuracy: ")[1].split()[0])
    assert (out / "warm_start.pt").exists()


@pytest.mark.slow
def test_debug_run_two_processes_matches_the_batch_split(tmp_path):
    out = tmp_path / "run"
    proc = run(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", f"--out_dir={out}", *TINY], torchrun=2)
    assert proc.stdout.count("Final held-out accuracy: ") == 1  # only rank 0 prints
    assert "2 process(es)" in proc.stdout
    rows = metrics(out)
    assert rows[-1]["step"] == 6 and 0.0 < rows[-1]["train/avg_reward"] < 1.0


@pytest.mark.slow
def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    args = ["--debug", "--no_wandb", *TINY, "--rl_train_steps=8", "--save_interval=4", "--eval_interval=4"]
    run([*args, f"--out_dir={tmp_path / 'straight'}"])
    run([*args, f"--out_dir={tmp_path / 'resumed'}"])
    # Simulate a run that died after its step-4 snapshot: drop what came later, run again.
    os.remove(tmp_path / "resumed" / "rl_snapshot_8.pt")
    proc = run([*args, f"--out_dir={tmp_path / 'resumed'}", "--resume"])
    assert "Resumed from" in proc.stdout and "at step 4/8" in proc.stdout
    straight, resumed = load(tmp_path / "straight" / "rl_snapshot_8.pt"), load(tmp_path / "resumed" / "rl_snapshot_8.pt")
    assert_same_state(straight, resumed)
    assert metrics(tmp_path / "straight") == metrics(tmp_path / "resumed")
    # ...and the weights really moved, so the comparison above could fail.
    first = load(tmp_path / "straight" / "rl_snapshot_4.pt")
    assert not torch.equal(first["model"]["wte.weight"], straight["model"]["wte.weight"])


@pytest.mark.slow
def test_resume_of_another_model_shape_is_one_line(tmp_path):
    args = ["--debug", "--no_wandb", *TINY, "--rl_train_steps=2", f"--out_dir={tmp_path}"]
    run(args)
    proc = run([*args, "--n_layer=2", "--resume"], check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "n_layer=1" in lines[0] and "n_layer=2" in lines[0], proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--config_name", "NoSuchConfig"], "error: unknown config 'NoSuchConfig'"),
    (["--lerning_rate=1e-3"], "error: unknown option --lerning_rate; did you mean --learning_rate?"),
    (["--resume=does/not/exist.pt"], "error: --resume=does/not/exist.pt: no such file"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    proc = run(args, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(message) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_help_lists_every_field_with_its_reason():
    proc = run(["--config_name", "MultiplierRLConfig", "--help"])
    assert "--ndigit=2" in proc.stdout and "--n_layer=6" in proc.stdout
    assert "digits per operand" in proc.stdout
