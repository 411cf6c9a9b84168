"""The real entry script in subprocesses (or its main() forked after the imports: tests/helpers.py run_main):
--debug on 1 and 2 processes, exact resume, help, the README and docs/configuration.md against the code, and the
one-line, exit-2 envelope of bad input (tests/test_config.py has every message in-process; here a few of them, and
those only a running script meets).
Run: python -m pytest tests/test_cli.py"""

import json
import os
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from configs.base import BaseRLConfig
from helpers import TINY_ARGS, args_with, assert_same_state, load, metrics, run, run_main, script_env

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
# the settings and metrics tables moved out of the README: every field and every logged metric is explained there
CONFIGURATION = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()


@pytest.mark.slow
def test_debug_run_one_process(tmp_path):
    out = tmp_path / "run"
    # PYTHONPROFILEIMPORTTIME: Python writes every module it imports to stderr, with its time
    proc = run(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", f"--out_dir={out}"],
               env={**script_env(), "PYTHONPROFILEIMPORTTIME": "1"})
    assert "Final held-out accuracy: " in proc.stdout and "(200 problems, greedy)" in proc.stdout
    # A warm start, RL steps and their snapshots without torch._dynamo (about 1 s to import: model/gpt.py AdamW)
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" in imported and "torch.optim" in imported and "torch._dynamo" not in imported
    assert "RL starts from held-out accuracy" in proc.stdout
    steps = sorted(int(p.stem.split("_")[-1]) for p in out.glob("rl_snapshot_*.pt"))
    assert steps == [3, 6]
    snap = load(out / "rl_snapshot_6.pt")  # weights_only: plain types and tensors only
    assert snap["step"] == 6 and snap["config"]["rl_train_steps"] == 6 and snap["model_args"]["n_layer"] == 4
    rows = metrics(out)
    assert [r["step"] for r in rows] == list(range(7))
    assert rows[6]["eval/accuracy"] == float(proc.stdout.split("Final held-out accuracy: ")[1].split()[0])
    assert "val/accuracy" in rows[6] and (out / "warm_start.pt").exists()
    summary = json.loads((out / "summary.json").read_text())
    logged = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert summary["rl_answers_generated"] == sum(r.get("train/answers_generated", 0) for r in logged)
    # Every metric the run logged is explained in docs/configuration.md.
    names = {k for row in logged for k in row if k != "step"}
    assert [k for k in sorted(names) if f"`{k}`" not in CONFIGURATION and not k.startswith("reward/")] == []


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
    run_main([*args, f"--out_dir={tmp_path / 'straight'}"])
    run_main([*args, f"--out_dir={tmp_path / 'resumed'}"])
    # A run that died after its step-4 snapshot: drop what came later, run the same command again.
    os.remove(tmp_path / "resumed" / "rl_snapshot_8.pt")
    proc = run_main([*args, f"--out_dir={tmp_path / 'resumed'}"])
    assert "Resumed from" in proc.stdout and "at step 4/8" in proc.stdout
    straight, resumed = load(tmp_path / "straight" / "rl_snapshot_8.pt"), load(tmp_path / "resumed" / "rl_snapshot_8.pt")
    assert_same_state(straight, resumed)
    assert metrics(tmp_path / "straight") == metrics(tmp_path / "resumed")
    # ...and the weights really moved, so the comparison above could fail.
    first = load(tmp_path / "straight" / "rl_snapshot_4.pt")
    assert not torch.equal(first["model"]["wte.weight"], straight["model"]["wte.weight"])


def test_help_lists_every_field_with_its_reason():
    proc = run_main(["--config_name", "MultiplierRLConfig", "--help"])
    assert proc.stdout.startswith("usage: python rl/rl_ddp.py [--config_name NAME] ")
    assert "--ndigit=2" in proc.stdout and "--show_work=True" in proc.stdout
    assert "digits per operand" in proc.stdout
    # an overridden field keeps the base's reason and adds the preset's (tests/test_config.py: in detail)
    assert "\n      MultiplierRLConfig: write the partial products first" in proc.stdout
    assert "--advantage_mode=None  (dapo: group_zscore)" in proc.stdout


def test_readme_documents_every_config_field_with_its_default_and_reason():
    docs = BaseRLConfig.field_docs()
    rows = [f"| `{f.name}` | `{getattr(BaseRLConfig, f.name)!r}` | {docs[f.name]} |" for f in fields(BaseRLConfig)]
    assert [row for row in rows if row not in CONFIGURATION] == []  # docs/configuration.md's settings table


def test_readme_file_table_lists_every_module():
    first_cells = [line.split("|")[1] for line in README.splitlines() if line.startswith("| `")]
    listed = {name for cell in first_cells for name in cell.split("`")[1::2] if name.endswith(".py")}
    repo = Path(__file__).resolve().parents[1]
    modules = {str(p.relative_to(repo)) for folder in ("rl", "model", "configs") for p in (repo / folder).rglob("*.py")
               if p.name != "__init__.py"}
    assert sorted(modules - listed) == []


# ---- bad input: one line on stderr, exit 2, no traceback -------------------------------------------
# Each case runs the script's main() in a process forked after the imports (tests/helpers.py run_main); the first
# test runs `python rl/rl_ddp.py` itself, a new interpreter, so the envelope holds from the imports on as well.
def one_line_error(args, env=None, forked=True):
    proc = (run_main if forked else run)(args, check=False, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == "", proc.stdout
    return lines[0]


def test_bad_input_in_a_new_interpreter_is_one_line_and_exit_2():
    assert one_line_error(["--config_name", "NoSuchConfig"], forked=False).startswith(
        "error: unknown config 'NoSuchConfig'; known configs: AdderGPUConfig, AdderRLConfig, ")


@pytest.mark.parametrize("args,message", [
    (["--config_name", "NoSuchConfig"], "error: unknown config 'NoSuchConfig'; known configs: "),
    (["--lerning_rate=1e-3"], "error: unknown option --lerning_rate; did you mean --learning_rate?"),
    (["--n_embed=100"], "error: n_embed=100 is not divisible by n_head=8"),
    (["--resume=does/not/exist.pt"], "error: --resume=does/not/exist.pt: no such file"),
    (["--backend=nccl"], "error: backend='nccl' needs CUDA, which this run does not use; use --backend=gloo"),
    (["--init_from=README.md"], "error: --init_from: snapshot README.md is unreadable"),
    (["--rl_algorithm=ppo", "--clip_low=1.5"], "error: clip_low must be in (0, 1)"),
    (["--resume="], "error: --resume= is empty; give --resume=auto, --resume=never or --resume=PATH of a snapshot"),
    (["--learning_rate=1e-3", "--learning_rate=2e-3"], "error: --learning_rate is given more than once"),
    # was a traceback from torch.manual_seed when the model was built
    ([f"--seed={2 ** 64}"], f"error: seed={2 ** 64} is outside [0, 2**64 - 1] (the seeds torch.manual_seed takes)"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    assert one_line_error(args).startswith(message)


def test_bad_input_batch_not_divisible_by_the_ranks():
    # as torchrun would set them; the batch check comes before any process group forms, so nothing connects
    env = {**script_env(), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "29999"}
    assert one_line_error([], env=env) == ("error: rl_batch_size=64 is not divisible by the 3 processes; "
                                           "use a multiple of 3")


LAUNCHER_FIX = "launch with torchrun, or unset RANK, LOCAL_RANK and WORLD_SIZE"


@pytest.mark.parametrize("variables,message", [
    # not an integer: print0 itself reads RANK, and must still print the error
    (dict(RANK="first", LOCAL_RANK="0", WORLD_SIZE="1"), f"error: RANK='first' is not an integer; {LAUNCHER_FIX}"),
    # a rank that is not 0 still prints: a refused environment names no rank 0
    (dict(RANK="5", LOCAL_RANK="0", WORLD_SIZE="3"), f"error: RANK=5 is outside [0, WORLD_SIZE=3); {LAUNCHER_FIX}"),
    (dict(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2"),
     f"error: WORLD_SIZE=2 but MASTER_ADDR and MASTER_PORT are not set, so the processes cannot meet; {LAUNCHER_FIX}"),
])
def test_bad_input_launcher_environment(variables, message):
    env = {k: v for k, v in script_env().items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    assert one_line_error(["--debug"], env={**env, **variables}) == message


def test_bad_input_out_dir_not_writable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert one_line_error([f"--out_dir={blocker}/run"]).startswith(
        f"error: cannot write to out_dir '{blocker}/run' (Not a directory); pass --out_dir=<a writable folder>")


@pytest.mark.slow
def test_bad_input_snapshot_of_another_shape_or_task(tmp_path):
    run_main([*TINY_ARGS, "--no_wandb", "--rl_train_steps=2", f"--out_dir={tmp_path}"])
    shape = one_line_error([*args_with(TINY_ARGS, n_layer=2), "--no_wandb", f"--out_dir={tmp_path}"])
    assert "holds a model of n_layer=1" in shape and "but the config asks for n_layer=2" in shape
    task = one_line_error([*TINY_ARGS, "--no_wandb", "--task=subtractor", f"--out_dir={tmp_path}"])
    assert "was trained on task" in task and "'adder'" in task and "'subtractor'" in task


@pytest.mark.slow
def test_wandb_without_login_goes_offline_with_a_notice(tmp_path):
    env = {k: v for k, v in script_env().items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), WANDB_CONFIG_DIR=str(tmp_path / "cfg"), NETRC=str(tmp_path / "netrc"))
    proc = run_main([*TINY_ARGS, "--rl_train_steps=2", f"--out_dir={tmp_path / 'run'}"], env=env)
    notice = [l for l in proc.stdout.splitlines() if l.startswith("wandb: not logged in")]
    assert len(notice) == 1 and "logging offline" in notice[0]
    assert list((tmp_path / "run" / "wandb").glob("offline-run-*"))
