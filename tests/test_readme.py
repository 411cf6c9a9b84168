"""Results as data (rl/tools/results.py, rl/tools/readme.py): the result tables of README.md and
docs/results.md equal what the files in results/ say, every file says how and where it was measured, a measuring tool skips a
run whose file exists, and the plots are matplotlib's (one line on how to install it when missing);
and every row of docs/guarantees.md's audit table names a test that exists.
Run: python -m pytest tests/test_readme.py"""

import argparse
import builtins
import json
import sys

import pytest

from helpers import REPO
from rl.tools import benchmark, compare, readme, results

RECORDS = {tool: results.load(tool) for tool in ("benchmark", "compare")}


@pytest.mark.parametrize("document, blocks", [("README.md", {"headline"}),
                                              ("docs/results.md", {"problem-selection", "compare-AdderRLConfig"})])
def test_the_readme_says_what_the_result_files_say(document, blocks):
    assert document in [d.replace("\\", "/") for d in readme.DOCUMENTS]  # the one the tool renders
    text = (REPO / document).read_text()
    assert readme.render(text, document) == text, f"{document} differs from results/: run python -m rl.tools.readme"
    assert {name for _, name, _, _ in readme.BLOCK.findall(text)} >= blocks


@pytest.mark.parametrize("tool", RECORDS)
def test_every_result_file_says_how_and_where_it_was_measured(tool):
    assert RECORDS[tool], f"results/{tool}/ is empty"
    for rec in RECORDS[tool]:
        assert rec["command"].startswith("python -m rl.tools.")
        assert rec["cpu"] and rec["cores"] >= 1 and rec["threads"] >= 1 and rec["torch"] and rec["commit"]
        config = rec.get("resolved_config") or rec["config"]
        assert config["config_name"] == (rec["key"]["config"] if tool == "compare" else rec["config"])
        summary, curve = rec["summary"], rec.get("evals") or rec["curve"]
        assert curve[0]["step"] == 0 and curve[-1]["step"] == summary["rl_steps_run"]
        assert curve[-1]["test"] == summary["final_accuracy"]  # the curve's end is the run's reported end


def test_render_replaces_only_the_blocks_and_refuses_one_it_does_not_know(monkeypatch):
    monkeypatch.setattr(readme, "BLOCKS", {"x": lambda: "| a |\n|---|\n| 1 |"})
    text = "intro\n<!-- results: x -->\nstale\n<!-- end results -->\noutro\n"
    assert readme.render(text) == "intro\n<!-- results: x -->\n\n| a |\n|---|\n| 1 |\n\n<!-- end results -->\noutro\n"
    with pytest.raises(SystemExit, match=r"^README.md has a results block no generator knows: y \(known: x\)$"):
        readme.render(text.replace("results: x", "results: y"))


def test_a_run_whose_result_file_exists_is_read_back_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "ROOT", str(tmp_path))
    monkeypatch.setattr(compare.launch, "run", lambda *a, **kw: pytest.fail("ran a run whose file exists"))
    saved = {"key": {"config": "AdderRLConfig", "run": "grpo", "seed": 3}, "curve": [{"step": 0}]}
    results.save(saved, results.path("compare", "AdderRLConfig-grpo-seed3"))
    assert compare.one_run("AdderRLConfig", "grpo", 3, str(tmp_path / "out"), rerun=False) == saved
    assert json.loads((tmp_path / "compare" / "AdderRLConfig-grpo-seed3.json").read_text()) == saved
    assert not list((tmp_path / "compare").glob("*.tmp"))  # written whole, then renamed


def test_the_compare_table_reads_accuracy_at_matched_answers_and_seconds():
    curve = lambda accs, per_step: [{"step": 10 * i, "seconds": 10.0 * i * per_step, "answers": 1000.0 * i * per_step,
                                     "test": a} for i, a in enumerate(accs)]
    config = {"rl_train_steps": 40, "rl_batch_size": 10, "rl_rollout_size": 10}
    rec = lambda run, seed, accs, per_step: {"key": {"config": "C", "run": run, "seed": seed}, "config": config,
                                             "curve": curve(accs, per_step)}
    rows = [rec("grpo", 0, [0.1, 0.2, 0.3, 0.4, 0.5], 1), rec("grpo", 1, [0.1, 0.3, 0.5, 0.7, 0.9], 1),
            rec("dapo", 0, [0.1, 0.6, 0.7, 0.8, 0.9], 2)]
    table = compare.table(rows, "C").splitlines()
    assert table[0] == ("| run | seeds | test at step 10 | at step 20 | at step 40 (end) | within 4k answers | "
                        "within 40 s | answers (k) | RL s |")
    # grpo: median of two seeds; budget 4,000 answers = its step 40; 40 s (grpo's median, the fastest) = step 40
    assert table[2] == "| grpo | 2 | 0.250 (0.200-0.300) | 0.400 (0.300-0.500) | 0.700 (0.500-0.900) | " \
                       "0.700 (0.500-0.900) | 0.700 (0.500-0.900) | 4 (4-4) | 40 (40-40) |"
    # dapo spends answers and seconds twice as fast: within 4,000 answers and 40 s it is at step 20 (0.7)
    assert table[3] == "| dapo | 1 | 0.600 | 0.700 | 0.900 | 0.700 | 0.700 | 8 | 80 |"


def test_the_plots_are_matplotlib_pngs_and_without_it_one_line_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(readme, "PLOTS", str(tmp_path))
    pytest.importorskip("matplotlib")
    written = readme.plots()
    assert written and all(open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n" for p in written)
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **kw: (_ for _ in ()).throw(ImportError(name))
                        if name.startswith("matplotlib") else real_import(name, *a, **kw))
    assert readme.plots() == []
    assert capsys.readouterr().err == ("plots skipped: matplotlib is not installed "
                                       "(pip install -r requirements-tools.txt)\n")


def test_the_benchmark_reads_a_saved_run_back_and_adds_only_a_missing_baseline(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "ROOT", str(tmp_path))
    monkeypatch.setattr(benchmark, "run_one", lambda *a, **kw: pytest.fail("ran a run whose file exists"))
    calls = []
    monkeypatch.setattr(benchmark, "supervised_baseline", lambda row, name, seed, overrides: calls.append(
        (name, seed, overrides)) or {"sft_accuracy": 0.5, "sft_steps": 3, "sft_seconds": 1.0})
    saved = {"config": "X", "sampler": "replay", "seed": 0, "processes": 1, "set": ["k=1"],
             "command": "python -m rl.tools.benchmark --configs X --seeds 0 --samplers replay --set k=1"}
    path = results.path("benchmark", "X-replay-k=1-seed0")
    results.save(saved, path)
    args = argparse.Namespace(configs=["X"], seeds=[0], samplers=["replay"], nproc=1, set=["k=1"], rerun=False,
                              what_rl_adds=True)
    for _ in range(2):  # the second time the file already holds the baseline
        [row] = benchmark.measure(args)
        assert row == {**saved, "sft_accuracy": 0.5, "sft_steps": 3, "sft_seconds": 1.0,
                       "command": saved["command"] + " --what_rl_adds"}
        assert json.loads(open(path).read()) == row
    assert calls == [("X", 0, ["k=1"])]


def test_the_comparison_refuses_before_any_run_a_run_the_script_would_refuse(monkeypatch):
    """Each config and --runs' settings as rl/rl_ddp.py reads them, before the first warm start's minutes."""
    monkeypatch.setattr(compare.launch, "run", lambda *a, **kw: pytest.fail("went on to run"))

    def refusal(*argv):
        monkeypatch.setattr(sys, "argv", ["compare.py", *argv])
        with pytest.raises(SystemExit) as e:
            compare.main()
        return e.value.code
    assert refusal("--configs", "AdderRLConfg").startswith(
        "error: unknown config 'AdderRLConfg'; did you mean 'AdderRLConfig'? known configs: ")
    assert refusal("--runs", "grpo", "ppo:rl_batch_size=abc") == "error: --rl_batch_size expects an integer, got 'abc'"
    assert refusal("--runs", "dapo:problem_sampler=uniform,dynamic_sampling_max_rounds=-1") == (
        "error: dynamic_sampling_max_rounds must be zero or positive, got -1")


def test_the_study_refuses_before_its_first_variant_runs_a_later_one_the_script_would_refuse(monkeypatch):
    from rl.tools import study
    monkeypatch.setattr(study.launch, "run", lambda *a, **kw: pytest.fail("went on to run"))
    monkeypatch.setattr(sys, "argv", ["study.py", "--variants", "default:", "small:rl_batch_size=0"])
    with pytest.raises(SystemExit) as e:
        study.main()
    assert e.value.code == "error: rl_batch_size must be positive, got 0"
    # a variant starting from the warm start an earlier one leaves is checked as it starts, not refused now
    ran = []
    monkeypatch.setattr(study, "run_variant", lambda config, name, *a: ran.append(name) or pytest.fail("ran"))
    later = "init_from=out/study/AdderRLConfig-first-seed0/warm_start.pt"
    monkeypatch.setattr(sys, "argv", ["study.py", "--variants", "first:", f"second:{later}"])
    with pytest.raises(pytest.fail.Exception, match="ran"):
        study.main()
    assert ran == ["first"]


def test_the_benchmark_refuses_before_any_run_what_would_fail_after_it(monkeypatch):
    """An unknown config, and --what_rl_adds on the task of many lengths (whose supervised arm cannot train on one
    MathEnvironment), are one line (SystemExit prints it, exit status 1) before any run; --table runs nothing."""
    monkeypatch.setattr(benchmark, "measure", lambda args: pytest.fail("went on to run"))

    def refusal(*argv):
        monkeypatch.setattr(sys, "argv", ["benchmark.py", *argv])
        with pytest.raises(SystemExit) as e:
            benchmark.main()
        return e.value.code
    assert refusal("--configs", "LongAdderRLConfig", "--what_rl_adds") == (
        "error: --what_rl_adds does not take LongAdderRLConfig, a task of many lengths (rl_ndigits='1-20'); "
        "python -m rl.tools.lengths --config LongAdderRLConfig compares RL with supervised training there, per length")
    assert refusal("--configs", "AdderRLConfig", "AdderRLConfg").startswith(
        "error: unknown config 'AdderRLConfg'; did you mean 'AdderRLConfig'? known configs: ")
    # what the script refuses at its start, in any run's command: --set, a sampler, the processes
    assert refusal("--configs", "AdderRLConfig", "--set", "rl_batch_size=0") == (
        "error: rl_batch_size must be positive, got 0")
    assert refusal("--configs", "AdderRLConfig", "--set", "rl_batch_siz=64") == (
        "error: unknown option --rl_batch_siz; did you mean --rl_batch_size? (--help lists every option)")
    assert refusal("--configs", "MultiplierRLConfig", "--samplers", "replay", "bogus") == (
        "error: unknown problem_sampler 'bogus'; known: uniform, prioritized, replay, lengths")
    assert refusal("--configs", "AdderRLConfig", "--nproc", "3") == (
        "error: rl_batch_size=64 is not divisible by the 3 processes; use a multiple of 3")
    monkeypatch.setattr(benchmark, "measure", lambda args: ["ran"])  # the long task without --what_rl_adds: runs
    monkeypatch.setattr(benchmark, "tables", lambda rows: f"{rows}")
    monkeypatch.setattr(sys, "argv", ["benchmark.py", "--configs", "LongAdderRLConfig"])
    benchmark.main()


def test_the_scarce_study_table_reads_validation_at_fixed_steps_and_the_trained_share(monkeypatch):
    curve = [{"step": s, "seconds": 2.0 * s, "validation": v, "test": 0.9} for s, v in
             [(0, 0.1), (100, 0.2), (200, 0.25), (300, 0.3), (400, 0.4)]]
    steps = [[1, 512.0, 64.0, 1.0], [2, 512.0, 256.0, 1.0], [3, 512.0, 0.0, 1.0]]  # trained 1/8, 1/2, 0: mean 0.21
    rec = lambda config, variant, overrides: {
        "key": {"config": config, "variant": variant, "overrides": overrides, "seed": 0},
        "config": {"sft_worked_examples": 256}, "curve": curve, "steps": steps}
    monkeypatch.setattr(results, "load", lambda tool: [
        rec("ScarceMultiplierRLConfig", "hot", ["eval_interval=25", "init_from=out/w.pt", "rl_temperature=1.5"]),
        rec("AdderRLConfig", "other task", [])])
    assert readme.scarce_study().splitlines()[2:] == [
        "| hot | 256 | `rl_temperature=1.5` | 0.100 | 0.200 | 0.300 | 0.400 @400 | 0.12 | 800 |"]


def test_add_fields_fills_only_missing_fields_and_only_from_the_same_run(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "ROOT", str(tmp_path / "results"))
    run = tmp_path / "run"
    run.mkdir()
    summary = {"rl_steps_run": 2, "start_accuracy": 0.5, "final_accuracy": 0.75, "final_steps_accuracy": 0.9,
               "rl_seconds": 3.0, "rl_train_seconds": 2.0, "rl_answers_generated": 16.0, "rl_samples_per_second": 8.0}
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "config.json").write_text(json.dumps({"seed": 0}))
    step = lambda s, size, rate: {"step": s, "train/step": s, "train/answers_generated": 8.0, "train/batch_answers": 4.0,
                                  "train/groups_all_equal": 0.5, "perf/step_seconds": 1.0, "perf/run_seconds": s,
                                  "select/replay_size": size, "select/drawn_pass_rate": rate}
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"step": 0, "eval/accuracy": 0.5, "val/accuracy": 0.5, "perf/run_seconds": 0.0},
        step(1, 37, 0.1604), step(2, 84, 0.3571)]) + "\n")
    same = {"out_dir": str(run), "wall_seconds_here": 9.0, "summary": summary, "final_accuracy": 0.125}
    other = {**same, "summary": {**summary, "final_accuracy": 0.25}}  # a later run replaced the folder
    gone = {**same, "out_dir": str(tmp_path / "gone")}
    for name, rec in [("same", same), ("other", other), ("gone", gone)]:
        results.save(rec, results.path("benchmark", name))
    changed = benchmark.add_fields()
    assert [name for name, _ in changed] == ["same.json"] and "selection" in changed[0][1]
    saved = json.loads((tmp_path / "results" / "benchmark" / "same.json").read_text())
    assert saved["selection"] == [[1, 37, 0.16], [2, 84, 0.357]]
    assert saved["final_accuracy"] == 0.125  # a field the file had is never changed
    for name, rec in [("other", other), ("gone", gone)]:
        assert json.loads((tmp_path / "results" / "benchmark" / f"{name}.json").read_text()) == rec
    assert benchmark.add_fields() == []  # nothing left to add


@pytest.mark.parametrize("validation", [0.552, 0.551])
def test_a_gone_warm_start_is_trained_again_and_must_match_the_runs(tmp_path, monkeypatch, validation):
    calls = []

    def run(args, log_path=None):  # the warm start only: rl_train_steps=0 into the run's own folder
        calls.append(args)
        out_dir = next(a for a in args if a.startswith("--out_dir=")).split("=", 1)[1]
        with open(f"{out_dir}/summary.json", "w") as f:
            json.dump({"warm_start_steps": 120, "warm_start_validation": validation}, f)
    monkeypatch.setattr(benchmark.launch, "run", run)
    row = {"out_dir": str(tmp_path / "gone"), "warm_start_steps": 120, "warm_start_validation": 0.552}
    if validation == 0.552:
        assert benchmark.restore_warm_start(row, "AdderRLConfig", 2, ["k=1", "rl_train_steps=100"]) == (
            "the warm start trained again (same steps and validation as the run's)")
    else:
        with pytest.raises(SystemExit) as e:
            benchmark.restore_warm_start(row, "AdderRLConfig", 2, ["k=1", "rl_train_steps=100"])
        assert str(e.value) == ("the warm start trained again differs from the run's (steps, validation "
                                "(120, 0.551) against (120, 0.552)): add --rerun to run the whole run again")
    # the warm start alone: the run's own --set rl_train_steps is not given twice
    assert calls == [["--config_name", "AdderRLConfig", "--seed=2", "--no_wandb", f"--out_dir={tmp_path / 'gone'}",
                      "--resume=never", "--rl_train_steps=0", "--k=1"]]


def test_what_rl_adds_lists_each_config_by_pool_size_with_medians_over_seeds():
    run = lambda config, k, seed, start, rl, sft: {
        "config": config, "sampler": "default", "processes": 1, "seed": seed,
        "set": [f"sft_worked_examples={k}"] if k else [],
        "resolved_config": {"sft_worked_examples": k}, "warm_start_steps": 600, "start_accuracy": start,
        "final_accuracy": rl, "sft_accuracy": sft, "rl_train_seconds": 400.0, "sft_steps": 500}
    rows = [run("S", 1024, 0, 0.9, 0.99, 0.95), run("S", 768, 0, 0.8, 0.98, 0.85), run("S", 768, 1, 0.7, 0.96, 0.83),
            run("A", 0, 0, 0.5, 1.0, 1.0)]
    table = benchmark.adds_table(rows).splitlines()
    assert [line.split(" | ")[:3] for line in table[2:]] == [["| A", "as shipped", "all"],
                                                             ["| S", "sft_worked_examples=768", "768"],
                                                             ["| S", "sft_worked_examples=1024", "1024"]]
    assert table[3] == ("| S | sft_worked_examples=768 | 768 | 2 | 600 (600-600) | 0.750 (0.700-0.800) | "
                        "0.970 (0.960-0.980) | 0.840 (0.830-0.850) | 400 (400-400) | 500 (500-500) |")


def test_every_row_of_the_guarantees_table_names_a_test_that_exists():
    rows = [line for line in (REPO / "docs" / "guarantees.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| input |")]
    missing = []
    for row in rows:
        file, name = row.rstrip(" |").rsplit("| ", 1)[1].strip("`").split("::")
        if f"def {name}(" not in (REPO / "tests" / file).read_text():
            missing.append(f"{file}::{name}")
    assert len(rows) >= 50 and missing == []
