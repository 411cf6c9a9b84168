"""Compare the RL algorithms side by side: same warm start, same budget, several seeds, both tasks.

    python -m rl.tools.compare                                   # every algorithm, both shipped configs, seeds 0 1 2
    python -m rl.tools.compare --configs AdderRLConfig --algorithms reinforce grpo --seeds 0 --jobs 2

For each config, one warm start is trained (the config's own seed) and every run starts RL from
that same file (`--init_from`). Each run is the real command, `python rl/rl_ddp.py`, evaluating
on the test set every 25 steps. Runs go `--jobs` at a time, each with OMP_NUM_THREADS = cores /
jobs, so their wall times are comparable with each other (not with a run that has the whole
machine). A run folder that already holds a summary.json is reused, so an interrupted comparison
picks up where it stopped (delete out/compare to start afresh).

Per algorithm: test accuracy at a quarter, half and all of the run's rl_train_steps (50/100/200 by
default; median over seeds, with min-max); the answers it generated (dynamic sampling's refills
included) and its test accuracy at the last evaluation within the budget of answers a one-round
algorithm generates in the run (rl_batch_size x rl_rollout_size x rl_train_steps), so an algorithm
that samples more is not credited for it; and RL wall seconds. Plots of median test accuracy
against RL steps, wall seconds and answers generated go to docs/compare_<config>_{steps,seconds,answers}.svg.
"""

import argparse
import json
import os
import shutil
import statistics
from concurrent.futures import ThreadPoolExecutor

from rl.algorithms import ALGORITHMS
from rl import run_dir
from rl.tools import launch
from rl.tools.report import markdown_table, median_range, svg_lines


def warm_start(config: str, root: str, extra: list, threads: int) -> str:
    out = os.path.join(root, config, "warm_start_run")
    path = run_dir.warm_start_path(out)
    if not os.path.exists(path):
        launch.run(["--config_name", config, "--rl_train_steps=0", f"--out_dir={out}", "--no_wandb", "--resume=never",
                    *extra], threads=threads)
    return path


def one_run(config: str, algorithm: str, seed: int, init: str, root: str, extra: list, threads: int) -> dict:
    out = os.path.join(root, config, f"{algorithm}-seed{seed}")
    if not os.path.exists(run_dir.summary_path(out)):  # a finished run is reused
        shutil.rmtree(out, ignore_errors=True)
        launch.run(["--config_name", config, f"--rl_algorithm={algorithm}", f"--seed={seed}", f"--init_from={init}",
                    "--eval_interval=25", f"--out_dir={out}", "--no_wandb", "--resume=never", *extra], threads=threads)
    rows = run_dir.read_metrics(out)
    answers, t0, curve = 0.0, rows[0]["perf/run_seconds"], []
    for r in rows:
        answers += r.get("train/answers_generated", 0.0)
        if "eval/accuracy" in r:
            curve.append({"step": r["step"], "seconds": r["perf/run_seconds"] - t0, "answers": answers,
                          "accuracy": r["eval/accuracy"]})
    summary, c = run_dir.read_summary(out), run_dir.read_config(out)
    return {"config": config, "algorithm": algorithm, "seed": seed, "curve": curve, "steps": c["rl_train_steps"],
            "budget": c["rl_batch_size"] * c["rl_rollout_size"] * c["rl_train_steps"],
            "final_accuracy": summary["final_accuracy"], "rl_seconds": round(summary["rl_seconds"], 1),
            "answers": summary["rl_answers_generated"]}


def at(curve: list, key: str, limit: float):
    """Accuracy at the last evaluation with curve[key] <= limit (None if none is)."""
    within = [p["accuracy"] for p in curve if p[key] <= limit]
    return within[-1] if within else None


def table(rows: list) -> str:
    out = []
    for config in dict.fromkeys(r["config"] for r in rows):
        for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
            rs = [r for r in rows if r["config"] == config and r["algorithm"] == algorithm]
            if rs:  # each config has its own rl_train_steps, so its own checkpoints
                steps = rs[0]["steps"]
                checkpoints = (steps // 4, steps // 2, steps)
                out.append([config, algorithm, steps,
                            *[median_range([at(r["curve"], "step", s) for r in rs]) for s in checkpoints],
                            median_range([r["answers"] / 1000 for r in rs], "{:.0f}"),
                            median_range([at(r["curve"], "answers", r["budget"]) for r in rs]),
                            median_range([r["rl_seconds"] for r in rs], "{:.0f}")])
    return markdown_table(["config", "algorithm", "steps", "acc at 1/4 of steps", "acc at 1/2", "acc at the end",
                           "answers (k)", "acc within a one-round algorithm's answers", "RL wall s"], out)


def plots(rows: list, config: str, plot_dir: str):
    """Median test accuracy over seeds against steps, seconds and answers generated."""
    for key, label in (("step", "RL step"), ("seconds", "RL wall seconds"), ("answers", "answers generated")):
        series = {}
        for algorithm in dict.fromkeys(r["algorithm"] for r in rows if r["config"] == config):
            curves = [r["curve"] for r in rows if r["config"] == config and r["algorithm"] == algorithm]
            n = min(len(c) for c in curves)
            series[algorithm] = [(statistics.median(c[i][key] for c in curves),
                                  statistics.median(c[i]["accuracy"] for c in curves)) for i in range(n)]
        svg_lines(series, label, "test accuracy", f"{config}: median test accuracy over seeds",
                  os.path.join(plot_dir, f"compare_{config}_{'steps' if key == 'step' else key}.svg"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["AdderRLConfig", "MultiplierRLConfig"])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--threads", type=int, default=0, help="threads per run (default: cores / jobs)")
    parser.add_argument("--out_dir", default=os.path.join(launch.REPO, "out", "compare"))
    parser.add_argument("--plot_dir", default=os.path.join(launch.REPO, "docs"))
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every run")
    args = parser.parse_args()
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    extra = [f"--{kv}" for kv in args.set]
    rows = []
    for config in args.configs:
        init = warm_start(config, args.out_dir, extra, args.threads or os.cpu_count() or 1)
        jobs = [(config, a, s, init, args.out_dir, extra, threads) for s in args.seeds for a in args.algorithms]
        with ThreadPoolExecutor(args.jobs) as pool:
            for row in pool.map(lambda job: one_run(*job), jobs):
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
        plots(rows, config, args.plot_dir)
    print(f"\n{len(args.seeds)} seeds, {args.jobs} runs at a time with {threads} thread(s) each\n" + table(rows))


if __name__ == "__main__":
    main()
