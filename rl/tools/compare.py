"""Compare the RL algorithms side by side: one warm start per task and seed, one clock, one budget.

    python -m rl.tools.compare                                   # every algorithm, both shipped configs, seeds 0 1 2
    python -m rl.tools.compare --configs AdderRLConfig --runs reinforce grpo --seeds 0
    python -m rl.tools.compare --table                           # docs/results.md's table from results/compare/

A run is ALGORITHM or ALGORITHM:KEY=VALUE,... (config overrides for that run); by default every row
of the algorithm table with the config as it is, and the default algorithm with uniform problem
draws (and the two refill rounds uniform draws were measured with) beside the config's problem
selection. Every run of a config and seed starts RL from the same warm start (`--init_from`): the
benchmark's for that config and seed when it exists (out/benchmark/warm_starts/), else one trained
here and put there. Runs go one at a time with the whole machine, so their seconds compare. Each is
the real command, `python rl/rl_ddp.py`, evaluating test and validation every eval_interval steps.
Each result is written to results/compare/<config>-<run>-seed<S>.json as it finishes, and a run
whose file exists is not run again (--rerun to redo it), so an interrupted comparison continues.

Per config and run, medians over seeds with their range: test accuracy at a quarter, half and all
of the steps; answers generated (refill rounds included); test accuracy at the last evaluation
within a matched budget of answers (a one-round algorithm's, rl_batch_size x rl_rollout_size x
rl_train_steps, so sampling more is not credited) and within matched seconds (the median RL
seconds of the fastest run type, evaluations excluded). Plots of median test accuracy against
answers and seconds: `python -m rl.tools.readme`.
"""

import argparse
import json
import os
import shutil
import statistics

from rl.algorithms import ALGORITHMS
from rl import run_dir
from rl.tools import launch, results
from rl.tools.report import markdown_table, median_range

DEFAULT_RUNS = [*ALGORITHMS, "dapo:problem_sampler=uniform,dynamic_sampling_max_rounds=2"]
WARM_STARTS = os.path.join(launch.REPO, "out", "benchmark", "warm_starts")


def run_label(spec: str) -> str:
    """'dapo:problem_sampler=uniform,...' -> 'dapo+problem_sampler=uniform+...', for file names."""
    return spec.replace(":", "+").replace(",", "+")


def run_name(config: str, spec: str, seed: int) -> str:
    """A run's file and folder name (cut to fit a file name where the spec's settings make it long)."""
    return results.fit_name(f"{config}-{run_label(spec)}", f"-seed{seed}")


def warm_start(config: str, seed: int, root: str) -> str:
    """The warm start every run of this config and seed starts from, trained here if none exists."""
    path = os.path.join(WARM_STARTS, f"{config}-seed{seed}.pt")
    if not os.path.exists(path):
        out = os.path.join(root, config, f"warm_start-seed{seed}")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        launch.run(["--config_name", config, f"--seed={seed}", "--rl_train_steps=0", f"--out_dir={out}",
                    "--no_wandb", "--resume=never"], log_path=run_dir.log_path(out))
        os.makedirs(WARM_STARTS, exist_ok=True)
        shutil.copy(run_dir.warm_start_path(out), path)
    return path


def one_run(config: str, spec: str, seed: int, root: str, rerun: bool) -> dict:
    name = run_name(config, spec, seed)
    file = results.path("compare", name)
    if os.path.exists(file) and not rerun:
        with open(file) as f:
            return json.load(f)
    algorithm, _, settings = spec.partition(":")
    overrides = [kv for kv in settings.split(",") if kv]
    init = warm_start(config, seed, root)
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    launch.run(["--config_name", config, f"--rl_algorithm={algorithm}", f"--seed={seed}", f"--init_from={init}",
                f"--out_dir={out}", "--no_wandb", "--resume=never", *[f"--{kv}" for kv in overrides]],
               log_path=run_dir.log_path(out))
    rec = results.record(out, tool="compare", command=f"python -m rl.tools.compare --configs {config} --runs {spec} "
                         f"--seeds {seed}", key={"config": config, "run": spec, "seed": seed},
                         warm_start=os.path.relpath(init, launch.REPO))
    results.save(rec, file)
    return rec


def label(spec: str) -> str:
    """'dapo:problem_sampler=uniform,dynamic_sampling_max_rounds=2' -> 'dapo problem_sampler=uniform, ...'"""
    return spec.replace(":", " ").replace(",", ", ")


def at(curve: list, key: str, limit: float):
    """Test accuracy at the last evaluation with curve[key] <= limit (None if none is)."""
    within = [p["test"] for p in curve if p[key] <= limit]
    return within[-1] if within else None


def table(records: list, config: str) -> str:
    """One row per run of config, in the order the runs were first listed: medians (min-max) over seeds."""
    rs = [r for r in records if r["key"]["config"] == config]
    order = lambda spec: DEFAULT_RUNS.index(spec) if spec in DEFAULT_RUNS else len(DEFAULT_RUNS)
    specs = sorted(dict.fromkeys(r["key"]["run"] for r in rs), key=order)  # the algorithm table's order
    runs = {spec: [r for r in rs if r["key"]["run"] == spec] for spec in specs}
    c = rs[0]["config"]
    steps, budget = c["rl_train_steps"], c["rl_batch_size"] * c["rl_rollout_size"] * c["rl_train_steps"]
    # the evaluation at or before a quarter and a half of the steps (every eval_interval steps)
    quarter, half = [max(p["step"] for p in rs[0]["curve"] if p["step"] <= s) for s in (steps // 4, steps // 2)]
    seconds = min(statistics.median(r["curve"][-1]["seconds"] for r in group) for group in runs.values())
    rows = []
    for spec, group in runs.items():
        rows.append([label(spec), len(group),
                     *[median_range([at(r["curve"], "step", s) for r in group]) for s in (quarter, half)],
                     median_range([r["curve"][-1]["test"] for r in group]),
                     median_range([at(r["curve"], "answers", budget) for r in group]),
                     median_range([at(r["curve"], "seconds", seconds) for r in group]),
                     median_range([r["curve"][-1]["answers"] / 1000 for r in group], "{:.0f}"),
                     median_range([r["curve"][-1]["seconds"] for r in group], "{:.0f}")])
    return markdown_table(["run", "seeds", f"test at step {quarter}", f"at step {half}",
                           f"at step {steps} (end)", f"within {budget // 1000}k answers",
                           f"within {seconds:.0f} s", "answers (k)", "RL s"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["AdderRLConfig", "MultiplierRLConfig"])
    parser.add_argument("--runs", nargs="+", default=DEFAULT_RUNS, help="ALGORITHM or ALGORITHM:KEY=VALUE,...")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out_dir", default=os.path.join(launch.REPO, "out", "compare"))
    parser.add_argument("--rerun", action="store_true", help="run again what results/compare/ holds")
    parser.add_argument("--table", action="store_true", help="print the tables of results/compare/, running nothing")
    args = parser.parse_args()
    for spec in args.runs:
        if spec.partition(":")[0] not in ALGORITHMS:
            raise SystemExit(f"unknown algorithm in --runs {spec!r}; known: {', '.join(ALGORITHMS)}")
    if not args.table:
        for config in args.configs:  # each run's command as one_run gives it (its warm start's file aside)
            launch.check_command(["--config_name", config, "--no_wandb", "--resume=never"])
            for spec in args.runs:
                algorithm, _, settings = spec.partition(":")
                launch.check_command(["--config_name", config, f"--rl_algorithm={algorithm}", "--no_wandb",
                                      "--resume=never", *[f"--{kv}" for kv in settings.split(",") if kv]])
        for seed in args.seeds:  # seed-major, so a partial comparison already covers every run
            for config in args.configs:
                for spec in args.runs:
                    rec = one_run(config, spec, seed, args.out_dir, args.rerun)
                    print(json.dumps({**rec["key"], **rec["curve"][-1]}), flush=True)
    records = results.load("compare")
    for config in dict.fromkeys(r["key"]["config"] for r in records):
        print(f"\n{config}: test accuracy, median (min-max) over seeds\n\n{table(records, config)}")


if __name__ == "__main__":
    main()
