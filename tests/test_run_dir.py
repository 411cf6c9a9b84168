"""Nothing lost, whatever happens to the run folder (rl/run_dir.py's invariants): every kind of bad
file, real ones, gets its one line and the fall-back to an older snapshot works past each; a torn
metrics line; snapshots that cannot be read are never started over by themselves; a resume from an
earlier snapshot sets the later ones aside; what a resume may change is applied and recorded, the
rest refused; a real full disk (a file-size limit) at each write; and kill -9 in the middle of each
kind of write, again and again, resumes to the uninterrupted run's state.
Run: python -m pytest tests/test_run_dir.py"""

import json
import os
import random
import shutil
import signal
import time

import pytest
import torch

import crash_run
from helpers import TINY_ARGS, args_with, assert_same_state, load, metrics, rl_seconds
from rl import rl_ddp, run_dir
from rl.update import lr_lambda

ARGS = [*TINY_ARGS, "--no_wandb", "--rl_train_steps=4", "--save_interval=2", "--eval_interval=2"]


def main(capsys, args):
    """rl_ddp.main in this process: (exit code, stdout, stderr lines)."""
    code = rl_ddp.main(args)
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def one_line(capsys, args, code=2):
    got, out, err = main(capsys, args)
    assert got == code and len(err) == 1 and err[0].startswith("error: "), (got, out, err)
    return err[0]


def files(folder) -> dict:
    """{relative path: bytes} of everything in a folder, lock files aside: to show nothing changed."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            if not name.startswith(".lock"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, folder)] = f.read()
    return found


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 4-step run (snapshots at steps 2 and 4, metrics of steps 0-4), made once."""
    out = tmp_path_factory.mktemp("finished")
    assert rl_ddp.main([*ARGS, f"--out_dir={out}"]) == 0
    return out


def copy_of(finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


# ---- every way a file can be bad --------------------------------------------------------------------
def evil(path):
    class Code:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    torch.save({"model": Code(), "model_args": {}}, path)


def without_a_tensor(path):
    snap = load(path)
    del snap["model"]["wpe.weight"]
    torch.save(snap, path)


def misshapen(path):
    snap = load(path)
    snap["model"]["wpe.weight"] = torch.zeros(3, 3)
    torch.save(snap, path)


def another_kind(path):
    snap = load(path)
    torch.save({"kind": "warm_start", "model": snap["model"], "model_args": snap["model_args"],
                "task": snap["task"]}, path)


def not_finite(path):
    snap = load(path)
    snap["model"]["wpe.weight"][3, 1] = float("nan")
    torch.save(snap, path)


def not_a_dict(path):
    torch.save([1, 2, 3], path)


BAD_FILES = {  # name -> (make it bad in place, what the one line says of it)
    "empty": (lambda p: open(p, "wb").close(), "is unreadable (the file is empty)"),
    "truncated": (lambda p: open(p, "r+b").truncate(1000), "is unreadable (truncated or damaged: "),
    "not a torch file": (lambda p: open(p, "w").write("hello\n"), "is unreadable (not a file written by torch.save)"),
    "code inside": (evil, "is unreadable (it holds code or objects other than tensors and plain types, which are "
                          "refused)"),
    "a tensor missing": (without_a_tensor, "lacks weights (wpe.weight) for its model_args"),
    "a tensor misshapen": (misshapen, "has misshapen weights (wpe.weight) for its model_args"),
    "not a dict": (not_a_dict, "is not a MathRL snapshot (no model and model_args in it)"),
    "a tensor not finite": (not_finite, "holds non-finite weights (wpe.weight); it cannot be started from"),
}


@pytest.mark.parametrize("kind", BAD_FILES)
def test_each_bad_file_is_one_line_for_resume_init_from_and_the_cached_warm_start(tmp_path, capsys, finished, kind):
    spoil, says = BAD_FILES[kind]
    bad = tmp_path / "bad.pt"
    shutil.copy(finished / "rl_snapshot_4.pt", bad)
    spoil(bad)
    out = tmp_path / "fresh"
    line = one_line(capsys, [*ARGS, f"--out_dir={out}", f"--resume={bad}"])
    assert line.startswith(f"error: --resume: ") and says in line and line.endswith(
        "; pass another file or --resume=never"), line
    line = one_line(capsys, [*args_with(ARGS, init_from=bad), f"--out_dir={out}"])
    assert line.startswith(f"error: --init_from: ") and says in line, line
    shutil.copy(bad, out / "warm_start.pt")
    line = one_line(capsys, [*args_with(ARGS, init_from="sft"), f"--out_dir={out}"])
    assert line.startswith(f"error: cached warm start: ") and says in line, line


def test_a_file_of_another_kind_given_to_resume_says_where_it_belongs(tmp_path, capsys, finished):
    warm = tmp_path / "warm.pt"
    shutil.copy(finished / "rl_snapshot_4.pt", warm)
    another_kind(warm)
    line = one_line(capsys, [*ARGS, f"--out_dir={tmp_path / 'run'}", f"--resume={warm}"])
    assert line == (f"error: --resume: {warm} is not an RL snapshot (warm_start); to start RL from its weights use "
                    f"--init_from={warm}; pass another file or --resume=never")


@pytest.mark.parametrize("kind", [*BAD_FILES, "another kind"])
def test_the_run_falls_back_past_each_bad_newest_snapshot_and_sets_it_aside(tmp_path, capsys, finished, kind):
    """Snapshot 4 spoiled: the same command resumes from 2, ends in exactly the finished run's state,
    and the spoiled file is kept aside, not deleted and never resumed from again."""
    out = copy_of(finished, tmp_path)
    spoil = another_kind if kind == "another kind" else BAD_FILES[kind][0]
    spoil(out / "rl_snapshot_4.pt")
    spoiled = (out / "rl_snapshot_4.pt").read_bytes()
    code, stdout, err = main(capsys, [*ARGS, f"--out_dir={out}"])
    assert code == 0, err
    warning = [line for line in stdout.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and warning[0].endswith("; falling back to the previous snapshot"), warning
    assert f"Resumed from {out / 'rl_snapshot_2.pt'} at step 2/4" in stdout
    assert_same_state(load(finished / "rl_snapshot_4.pt"), load(out / "rl_snapshot_4.pt"))
    assert metrics(finished) == metrics(out)
    [aside] = (out / "set_aside").iterdir()
    assert (aside / "rl_snapshot_4.pt").read_bytes() == spoiled
    assert [row["step"] for row in run_dir.read_metrics(str(aside))] == [0, 1, 2, 3, 4]  # the copy, in full


def test_when_no_snapshot_can_be_read_nothing_is_deleted_and_the_run_says_how_to_start_over(tmp_path, capsys,
                                                                                               finished):
    out = copy_of(finished, tmp_path)
    for step in (2, 4):
        (out / f"rl_snapshot_{step}.pt").write_bytes(b"")
    before = files(out)
    code, stdout, err = main(capsys, [*ARGS, f"--out_dir={out}"])
    assert code == 2 and err == [f"error: none of the 2 snapshot(s) in {out} can be read (see the warnings above) and "
                                 f"nothing was changed; pass --resume=never to start over (it deletes them), or "
                                 f"--resume=PATH to continue from another file"]
    warnings = [line for line in stdout.splitlines() if line.startswith("warning: ")]
    assert warnings[0].endswith("falling back to the previous snapshot")
    assert warnings[1].endswith("no older snapshot is left")
    assert files(out) == before


def test_a_warm_start_whose_weights_blew_up_stops_before_saving_them(tmp_path, capsys):
    """A learning rate of 1e4 without clipping: the weights overflow within a few steps, and the progress
    save refuses them (exit 1) rather than writing what the same command would continue from."""
    out = tmp_path / "run"
    args = [*args_with(ARGS, init_from="sft", sft_max_steps=40, sft_learning_rate=1e4, grad_clip=0, sft_warmup_steps=0,
                       sft_target_accuracy=1.0, sft_eval_interval=40, sft_save_interval=10), f"--out_dir={out}"]
    line = one_line(capsys, args, code=1)
    assert line == ("error: the warm start's weights are not finite at step 10, so they are not saved (the previous "
                    "progress is intact); lower sft_learning_rate or keep grad_clip on")
    assert not (out / "warm_start_progress.pt").exists()


# ---- metrics.jsonl ------------------------------------------------------------------------------------
def write_lines(out, steps, torn=b""):
    out.mkdir(exist_ok=True)
    (out / "metrics.jsonl").write_bytes(b"".join(json.dumps({"step": s, "x": s / 3}).encode() + b"\n"
                                                 for s in steps) + torn)


def test_a_torn_last_line_is_dropped_with_a_note_and_truncation_keeps_exactly_the_steps_up_to_the_snapshot(tmp_path):
    write_lines(tmp_path, range(9), torn=b'{"step": 9, "x": 0.3')
    notes = []
    assert [r["step"] for r in run_dir.read_metrics(str(tmp_path), warn=notes.append)] == list(range(9))
    assert notes == [f"note: dropped the torn last line of {tmp_path / 'metrics.jsonl'} (a run stopped while "
                     f"writing it)"]
    run_dir.truncate_metrics(str(tmp_path), 4, warn=notes.append)
    # the snapshot of step 4 holds what logged step 4: step 5's line is redone by the resumed run, so kept it
    # would be logged twice
    assert (tmp_path / "metrics.jsonl").read_bytes() == b"".join(
        json.dumps({"step": s, "x": s / 3}).encode() + b"\n" for s in range(5))
    run_dir.truncate_metrics(str(tmp_path))
    assert (tmp_path / "metrics.jsonl").read_bytes() == b""


def test_a_damaged_line_before_the_last_is_refused_with_nothing_changed(tmp_path, capsys, finished):
    out = copy_of(finished, tmp_path)
    lines = (out / "metrics.jsonl").read_bytes().split(b"\n")
    lines[2] = lines[2][:40]
    (out / "metrics.jsonl").write_bytes(b"\n".join(lines))
    before = files(out)
    for resume in ("auto", "never"):
        line = one_line(capsys, [*ARGS, f"--out_dir={out}", f"--resume={resume}"])
        assert line == (f"error: {out / 'metrics.jsonl'} line 3 is not a metrics line, and only a last line can be "
                        f"torn by a crash; move the file aside (or delete that line) and run again")
        assert files(out) == before


def test_resume_never_with_a_torn_metrics_line_starts_over_after_checking_what_it_starts_from(tmp_path, capsys,
                                                                                                finished):
    out = copy_of(finished, tmp_path)
    with open(out / "metrics.jsonl", "ab") as f:
        f.write(b'{"step": 5, "tr')
    before = files(out)
    # what it would start from is bad: refused, and nothing deleted
    (tmp_path / "empty.pt").write_bytes(b"")
    line = one_line(capsys, [*args_with(ARGS, init_from=tmp_path / "empty.pt"), f"--out_dir={out}", "--resume=never"])
    assert line.startswith("error: --init_from: snapshot ") and files(out) == before
    code, stdout, err = main(capsys, [*ARGS, f"--out_dir={out}", "--resume=never"])
    assert code == 0, err
    assert "note: dropped the torn last line" in stdout and "Starting over: removed the old snapshots" in stdout
    assert metrics(out) == metrics(finished)  # the same run again, from scratch


def test_another_runs_metrics_found_without_a_snapshot_are_set_aside_not_deleted(tmp_path, capsys):
    out = tmp_path / "run"
    write_lines(out, range(3))
    old = (out / "metrics.jsonl").read_bytes()
    code, stdout, _ = main(capsys, [*ARGS, f"--out_dir={out}"])
    assert code == 0 and "Set aside the metrics and summary of another run" in stdout
    [aside] = (out / "set_aside").iterdir()
    assert (aside / "metrics.jsonl").read_bytes() == old


# ---- --resume=PATH: another future is set aside --------------------------------------------------------
def test_resuming_an_earlier_snapshot_sets_the_later_ones_aside_and_the_next_rerun_continues_the_new_history(
        tmp_path, capsys, finished):
    out = copy_of(finished, tmp_path)
    later = (out / "rl_snapshot_4.pt").read_bytes()
    code, stdout, err = main(capsys, [*args_with(ARGS, learning_rate=2e-3), f"--out_dir={out}",
                                      f"--resume={out / 'rl_snapshot_2.pt'}"])
    assert code == 0, err
    assert "Set aside 1 snapshot(s), the summary and a copy of the metrics in " in stdout
    [aside] = (out / "set_aside").iterdir()
    assert (aside / "rl_snapshot_4.pt").read_bytes() == later and (aside / "summary.json").exists()
    assert metrics(aside) == metrics(finished)  # the abandoned future, every line of it
    rows = metrics(out)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and rows[:3] == metrics(finished)[:3]
    # the new history is the one a plain rerun continues: no step is redone, nothing is mixed
    new = load(out / "rl_snapshot_4.pt")
    code, stdout, _ = main(capsys, [*args_with(ARGS, learning_rate=2e-3), f"--out_dir={out}"])
    assert code == 0 and f"Resumed from {out / 'rl_snapshot_4.pt'} at step 4/4" in stdout
    assert_same_state(new, load(out / "rl_snapshot_4.pt"))
    assert len(list((out / "set_aside").iterdir())) == 1


def test_resuming_another_folders_snapshot_sets_this_folders_history_aside(tmp_path, capsys, finished):
    out = tmp_path / "other"
    assert rl_ddp.main([*args_with(ARGS, seed=7), f"--out_dir={out}"]) == 0
    code, stdout, err = main(capsys, [*ARGS, f"--out_dir={out}", f"--resume={finished / 'rl_snapshot_2.pt'}"])
    assert code == 0, err
    [aside] = (out / "set_aside").iterdir()
    assert sorted(p.name for p in aside.glob("rl_snapshot_*")) == ["rl_snapshot_2.pt", "rl_snapshot_4.pt"]
    assert [r["step"] for r in metrics(out)] == [3, 4]  # this history's lines 0-2 are the other folder's
    assert_same_state(load(finished / "rl_snapshot_4.pt"), load(out / "rl_snapshot_4.pt"))


# ---- what a resume may change --------------------------------------------------------------------------
def test_a_resume_applies_and_records_a_new_learning_rate_and_length(tmp_path, capsys, finished):
    out = copy_of(finished, tmp_path)
    os.remove(out / "rl_snapshot_4.pt")  # a run stopped after step 2's snapshot
    args = [*args_with(ARGS, learning_rate=2e-3, rl_train_steps=6), f"--out_dir={out}"]
    code, stdout, err = main(capsys, args)
    assert code == 0, err
    assert ("Changed from this step on (recorded in config.json): rl_train_steps 4 -> 6, learning_rate 0.001 -> 0.002"
            in stdout)
    lrs = {r["step"]: r["train/lr"] for r in metrics(out) if "train/lr" in r}
    assert lrs[2] == metrics(finished)[2]["train/lr"]  # the past as it ran
    for step in (3, 4, 5, 6):  # step s's update ran after s - 1 updates, on the new schedule
        assert lrs[step] == pytest.approx(2e-3 * lr_lambda(step - 1, warmup_steps=2, total_steps=6, min_lr_ratio=0.1))
    config = run_dir.read_config(str(out))
    assert config["learning_rate"] == 2e-3 and config["rl_train_steps"] == 6
    record = [{"step": 2, "learning_rate": [1e-3, 2e-3], "rl_train_steps": [4, 6]}]
    assert config["changed_on_resume"] == record and load(out / "rl_snapshot_6.pt")["changed_on_resume"] == record
    [aside] = (out / "set_aside").iterdir()  # lines 3 and 4 ran at the old rate: kept, not mixed in
    assert [r["step"] for r in metrics(aside)] == [0, 1, 2, 3, 4]


def test_a_resume_may_turn_prefix_sharing_on(tmp_path, capsys, finished):
    # how the update computes, not what: the same step to float rounding, so a stopped run may take it up
    out = copy_of(finished, tmp_path)
    os.remove(out / "rl_snapshot_4.pt")
    code, stdout, err = main(capsys, [*args_with(ARGS, prefix_sharing="true"), f"--out_dir={out}"])
    assert code == 0, err
    assert "Changed from this step on (recorded in config.json): prefix_sharing False -> True" in stdout
    assert load(out / "rl_snapshot_4.pt")["step"] == 4


@pytest.mark.parametrize("change, message", [
    ("--seed=7", "seed=7, but {path} was made with seed=1337, and a resumed run cannot change what shaped its "
                 "past; use seed=1337, or --resume=never to start over with it"),
    ("--rl_batch_size=8", "rl_batch_size=8, but {path} was made with rl_batch_size=16"),
    ("--rl_train_steps=3", "rl_train_steps=3, but {path} is already at step 4; pass rl_train_steps >= 4, or "
                           "--resume=<an earlier snapshot>"),
])
def test_a_resume_refuses_a_change_to_what_shaped_its_past(tmp_path, capsys, finished, change, message):
    out = copy_of(finished, tmp_path)
    before = files(out)
    key, value = change[2:].split("=")
    line = one_line(capsys, [*args_with(ARGS, **{key: value}), f"--out_dir={out}"])
    assert line.startswith("error: " + message.format(path=out / "rl_snapshot_4.pt")), line
    assert files(out) == before


def test_temporaries_a_killed_writer_left_are_removed_and_never_read(tmp_path, capsys, finished):
    out = copy_of(finished, tmp_path)
    (out / "rl_snapshot_6.pt.tmp.4242").write_bytes(b"half a snapshot")
    code, stdout, _ = main(capsys, [*args_with(ARGS, rl_train_steps=6), f"--out_dir={out}"])
    assert code == 0 and "Removed rl_snapshot_6.pt.tmp.4242, a temporary file a stopped run left" in stdout
    assert not list(out.glob("*.tmp.*")) and load(out / "rl_snapshot_6.pt")["step"] == 6


# ---- a real full disk: a file-size limit on the run's process --------------------------------------------
@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    """Processes of the entry script, forked from a server that imported torch once (tests/crash_run.py)."""
    return crash_run.Runner(str(tmp_path_factory.mktemp("consoles")))


SFT_ARGS = args_with(ARGS, init_from="sft", sft_max_steps=8, sft_target_accuracy=1.0, sft_eval_interval=4,
                     sft_num_eval=20, sft_batch_size=32)


@pytest.mark.slow
def test_a_full_disk_at_each_write_is_one_line_exit_2_and_leaves_the_previous_state(tmp_path, finished, runner):
    """No file may grow past a limit (RLIMIT_FSIZE in the run's process, SIGXFSZ ignored: writes fail
    with EFBIG, as on a full disk), set to fail each kind of write in turn."""
    def fails_writing(out, args, max_bytes, name, intact):
        code, _, err = runner.run([*args, f"--out_dir={out}"], max_bytes=max_bytes)
        assert code == 2 and err.strip().splitlines() == [
            f"error: could not write {out}/{name} (File too large); {intact}: free some space and run the same "
            f"command to continue"], err
        assert not [p for p in os.listdir(out) if ".tmp." in p]  # no temporary left behind

    # the warm start (64 KB here), and its progress (190 KB) after a first save that fits
    fails_writing(tmp_path / "warm", args_with(SFT_ARGS, sft_save_interval=100), 20_000, "warm_start.pt",
                  "its last saved progress, if any, is intact")
    out, args = tmp_path / "progress", args_with(SFT_ARGS, sft_save_interval=4)
    assert runner.run([*args, f"--out_dir={out}"], "progress", 2)[0] == -signal.SIGKILL  # step 4's saved, then killed
    fails_writing(out, args, 20_000, "warm_start_progress.pt", "the previous progress is intact")
    assert load(out / "warm_start_progress.pt")["step"] == 4
    # RL's snapshot (190 KB), its metrics (about 1 KB a line), the summary (0.6 KB)
    out = copy_of(finished, tmp_path)
    os.remove(out / "rl_snapshot_4.pt")
    before = files(out)
    fails_writing(out, ARGS, 40_000, "rl_snapshot_4.pt", "the previous snapshot is intact")
    assert load(out / "rl_snapshot_2.pt")["step"] == 2 and files(out).keys() == before.keys()
    fails_writing(tmp_path / "metrics", args_with(ARGS, save_interval=100), 3_000, "metrics.jsonl",
                  "the snapshots are intact")
    out = copy_of(finished, tmp_path / "resumed")  # the metrics rewritten to step 2's lines, in a temporary
    os.remove(out / "rl_snapshot_4.pt")
    before = files(out)
    code, _, err = runner.run([*ARGS, f"--out_dir={out}"], max_bytes=1_000)
    assert code == 2 and err.strip().splitlines() == [
        f"error: could not write {out} (File too large); nothing in it was lost: free some space and run the same "
        f"command to continue"], err
    assert files(out) == before
    out = copy_of(finished, tmp_path / "again")
    assert rl_ddp.main([*ARGS, f"--out_dir={out}"]) == 0  # resumed at its end: config.json names this folder
    os.remove(out / "summary.json")
    fails_writing(out, ARGS, 300, "summary.json", "the final snapshot is written")
    # with space again, the same command continues to the uninterrupted run's state (past a torn metrics line)
    assert runner.run([*args_with(ARGS, save_interval=100), f"--out_dir={tmp_path / 'metrics'}"])[0] == 0
    assert metrics(tmp_path / "metrics") == metrics(finished)
    assert runner.run([*ARGS, f"--out_dir={out}"])[0] == 0 and run_dir.read_summary(str(out))["final_accuracy"] == \
        run_dir.read_summary(str(finished))["final_accuracy"]


# ---- kill -9 mid-write, again and again ------------------------------------------------------------------
SOAK_ARGS = args_with(ARGS, init_from="sft", sft_max_steps=24, sft_target_accuracy=1.0, sft_eval_interval=8,
                      sft_save_interval=4, sft_num_eval=20, sft_batch_size=32, rl_train_steps=20, save_interval=2,
                      eval_interval=4, keep_snapshots=3)


def crash_point(out, rng) -> tuple:
    """A crash point (what, n) sure to come in the next start, given what the folder holds: the n-th
    write of that kind dies (n = 1: the first, so that start gets no further), or ('timer', 0): a
    SIGKILL at a random moment."""
    if not (out / "warm_start.pt").exists():
        progress = out / "warm_start_progress.pt"
        done = load(progress)["step"] if progress.exists() else 0
        if done == 24:  # every progress saved: the warm start is written next, then RL starts
            return rng.choice([("warm_start", 1), ("metrics", 1), ("snapshot", 1)])
        return rng.choice([("progress", 1)] + [("progress", 2)] * 2 * (done <= 16) + [("warm_start", 1)] * (done == 20))
    steps = [step for step, _ in run_dir.snapshot_steps(str(out))]
    left = 20 - (steps[-1] if steps else 0)
    points = [("metrics", n) for n in range(1, min(left, 4) + 1)] + [("snapshot", n) for n in (1, 2) if 2 * n <= left]
    rows = run_dir.read_metrics(str(out), warn=lambda line: None)
    if rows and rows[-1]["step"] > 20 - left:  # lines past the snapshot: the next start rewrites the file
        points.append(("truncate", 1))
    return rng.choice(points + [("timer", 0)] * 2 * (left >= 10))


@pytest.mark.slow
def test_kill_9_during_every_kind_of_write_always_resumes_to_the_uninterrupted_state(tmp_path, runner):
    """At least 20 SIGKILLs, each in the middle of a write (half a metrics line, half the temporary of a
    snapshot, of the warm start's progress, of the warm start, of a metrics rewrite) or at a random
    moment, each followed by the same command: the end equals a run never interrupted, weights,
    optimizer, selection state and every metrics line, and the warm start's weights."""
    straight = tmp_path / "straight"
    assert runner.run([*SOAK_ARGS, f"--out_dir={straight}"])[0] == 0
    out = tmp_path / "killed"
    args = [*SOAK_ARGS, f"--out_dir={out}"]
    rng = random.Random(0)
    rl_time = rl_seconds(straight)  # a timer kill comes with half of RL left: within 40% of RL's time it lands
    kills = []
    while len(kills) < 30 and not (out / "rl_snapshot_20.pt").exists():
        what, n = crash_point(out, rng)
        if what == "timer":
            proc = runner.start(args)
            time.sleep(rng.uniform(0.0, 0.4 * rl_time))
            proc.kill()
            proc.join()
            code = proc.exitcode
        else:
            code = runner.run(args, what, n)[0]
        if code == -signal.SIGKILL:
            kills.append((what, n))
    assert runner.run(args)[0] == 0
    assert len(kills) >= 20 and {what for what, _ in kills} >= {"progress", "warm_start", "metrics", "snapshot",
                                                                  "truncate", "timer"}, kills
    assert_same_state(load(straight / "rl_snapshot_20.pt"), load(out / "rl_snapshot_20.pt"))
    assert metrics(straight) == metrics(out)
    assert torch.equal(load(straight / "warm_start.pt")["model"]["wte.weight"],
                       load(out / "warm_start.pt")["model"]["wte.weight"])
    assert not (out / "set_aside").exists()  # every rerun continued the one history
