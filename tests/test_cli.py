"""The real entry script in subprocesses: --debug runs on 1 and 2 processes, resume, help.
Run: python -m pytest tests/test_cli.py"""

import json
import os
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from configs.base import BaseRLConfig
from helpers import TINY_ARGS, assert_same_state, load, metrics, run

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


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
    # Every metric the run logged is explained in the README.
    logged = {k for row in load_rows(out) for k in row if k != "step"}
    assert [k for k in sorted(logged) if f"`{k}`" not in README and not k.startswith("reward/")] == []


def load_rows(out):
    with open(out / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


@pytest.mark.slow
def test_debug_run_two_processes(tmp_path):
    out = tmp_path / "run"
    proc = run(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", f"--out_dir={out}", *TINY_ARGS], torchrun=2)
    assert proc.stdout.count("Final held-out accuracy: ") == 1  # only rank 0 prints
    assert "2 process(es)" in proc.stdout
    rows = metrics(out)
    assert rows[-1]["step"] == 6 and 0.0 < rows[-1]["train/avg_reward"] < 1.0


@pytest.mark.slow
def test_resume_continues_exactly_where_the_run_stopped(tmp_path):
    args = ["--no_wandb", *TINY_ARGS, "--rl_train_steps=8", "--save_interval=4", "--eval_interval=4"]
    run([*args, f"--out_dir={tmp_path / 'straight'}"])
    run([*args, f"--out_dir={tmp_path / 'resumed'}"])
    # A run that died after its step-4 snapshot: drop what came later, run the same command again.
    os.remove(tmp_path / "resumed" / "rl_snapshot_8.pt")
    proc = run([*args, f"--out_dir={tmp_path / 'resumed'}"])
    assert "Resumed from" in proc.stdout and "at step 4/8" in proc.stdout
    straight, resumed = load(tmp_path / "straight" / "rl_snapshot_8.pt"), load(tmp_path / "resumed" / "rl_snapshot_8.pt")
    assert_same_state(straight, resumed)
    assert metrics(tmp_path / "straight") == metrics(tmp_path / "resumed")
    # ...and the weights really moved, so the comparison above could fail.
    first = load(tmp_path / "straight" / "rl_snapshot_4.pt")
    assert not torch.equal(first["model"]["wte.weight"], straight["model"]["wte.weight"])


def test_help_lists_every_field_with_its_reason():
    proc = run(["--config_name", "MultiplierRLConfig", "--help"])
    assert "--ndigit=2" in proc.stdout and "--n_layer=6" in proc.stdout
    assert "digits per operand" in proc.stdout


def test_readme_documents_every_config_field():
    assert [f.name for f in fields(BaseRLConfig) if f"`{f.name}`" not in README] == []
