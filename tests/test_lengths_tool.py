"""rl/tools/lengths.py: the longest length an arm holds, the table over seeds, and the supervised arm."""

import json
import os
import sys

import numpy as np
import pytest
import torch

from model.gpt import GPT, GPTConfig
from rl.long_env import LongAdditionEnvironment, number_lengths
from rl.math_env import SPLITS
from rl.tools.lengths import ARMS, longest_holding, supervised_arm, table


def test_longest_holding_stops_at_the_first_length_below_the_threshold():
    by_length = {"5": 1.0, "10": 0.995, "15": 0.98, "20": 0.999, "30": 0.4}
    assert longest_holding(by_length, 0.99) == 10  # 20 holds again, but 15 broke the run
    assert longest_holding(by_length, 0.5) == 20
    assert longest_holding({"5": 0.3, "10": 0.9}, 0.5) is None


def record(seed: int, scale: float) -> dict:
    """A made-up seed's record: greedy accuracy `scale` times a falling curve, the same for pass@k."""
    lengths, ks = [5, 10, 20], [1, 8]
    curve = {"5": 1.0, "10": 0.99, "20": 0.6}
    arm = lambda s: {"test": {L: {"greedy": v * s, "pass@1": v * s / 2, "pass@8": v * s} for L, v in curve.items()}}
    return {"lengths": lengths, "ks": ks, "key": {"seed": seed},
            "arms": {"none": arm(scale * 0.5), "sft": arm(scale * 0.9), "rl": arm(scale)}}


def test_table_gives_medians_over_seeds_and_the_longest_lengths_held():
    text = table([record(0, 1.0), record(1, 0.99), record(2, 1.0)])
    lines = text.splitlines()
    rl = next(line for line in lines if line.startswith("| + RL |"))
    # at 10 digits: 0.99, 0.9801, 0.99 -> median 0.99 (0.98-0.99); holds >= 0.99 up to 10 in two seeds of three
    assert "| 0.99 (0.98-0.99) |" in rl and rl.endswith("| 10 (5-10) | 20 (20-20) |")
    none = next(line for line in lines if line.startswith("| warm start only |"))
    # never >= 0.99; >= 0.5 at 5 digits (0.5) but not 10 (0.495), and in seed 1 not even at 5 (0.495): None, counted 0
    assert none.endswith("| 0 (0-0) | 5 (0-5) |")
    assert "| + supervised | 20 | 0.270 (0.267-0.270) | 0.540 (0.535-0.540) |" in text  # exact pass@1, pass@8


def test_the_supervised_arm_trains_for_its_seconds_on_the_range_it_is_given():
    class Config:
        sft_learning_rate, weight_decay, adam_beta1, adam_beta2, sft_batch_size, grad_clip = 1e-3, 0.0, 0.9, 0.99, 8, 1.0
    env = LongAdditionEnvironment((1, 4), positions="coupled", max_position_offset=3)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=env.vocab_size, n_position=env.num_position_ids, n_layer=1, n_head=2, n_embed=16))
    before = [p.detach().clone() for p in model.parameters()]
    assert supervised_arm(model, Config, env, 0.0, seed=0) == {"sft_steps": 0, "sft_seconds": 0.0}
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    done = supervised_arm(model, Config, env, 0.5, seed=0)
    assert done["sft_steps"] > 0 and 0.5 <= done["sft_seconds"] < 5
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters())) and not model.training
    assert set(ARMS) == {"none", "sft", "rl"}


def test_a_rerun_seed_keeps_only_its_cached_warm_start_and_its_padded_phase(tmp_path):
    from rl.tools.lengths import fresh_folder_but_the_warm_start
    out = tmp_path / "LongAdderRLConfig-seed0"
    out.mkdir()
    (out / "warm_start.pt").write_bytes(b"the warm start")
    (out / "warm_start_padded.pt").write_bytes(b"its padded phase")
    (out / "warm_start_progress.pt").write_bytes(b"a phase in progress")
    (out / "rl_snapshot_100.pt").write_bytes(b"an older run's snapshot")
    (out / "metrics.jsonl").write_text("{}\n")
    fresh_folder_but_the_warm_start(str(out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["LongAdderRLConfig-seed0"]
    assert sorted(p.name for p in out.iterdir()) == ["warm_start.pt", "warm_start_padded.pt"]
    assert (out / "warm_start.pt").read_bytes() == b"the warm start"
    assert (out / "warm_start_padded.pt").read_bytes() == b"its padded phase"
    fresh_folder_but_the_warm_start(str(out / "none-yet"))  # a seed never run: an empty folder
    assert list((out / "none-yet").iterdir()) == []


def test_a_seed_stopped_on_the_way_continues_and_a_finished_one_starts_over(tmp_path):
    from rl.tools.lengths import start_or_continue
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    for name in ("warm_start.pt", "rl_snapshot_50.pt", "metrics.jsonl"):
        (stopped / name).write_bytes(name.encode())
    assert start_or_continue(str(stopped)) == "auto"
    assert sorted(p.name for p in stopped.iterdir()) == ["metrics.jsonl", "rl_snapshot_50.pt", "warm_start.pt"]
    finished = tmp_path / "finished"
    finished.mkdir()
    for name in ("warm_start.pt", "rl_snapshot_100.pt", "metrics.jsonl", "summary.json"):
        (finished / name).write_bytes(name.encode())
    assert start_or_continue(str(finished)) == "never"
    assert sorted(p.name for p in finished.iterdir()) == ["warm_start.pt"]
    assert start_or_continue(str(tmp_path / "never-run")) == "never"
    assert list((tmp_path / "never-run").iterdir()) == []


def test_rl_seconds_count_each_step_line_of_the_metrics_once_and_nothing_else(tmp_path):
    from rl.tools.lengths import rl_train_seconds
    lines = [{"step": 0, "val/accuracy": 0.5},  # the evaluation RL starts from: no step
             {"step": 1, "perf/step_seconds": 2.5}, {"step": 2, "perf/step_seconds": 0.25, "val/accuracy": 0.6},
             {"step": 3, "perf/step_seconds": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert rl_train_seconds(str(tmp_path)) == 3.75


def test_warm_start_tries_run_each_once_and_the_best_on_validation_is_chosen(tmp_path, monkeypatch):
    """choose_warm_start: sft_seed = seed + 1000 k, each try a warm-start-only run in its own folder (the seed's
    RL settings dropped), judged by try_accuracy (scripted here: its own test is below); the best wins, the
    earliest on a tie; a try already done is read back, not run again."""
    from rl.tools import lengths
    launched = []

    def fake_run(args, log_path):  # stands in for the run: what it would leave behind, a summary
        out = next(a.split("=", 1)[1] for a in args if a.startswith("--out_dir="))
        launched.append([a for a in args if a.startswith(("--sft_seed", "--rl_train_steps", "--resume", "--seed"))])
        with open(os.path.join(out, "summary.json"), "w") as f:
            json.dump({"warm_start_seconds": 100.0 + len(launched)}, f)
    scores = {3: 0.5, 1003: 0.9, 2003: 0.9}
    monkeypatch.setattr(lengths.launch, "run", fake_run)
    monkeypatch.setattr(lengths, "try_accuracy", lambda config, num: scores[config.sft_seed])
    out = str(tmp_path / "LongAdderRLConfig-seed3")
    choice = lengths.choose_warm_start("LongAdderRLConfig", 3, ["rl_train_steps=7", "carry_column=true"], out,
                                       lengths.Tries(3), 50)
    assert choice == {"sft_seed": 1003, "length": 20, "num": 50, "accuracy": {"3": 0.5, "1003": 0.9, "2003": 0.9},
                      "seconds": {"3": 101.0, "1003": 102.0, "2003": 103.0}}
    assert launched == [["--seed=3", f"--sft_seed={x}", "--rl_train_steps=0", "--resume=never"] for x in (3, 1003, 2003)]
    assert sorted(os.listdir(out + ".warm-starts")) == ["sft_seed1003", "sft_seed2003", "sft_seed3"]
    scores[3] = 0.95  # read back: the same folders, nothing run again
    assert lengths.choose_warm_start("LongAdderRLConfig", 3, [], out, lengths.Tries(3), 50)["sft_seed"] == 3
    assert len(launched) == 3
    # with a target, the tries stop at the first that reaches it
    scores.update({3: 0.5, 1003: 0.96, 2003: 0.99})
    choice = lengths.choose_warm_start("LongAdderRLConfig", 3, [], str(tmp_path / "other"), lengths.Tries(3, 0.95), 50)
    assert choice["sft_seed"] == 1003 and choice["accuracy"] == {"3": 0.5, "1003": 0.96} and len(launched) == 5


def test_a_try_is_judged_on_validation_sums_of_rl_s_longest_length(tmp_path, monkeypatch):
    from rl import warm_start
    from rl.rl_ddp import config_from_args
    from rl.snapshot import save_atomic
    from rl.tools import lengths
    config = config_from_args(["--config_name", "LongAdderRLConfig", f"--out_dir={tmp_path}", "--rl_ndigits=1-12"])
    torch.manual_seed(0)
    model = GPT(GPTConfig(**config.model_args()))
    save_atomic({"kind": "warm_start", "model": model.state_dict(), "model_args": config.model_args()},
                str(tmp_path / "warm_start.pt"))
    seen = []
    real = lengths.evaluate

    def spy(model, env, a, b, info, **kw):
        seen.append((env.split_of(a, b), number_lengths(a), number_lengths(b), kw["split"]))
        return real(model, env, a, b, info, **kw)
    monkeypatch.setattr(lengths, "evaluate", spy)
    assert lengths.try_accuracy(config, 30) == 0.0  # (random weights)
    [(splits, la, lb, split)] = seen
    assert split == "validation" and (splits == SPLITS.index("validation")).all() and len(splits) == 30
    assert (np.maximum(la, lb) == 12).all()
    assert warm_start.start_path(config) == str(tmp_path / "warm_start.pt")


def test_the_chosen_warm_start_replaces_the_run_s_own(tmp_path):
    from rl.tools.lengths import take_warm_start
    chosen, out = tmp_path / "try", tmp_path / "run"
    chosen.mkdir()
    out.mkdir()
    (chosen / "warm_start.pt").write_bytes(b"chosen")
    (chosen / "warm_start_padded.pt").write_bytes(b"chosen, padded")
    (out / "warm_start.pt").write_bytes(b"the run's own")
    take_warm_start(str(chosen), str(out))
    assert sorted(p.name for p in out.iterdir()) == ["warm_start.pt", "warm_start_padded.pt"]
    assert (out / "warm_start.pt").read_bytes() == b"chosen"
    assert (out / "warm_start_padded.pt").read_bytes() == b"chosen, padded"


def test_a_seed_whose_own_warm_start_wins_reads_its_plain_run_back(tmp_path, monkeypatch):
    """With tries, a seed whose best warm start is its own (sft_seed = seed) is the run without tries: the same
    warm start file and RL draws. Its saved record is read back (arms, seconds), not run again, and saved under
    the tries' name with the choice; a seed whose best is another try has no such run to read."""
    from rl.tools import lengths
    monkeypatch.setattr(lengths.results, "ROOT", str(tmp_path / "results"))
    plain = {"key": {"config": "LongAdderRLConfig", "seed": 4, "overrides": ["carry_column=true"]},
             "command": "python -m rl.tools.lengths --config LongAdderRLConfig --seeds 4 --set carry_column=true",
             "arms": {"rl": {"test": {"40": {"greedy": 0.93}}}}, "rl_train_seconds": 900.0}
    lengths.results.save(plain, lengths.results.path("lengths", "LongAdderRLConfig-carry_column=true-seed4"))
    choice = {"sft_seed": 4, "length": 20, "num": 200, "accuracy": {"4": 0.99, "1004": 0.98}, "seconds": {}}
    monkeypatch.setattr(lengths, "choose_warm_start", lambda *a: choice)
    monkeypatch.setattr(lengths.launch, "run", lambda *a, **kw: pytest.fail("ran a run that was saved"))
    rec = lengths.run_seed("LongAdderRLConfig", 4, ["carry_column=true"], [40], 200, [1], lengths.Tries(4, 0.95))
    assert rec["key"] == {**plain["key"], "warm_start_tries": 4, "warm_start_target": 0.95}
    assert rec["arms"] == plain["arms"]
    assert rec["warm_start_choice"] == choice and rec["rl_train_seconds"] == 900.0
    assert rec["arms_from"] == os.path.join("lengths", "LongAdderRLConfig-carry_column=true-seed4.json")
    assert rec["command"] == plain["command"] + " --warm_start_tries 4 --warm_start_target 0.95"
    saved = tmp_path / "results" / "lengths" / ("LongAdderRLConfig-carry_column=true+warm_start_tries=4+"
                                                "warm_start_target=0.95-seed4.json")
    assert json.loads(saved.read_text()) == rec
    assert lengths.saved(overrides=["carry_column=true"], tries=lengths.Tries(4, 0.95)) == [rec]
    assert lengths.saved(overrides=["carry_column=true"], tries=lengths.Tries(4)) == []
    assert lengths.saved(overrides=["carry_column=true"]) == [plain]
    choice["sft_seed"] = 1004
    monkeypatch.chdir(tmp_path)  # (the run's folder: out/lengths/ under the working directory)
    with pytest.raises(pytest.fail.Exception, match="ran a run"):
        lengths.run_seed("LongAdderRLConfig", 4, ["carry_column=true"], [40], 200, [1], lengths.Tries(3))


@pytest.mark.parametrize("argv, message", [
    (["--warm_start_tries", "2", "--set", "sft_seed=3"],
     "--warm_start_tries chooses sft_seed itself; leave sft_seed out of --set"),
    (["--warm_start_tries", "0"], "--warm_start_tries must be 1 to 1000, got 0"),
    (["--warm_start_tries", "2", "--warm_start_target", "1.5"], "--warm_start_target must be in (0, 1], got 1.5"),
    (["--table", "--ndigits", "10", "0"], "--ndigits takes positive integers, got 0"),
    (["--k", "1", "-8"], "--k takes positive integers, got -8"),
    (["--num", "0"], "--num takes positive integers, got 0"),
])
def test_a_choice_of_warm_starts_it_cannot_make_is_refused_in_one_line(argv, message, monkeypatch, capsys):
    """`python -m rl.tools.lengths ARGV` in process (its checks come before anything runs; the snippet tests run
    the command itself): exit 2, nothing on stdout, the usage and one line of error on stderr."""
    from rl.tools import lengths
    monkeypatch.setattr(lengths.launch, "run", lambda *a, **kw: pytest.fail("ran a run"))  # (were a check gone)
    monkeypatch.setattr(sys, "argv", ["lengths.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        lengths.main()
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert err.startswith("usage: lengths.py") and err.splitlines()[-1] == f"lengths.py: error: {message}"


def test_a_setting_the_script_would_refuse_is_refused_before_a_seed_runs(tmp_path, monkeypatch):
    """--set as rl/rl_ddp.py reads it: one line (exit 1, as the run's own refusal would end the tool), no run and
    no run folder left behind."""
    from rl.tools import lengths
    monkeypatch.chdir(tmp_path)  # (a run's folder: out/lengths/ under the working directory)
    monkeypatch.setattr(lengths.launch, "run", lambda *a, **kw: pytest.fail("ran a run"))
    monkeypatch.setattr(sys, "argv", ["lengths.py", "--seeds", "7", "--set", "rl_ndigts=1-20"])
    with pytest.raises(SystemExit) as exit_:
        lengths.main()
    assert exit_.value.code == ("error: unknown option --rl_ndigts; did you mean --rl_ndigits? "
                                "(--help lists every option)")
    assert list(tmp_path.iterdir()) == []


def test_the_choice_line_names_the_warm_start_chosen_each_try_and_their_seconds():
    from rl.tools.lengths import choice_line
    key = {"seed": 0, "warm_start_tries": 3, "warm_start_target": 0.95}
    choice = {"sft_seed": 1000, "length": 20, "num": 200, "accuracy": {"0": 0.57, "1000": 0.725, "2000": 0.72},
              "seconds": {"0": 925.0, "1000": 978.4, "2000": 790.0}}
    assert choice_line({"key": key, "warm_start_choice": choice}) == (
        " Seed 0 starts from sft_seed 1000, the best of the 3 tried, none at 0.95 on 200 validation sums of 20 "
        "digits (sft_seed 0: 0.570 (925 s), sft_seed 1000: 0.725 (978 s), sft_seed 2000: 0.720 (790 s); 2693 s of "
        "warm starts in all).")
    one = {"sft_seed": 1, "length": 20, "num": 200, "accuracy": {"1": 0.99}, "seconds": {"1": 851.0}}
    assert choice_line({"key": {**key, "seed": 1}, "warm_start_choice": one}) == (
        " Seed 1 starts from sft_seed 1, the first of its warm starts to reach 0.95 on 200 validation sums of 20 "
        "digits (sft_seed 1: 0.990 (851 s); 851 s of warm starts in all).")


def made_record(overrides: list, seed: int = 0, **changed) -> dict:
    """A record as run_seed saves one, with the settings its run was made with: what the key gives today,
    with `changed` set in place of today's values (None: left out, as by a run made before the setting)."""
    from rl.rl_ddp import config_from_args
    config = config_from_args(["--config_name", "LongAdderRLConfig", f"--seed={seed}",
                               *[f"--{kv}" for kv in overrides]]).to_dict()
    config.update({k: v for k, v in changed.items() if v is not None})
    for name in [k for k, v in changed.items() if v is None]:
        del config[name]
    return {"key": {"config": "LongAdderRLConfig", "seed": seed, "overrides": overrides}, "config": config,
            "arms": {"rl": {"test": {"40": {"greedy": 0.5}}}}}


def test_a_record_made_with_other_settings_than_its_key_gives_today_is_refused(tmp_path, monkeypatch):
    """After a preset changes a default, the files made before it no longer describe what their command runs:
    run_seed does not read such a file back as these settings' run, nor does a table take it (one line, naming
    each setting that differs). A setting the record predates counts as its BaseRLConfig default."""
    from rl.tools import lengths
    monkeypatch.setattr(lengths.results, "ROOT", str(tmp_path / "results"))
    monkeypatch.setattr(lengths.launch, "run", lambda *a, **kw: pytest.fail("ran a run"))
    same = made_record(["rl_train_steps=7"], out_dir="elsewhere", attention_globals=None)
    lengths.results.save(same, lengths.results.path("lengths", "LongAdderRLConfig-rl_train_steps=7-seed0"))
    assert lengths.run_seed("LongAdderRLConfig", 0, ["rl_train_steps=7"], [40], 200, [1]) == same
    assert lengths.saved(overrides=["rl_train_steps=7"]) == [same]
    chosen = {**made_record(["rl_train_steps=7"], sft_seed=1000), "key": {**same["key"], "warm_start_tries": 2}}
    assert lengths.stale_settings(chosen) == []  # the warm start tries chose (its key says so)
    assert lengths.stale_settings(made_record(["rl_train_steps=7"], sft_seed=1000)) == ["sft_seed=1000 (now -1)"]
    file = lengths.results.path("lengths", "LongAdderRLConfig-seed2")
    lengths.results.save(made_record([], seed=2, rl_train_steps=50, positions=None), file)
    with pytest.raises(SystemExit) as stop:
        lengths.run_seed("LongAdderRLConfig", 2, [], [40], 200, [1])
    assert str(stop.value) == (
        f"error: {file} was made with other settings than its command gives today: positions='absolute' (now "
        f"'coupled'), rl_train_steps=50 (now 100); move it away to run these settings, or name those values in "
        f"its key and its file's name to keep it (results/lengths/README.md)")
    with pytest.raises(SystemExit, match=r"^error: the record of LongAdderRLConfig-seed2 was made with other "
                                         r"settings than its command gives today: positions="):
        lengths.saved()


def test_the_provenance_line_names_each_machine_with_its_seeds_where_they_differ():
    from rl.tools.lengths import machines
    recs = [{"cpu": cpu, "key": {"seed": s}} for s, cpu in [(0, "Intel Xeon"), (1, "AMD EPYC"), (2, "AMD EPYC")]]
    assert machines(recs) == "Intel Xeon for seed 0, AMD EPYC for seeds 1 and 2"
    assert machines(recs[1:]) == "AMD EPYC"
