"""Nothing lost, nothing cryptic: kill and resume, graceful stop, the run lock, the numerical guard,
crash-safe snapshots and one clear line for each bad input.
Run: python -m pytest tests/test_reliability.py"""

import errno
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch

import rl.seeding as seeding
from helpers import (TINY_ARGS, assert_same_state, load, make_trainer, metrics, run, script_env, start, wait_for)
from rl import algorithms, math_trainer, snapshot
from rl.math_trainer import TrainingError
from rl.snapshot import SnapshotWriteError

# 8 steps of a 2-layer adder model from scratch: each step takes long enough (~0.3 s) that
# a kill lands mid-run, and digit_match gives a random policy gradients to follow.
KILL_ARGS = ["--no_wandb", "--init_from=scratch", "--rewards=digit_match:1.0", "--learning_rate=1e-3",
             "--rl_batch_size=32", "--rl_rollout_size=8", "--num_eval=50", "--rl_train_steps=8", "--save_interval=1",
             "--eval_interval=4", "--warmup_steps=2", "--n_layer=2", "--keep_snapshots=100"]


def kill_group(proc, sig):
    """Signal the script and, under torchrun, its workers (torchrun starts them in sessions of
    their own, so signalling the agent's process group alone would miss them)."""
    workers = children(proc.pid)
    os.killpg(proc.pid, sig)
    for pid in workers:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    proc.communicate(timeout=60)


def children(pid: int) -> list:
    """Pids whose parent is `pid` (the workers of a torchrun agent)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == pid:
                found.append(int(entry))
    return found


def straight_run(tmp_path, args, torchrun=0):
    out = tmp_path / "straight"
    run([*args, f"--out_dir={out}"], torchrun=torchrun)
    return out


# ---- exact resume -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("nproc", [0, 2])
def test_sigkill_then_same_command_equals_uninterrupted_run(tmp_path, nproc):
    straight = straight_run(tmp_path, KILL_ARGS, torchrun=nproc)
    out = tmp_path / "killed"
    args = [*KILL_ARGS, f"--out_dir={out}"]
    proc = start(args, torchrun=nproc)
    wait_for(out / "rl_snapshot_4.pt", proc)
    kill_group(proc, signal.SIGKILL)
    assert not (out / "rl_snapshot_8.pt").exists(), "the run finished before the kill; the test proved nothing"
    again = run(args, torchrun=nproc)
    assert "Resumed from" in again.stdout
    assert_same_state(load(straight / "rl_snapshot_8.pt"), load(out / "rl_snapshot_8.pt"))
    assert metrics(straight) == metrics(out)


def test_resume_in_process_is_exact_and_the_negative_control_fails(tmp_path, monkeypatch):
    """Positive: 4 steps, state_dict, a fresh trainer loads it, 4 more == 8 straight.
    Negative control: the same, but the resumed trainer's sampling stream restarts from step 0
    (as a trainer that forgot its sampling RNG would): the states differ, so the check has teeth."""
    def run_steps(trainer, n):
        for _ in range(n):
            trainer.train_step()
        return trainer

    straight = run_steps(make_trainer(), 8).state_dict()

    def resumed_state():
        half = run_steps(make_trainer(), 4).state_dict()
        torch.save(half, tmp_path / "half.pt")
        fresh = make_trainer(seed=999)  # other initial weights: everything must come from the snapshot
        fresh.config = make_trainer().config
        fresh.load_state_dict(torch.load(tmp_path / "half.pt", weights_only=True))
        return run_steps(fresh, 4).state_dict()

    assert_same_state(straight, resumed_state())

    real = seeding.torch_generator
    calls = {"n": 0}

    def forgetful(seed, rank, step, purpose, device):
        if purpose == seeding.SAMPLING:
            calls["n"] += 1
            if calls["n"] > 4:  # the resumed trainer: its sampling stream replays from step 0
                step -= 4
        return real(seed, rank, step, purpose, device)
    monkeypatch.setattr(seeding, "torch_generator", forgetful)
    with pytest.raises(AssertionError, match="differs"):
        assert_same_state(straight, resumed_state())


# ---- graceful stop, restarts, the lock --------------------------------------------------------
@pytest.mark.slow
def test_sigterm_finishes_the_step_saves_and_exits_0(tmp_path):
    out = tmp_path / "run"
    args = [*KILL_ARGS, "--save_interval=100", "--rl_train_steps=40", f"--out_dir={out}"]
    proc = start(args)
    wait_for(out / "metrics.jsonl", proc)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    line = [l for l in stdout.splitlines() if l.startswith("Stopped by SIGTERM after step ")]
    assert len(line) == 1 and line[0].endswith("run the same command to continue"), stdout
    step = int(line[0].split("after step ")[1].split("/")[0])
    assert 0 < step < 40 and load(out / f"rl_snapshot_{step}.pt")["step"] == step


@pytest.mark.slow
def test_torchrun_max_restarts_resumes_after_a_crash(tmp_path):
    straight = straight_run(tmp_path, KILL_ARGS, torchrun=2)
    out = tmp_path / "crashed"
    proc = start([*KILL_ARGS, f"--out_dir={out}"], torchrun=2, max_restarts=1)
    wait_for(out / "rl_snapshot_3.pt", proc)
    os.kill(max(children(proc.pid)), signal.SIGKILL)  # one worker dies; torchrun restarts both, which resume
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    assert "Resumed from" in stdout
    assert_same_state(load(straight / "rl_snapshot_8.pt"), load(out / "rl_snapshot_8.pt"))


@pytest.mark.slow
def test_second_run_on_the_same_folder_is_refused_and_a_dead_run_leaves_no_lock(tmp_path):
    out = tmp_path / "run"
    args = [*KILL_ARGS, "--rl_train_steps=400", f"--out_dir={out}"]
    first = start(args)
    wait_for(out / "metrics.jsonl", first)
    second = run(args, check=False)
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr.startswith(f"error: another run is using {out} (pid {first.pid}); wait for it to finish")
    kill_group(first, signal.SIGKILL)
    third = run([*args, "--rl_train_steps=8"])  # the kernel dropped the dead run's lock
    assert "Final held-out accuracy" in third.stdout


@pytest.mark.slow
def test_soak_random_kills_of_a_two_process_run(tmp_path):
    """Kill a 2-process run at random moments several times, restart it each time, and compare
    its final snapshot with an uninterrupted run's."""
    args = [*KILL_ARGS, "--rl_train_steps=16", "--save_interval=2"]
    straight = straight_run(tmp_path, args, torchrun=2)
    out = tmp_path / "soak"
    rng = random.Random(0)
    kills = 0
    for _ in range(4):
        proc = start([*args, f"--out_dir={out}"], torchrun=2)
        wait_for(out / "metrics.jsonl", proc)
        time.sleep(rng.uniform(0.5, 2.5))
        if proc.poll() is not None:
            break
        kill_group(proc, signal.SIGKILL)
        kills += 1
    run([*args, f"--out_dir={out}"], torchrun=2)
    assert kills >= 2, "the run outpaced the kills; the soak proved little"
    assert_same_state(load(straight / "rl_snapshot_16.pt"), load(out / "rl_snapshot_16.pt"))
    assert metrics(straight) == metrics(out)


# ---- numerical guard ----------------------------------------------------------------------------
def test_non_finite_loss_skips_the_update_and_stops_after_max_bad_steps(monkeypatch):
    trainer = make_trainer(max_bad_steps=3)
    trainer.train_step()
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    real = algorithms.compute_policy_loss
    monkeypatch.setattr(math_trainer, "compute_policy_loss",
                        lambda *a, **k: (real(*a, **k)[0] * float("nan"), real(*a, **k)[1]))
    for expected in (1, 2):
        metrics = trainer.train_step()
        assert metrics["train/skipped_steps"] == expected
        assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    with pytest.raises(TrainingError, match="non-finite loss or gradient norm for 3 steps in a row \\(up to step 4\\)"):
        trainer.train_step()
    assert trainer.weights_are_finite()
    monkeypatch.setattr(math_trainer, "compute_policy_loss", real)
    trainer.bad_steps_in_a_row = 0
    trainer.train_step()  # a finite step updates again and resets the count
    assert trainer.bad_steps_in_a_row == 0 and not torch.equal(before["wte.weight"], trainer.model.wte.weight)


# ---- crash-safe snapshot files ----------------------------------------------------------------
def test_disk_full_while_saving_keeps_the_previous_snapshot(tmp_path, monkeypatch):
    path = tmp_path / "rl_snapshot_1.pt"
    snapshot.save_atomic({"model": {"w": torch.ones(3)}, "model_args": {}}, str(path))

    def full_disk(obj, f):
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        snapshot.save_atomic({"model": {"w": torch.zeros(3)}}, str(path))
    monkeypatch.undo()
    assert torch.equal(load(path)["model"]["w"], torch.ones(3))
    assert os.listdir(tmp_path) == ["rl_snapshot_1.pt"]  # no temporary file left behind


def test_disk_full_in_a_run_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from rl import rl_ddp
    calls = {"n": 0}
    real = rl_ddp.save_atomic

    def fills_up(obj, path):
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(obj, path)
    monkeypatch.setattr(rl_ddp, "save_atomic", fills_up)
    code = rl_ddp.main([*TINY_ARGS, "--no_wandb", "--rl_train_steps=4", "--save_interval=2", f"--out_dir={tmp_path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"error: could not write {tmp_path}/rl_snapshot_4.pt (No space left on device); the previous "
                   f"snapshot is intact: free some space and run the same command to continue"]
    assert load(tmp_path / "rl_snapshot_2.pt")["step"] == 2


def test_keep_snapshots_prunes_only_after_the_new_one_is_written(tmp_path):
    run([*TINY_ARGS, "--no_wandb", "--rl_train_steps=6", "--save_interval=1", "--keep_snapshots=2",
         f"--out_dir={tmp_path}"])
    assert sorted(p.name for p in tmp_path.glob("rl_snapshot_*.pt")) == ["rl_snapshot_5.pt", "rl_snapshot_6.pt"]


def test_truncated_newest_snapshot_falls_back_to_the_previous_one(tmp_path):
    args = [*TINY_ARGS, "--no_wandb", "--rl_train_steps=4", "--save_interval=2", f"--out_dir={tmp_path}"]
    run(args)
    newest = tmp_path / "rl_snapshot_4.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # what a crash mid-write without os.replace would leave
    proc = run([*args, "--rl_train_steps=6"])
    warning = [l for l in proc.stdout.splitlines() if l.startswith("warning:")]
    assert len(warning) == 1 and f"snapshot {newest} is unreadable" in warning[0]
    assert "falling back to the previous snapshot" in warning[0]
    assert "Resumed from" in proc.stdout and "at step 2/6" in proc.stdout


def test_snapshots_refuse_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    path = tmp_path / "evil.pt"
    torch.save({"model": Evil(), "model_args": {}}, path)
    with pytest.raises(Exception, match="is unreadable"):
        snapshot.load_snapshot(str(path))


# ---- bad input: one line, exit 2 ------------------------------------------------------------------
def one_line_error(args, env=None):
    proc = run(args, check=False, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("args,message", [
    (["--config_name", "NoSuchConfig"], "error: unknown config 'NoSuchConfig'; known configs: "),
    (["--lerning_rate=1e-3"], "error: unknown option --lerning_rate; did you mean --learning_rate?"),
    (["--ndigit=3.5"], "error: --ndigit expects an integer, got '3.5'"),
    (["--rl_rollout_size=-2"], "error: rl_rollout_size must be positive, got -2"),
    (["--learning_rate=inf"], "error: --learning_rate must be a finite number, got 'inf'"),
    (["--n_embed=100"], "error: n_embed=100 is not divisible by n_head=8"),
    (["--ndigit=9", "--n_position=24"], "error: adder with ndigit=9 needs 31 positions"),
    (["--rewards=exact_match,bonus"], "error: unknown reward 'bonus'"),
    (["--rl_algorithm=sarsa"], "error: unknown rl_algorithm 'sarsa'"),
    (["--resume=does/not/exist.pt"], "error: --resume=does/not/exist.pt: no such file"),
    (["--backend=nccl"], "error: backend='nccl' needs CUDA, which this run does not use; use --backend=gloo"),
])
def test_bad_input(args, message):
    assert one_line_error(args).startswith(message)


def test_bad_input_batch_not_divisible_by_the_ranks():
    env = {**script_env(), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "3"}  # as torchrun would set them
    assert one_line_error([], env=env) == ("error: rl_batch_size=64 is not divisible by the 3 processes; "
                                           "use a multiple of 3")


def test_bad_input_out_dir_not_writable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert one_line_error([f"--out_dir={blocker}/run"]).startswith(
        f"error: cannot write to out_dir '{blocker}/run' (Not a directory); pass --out_dir=<a writable folder>")


def test_bad_input_corrupt_snapshot_given_explicitly(tmp_path):
    bad = tmp_path / "rl_snapshot_3.pt"
    bad.write_bytes(b"this is not a snapshot")
    assert one_line_error([f"--resume={bad}"]).startswith(f"error: --resume: snapshot {bad} is unreadable")


@pytest.mark.slow
def test_bad_input_snapshot_of_another_shape_or_task(tmp_path):
    run([*TINY_ARGS, "--no_wandb", "--rl_train_steps=2", f"--out_dir={tmp_path}"])
    shape = one_line_error([*TINY_ARGS, "--no_wandb", "--n_layer=2", f"--out_dir={tmp_path}"])
    assert "holds a model of n_layer=1" in shape and "but the config asks for n_layer=2" in shape
    task = one_line_error([*TINY_ARGS, "--no_wandb", "--task=subtractor", f"--out_dir={tmp_path}"])
    assert "was trained on task" in task and "'adder'" in task and "'subtractor'" in task


@pytest.mark.slow
def test_wandb_without_login_goes_offline_with_a_notice(tmp_path):
    env = {k: v for k, v in script_env().items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), WANDB_CONFIG_DIR=str(tmp_path / "cfg"), NETRC=str(tmp_path / "netrc"))
    proc = run([*TINY_ARGS, "--rl_train_steps=2", f"--out_dir={tmp_path / 'run'}"], env=env)
    notice = [l for l in proc.stdout.splitlines() if l.startswith("wandb: not logged in")]
    assert len(notice) == 1 and "logging offline" in notice[0]
    assert list((tmp_path / "run" / "wandb").glob("offline-run-*"))


def test_stopped_warm_start_continues_to_the_same_weights(tmp_path):
    from rl.dist import DistInfo
    from rl.warm_start import init_policy

    settings = dict(init_from="sft", sft_max_steps=12, sft_batch_size=32, sft_eval_interval=4, sft_save_interval=5,
                    sft_target_accuracy=1.0, sft_num_eval=20)

    steps_taken = []

    def warm_start(out_dir, stop_after=None):
        trainer = make_trainer(out_dir=str(out_dir), **settings)
        steps_taken.clear()

        def should_stop():  # asked once after every supervised step
            steps_taken.append(1)
            return stop_after is not None and len(steps_taken) >= stop_after
        return init_policy(trainer.config, trainer.env, trainer.model, DistInfo(), trainer.eval_a, trainer.eval_b,
                           lambda *_: None, should_stop)

    assert warm_start(tmp_path / "straight")["warm_start_steps"] == 12
    assert warm_start(tmp_path / "stopped", stop_after=7) is None  # stopped after its 7th step
    progress = torch.load(tmp_path / "stopped" / "warm_start_progress.pt", weights_only=True)
    assert progress["step"] == 7
    assert warm_start(tmp_path / "stopped")["warm_start_steps"] == 12  # the same command continues...
    assert len(steps_taken) == 5  # ...with the 5 steps that were missing
    assert not (tmp_path / "stopped" / "warm_start_progress.pt").exists()
    straight = torch.load(tmp_path / "straight" / "warm_start.pt", weights_only=True)["model"]
    continued = torch.load(tmp_path / "stopped" / "warm_start.pt", weights_only=True)["model"]
    for name in straight:
        assert torch.equal(straight[name], continued[name]), name
