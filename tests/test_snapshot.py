"""Snapshot files and the numbers in them: pruning, a truncated file, pickled code, what a snapshot
may hold, and the numerical guard that keeps non-finite weights out (every other bad file, a real
full disk and crashes mid-write: tests/test_run_dir.py).
Run: python -m pytest tests/test_snapshot.py"""

import os

import pytest
import torch

from helpers import TINY_ARGS, load, make_trainer, run_main
from rl import algorithms, objectives, run_dir, snapshot
from rl.math_trainer import TrainingError


# ---- numerical guard ----------------------------------------------------------------------------
@pytest.mark.parametrize("graphed", [False, True])
def test_non_finite_loss_skips_the_update_and_stops_after_max_bad_steps(monkeypatch, graphed):
    """graphed: the update's graphed path (rl_cuda_graphs; on the CPU it runs eagerly, padded: tests/test_graphs.py)."""
    trainer = make_trainer(max_bad_steps=3, **({"rl_ga_steps": 1} if graphed else {}))
    trainer.updater.graphed = graphed
    trainer.train_step()
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    adam = lambda: [v.clone() for state in trainer.actor.optimizer.state.values() for v in state.values()]
    adam_before = adam()
    real = algorithms.compute_policy_loss
    monkeypatch.setattr(objectives, "compute_policy_loss",
                        lambda *a, **k: (real(*a, **k)[0] * float("nan"), real(*a, **k)[1]))
    for expected in (1, 2):
        metrics = trainer.train_step()
        assert metrics["train/skipped_steps"] == expected
        assert (trainer.updater.graphs is not None) == graphed  # the path asked for took the steps
        assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
        # AdamW's moments and step counts too: the guard skips the whole step (on the device: found_inf)
        adam_now = adam()
        assert len(adam_now) == len(adam_before) > 3 and all(map(torch.equal, adam_before, adam_now))
    with pytest.raises(TrainingError, match="non-finite loss or gradient norm for 3 steps in a row \\(up to step 4\\)"):
        trainer.train_step()
    assert trainer.weights_are_finite()
    monkeypatch.setattr(objectives, "compute_policy_loss", real)
    trainer.bad_steps_in_a_row = 0
    trainer.train_step()  # a finite step updates again and resets the count
    assert trainer.bad_steps_in_a_row == 0 and not torch.equal(before["wte.weight"], trainer.model.wte.weight)


# ---- crash-safe snapshot files ----------------------------------------------------------------
def test_keep_snapshots_prunes_only_after_the_new_one_is_written(tmp_path):
    run_main([*TINY_ARGS, "--no_wandb", "--rl_train_steps=6", "--save_interval=1", "--keep_snapshots=2",
              f"--out_dir={tmp_path}"])
    assert sorted(p.name for p in tmp_path.glob("rl_snapshot_*.pt")) == ["rl_snapshot_5.pt", "rl_snapshot_6.pt"]


def test_snapshots_refuse_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    path = tmp_path / "evil.pt"
    torch.save({"model": Evil(), "model_args": {}}, path)
    with pytest.raises(Exception, match="is unreadable"):
        snapshot.load_snapshot(str(path))


def test_a_snapshot_holds_no_absolute_path(tmp_path):
    trainer = make_trainer(out_dir=str(tmp_path / "run"), init_from="scratch")
    trainer.train_step()
    flat = repr({k: v for k, v in trainer.state_dict().items() if k not in ("model", "optimizer", "ref_model")})
    assert str(tmp_path) not in flat and "/" not in flat.replace("seq-mean-token", "")
    assert trainer.state_dict()["config"]["out_dir"] == ""


def test_a_model_that_differs_only_in_dropout_is_named_by_it():
    args = {"n_layer": 1, "n_head": 2, "n_embed": 32, "n_position": 64, "vocab_size": 14, "dropout": 0.0}
    with pytest.raises(snapshot.ConfigError) as e:
        snapshot.check_compatible({"model_args": args, "task": {}}, "x.pt", {**args, "dropout": 0.1}, {})
    assert str(e.value) == ("x.pt holds a model of n_layer=1, n_head=2, n_embed=32, n_position=64, vocab_size=14, "
                            "dropout=0.0 but the config asks for n_layer=1, n_head=2, n_embed=32, n_position=64, "
                            "vocab_size=14, dropout=0.1; use a matching config or --resume=never")


def test_a_snapshot_of_another_task_given_as_init_from_names_init_froms_fix_not_resumes(tmp_path):
    """--resume=never would refuse the same --init_from file again: the fix is another file, or the warm start."""
    from rl.rl_ddp import config_from_args
    trainer = make_trainer(out_dir=str(tmp_path / "run"), init_from="scratch")  # an adder's
    path = str(tmp_path / "adder.pt")
    snapshot.save_atomic(trainer.state_dict(), path)
    config = config_from_args(["--config_name", "MultiplierRLConfig", f"--init_from={path}",
                               *[f"--{k}={trainer.config.model_args()[k]}" for k in ("n_layer", "n_head", "n_embed")]])
    with pytest.raises(snapshot.ConfigError) as e:
        snapshot.check_init_from(config)
    assert str(e.value).startswith(f"{path} holds a model of ") and "but the config asks for" in str(e.value)
    assert str(e.value).endswith("; use a matching config, or --init_from=sft")


def test_a_file_that_does_not_say_its_task_is_refused():
    args = {"n_layer": 1}
    with pytest.raises(snapshot.ConfigError, match="x.pt does not say which task it was trained on; it cannot be "
                                                   "checked against task"):
        snapshot.check_compatible({"model_args": args}, "x.pt", args, {"task": "adder"})
    with pytest.raises(snapshot.ConfigError, match="x.pt was trained on task"):
        snapshot.check_compatible({"model_args": args, "task": {"task": "multiplier"}}, "x.pt", args, {"task": "adder"})
    snapshot.check_compatible({"model_args": args, "task": {"task": "adder"}}, "x.pt", args, {"task": "adder"})


def test_snapshots_are_ordered_by_step_number_not_by_name(tmp_path):
    """rl_snapshot_10.pt is newer than rl_snapshot_9.pt (as strings it would sort first)."""
    trainer = make_trainer()
    for step in (2, 9, 10):
        trainer.step = step
        snapshot.save_atomic(trainer.state_dict(), str(tmp_path / f"rl_snapshot_{step}.pt"))
    assert [step for step, _ in run_dir.snapshot_steps(str(tmp_path))] == [2, 9, 10]
    snap, path, later = snapshot.newest_valid_snapshot(str(tmp_path))
    assert snap["step"] == 10 and path.endswith("rl_snapshot_10.pt") and later == []
    run_dir.prune_snapshots(str(tmp_path), keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rl_snapshot_10.pt", "rl_snapshot_9.pt"]
