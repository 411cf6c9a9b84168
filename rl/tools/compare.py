"""Compare the RL algorithms side by side: same warm start, same budget, several seeds.

    python -m rl.compare                                         # every algorithm, both shipped configs, seeds 0 1 2
    python -m rl.compare --configs AdderRLConfig --algorithms reinforce grpo --seeds 0 --jobs 2

For each config, one warm start is trained (the config's own seed) and every run starts RL from
that same file (`--init_from`). Each run is the real command, `python rl/rl_ddp.py`, evaluating
every 25 steps. Runs go `--jobs` at a time, each with OMP_NUM_THREADS = cores / jobs, so the wall
times are comparable with each other (not with a run that has the whole machine).

A run folder that already holds a summary.json is reused, so an interrupted comparison picks up
where it stopped (delete out/compare to start afresh).

Prints one JSON line per run, then a Markdown table (held-out accuracy at steps 50/100/200:
median over seeds, with min-max), and writes a plot of median held-out accuracy against RL steps
to docs/compare_<config>.svg.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from rl.algorithms import ALGORITHMS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINTS = (50, 100, 200)
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def run(args: list, threads: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "WANDB_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "rl/rl_ddp.py", "--no_wandb", "--resume=never", *args], cwd=REPO, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"run failed: rl/rl_ddp.py {' '.join(args)}\n{proc.stderr[-2000:]}")


def warm_start(config: str, root: str, extra: list, threads: int) -> str:
    out = os.path.join(root, config, "warm_start_run")
    path = os.path.join(out, "warm_start.pt")
    if not os.path.exists(path):
        run(["--config_name", config, "--rl_train_steps=0", f"--out_dir={out}", *extra], threads)
    return path


def one_run(config: str, algorithm: str, seed: int, init: str, root: str, extra: list, threads: int) -> dict:
    out = os.path.join(root, config, f"{algorithm}-seed{seed}")
    if not os.path.exists(os.path.join(out, "summary.json")):  # a finished run is reused
        shutil.rmtree(out, ignore_errors=True)
        run(["--config_name", config, f"--rl_algorithm={algorithm}", f"--seed={seed}", f"--init_from={init}",
             "--eval_interval=25", f"--out_dir={out}", *extra], threads)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        curve = {row["step"]: row["eval/accuracy"] for row in map(json.loads, f) if "eval/accuracy" in row}
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    return {"config": config, "algorithm": algorithm, "seed": seed, "curve": curve,
            "final_accuracy": summary["final_accuracy"], "rl_seconds": round(summary["rl_seconds"], 1)}


def table(rows: list) -> str:
    lines = ["| config | algorithm | " + " | ".join(f"acc@{s}" for s in CHECKPOINTS) + " | RL wall s |",
             "|---|---|" + "---|" * len(CHECKPOINTS) + "---|"]
    for config in dict.fromkeys(r["config"] for r in rows):
        for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
            rs = [r for r in rows if r["config"] == config and r["algorithm"] == algorithm]
            if not rs:
                continue
            cells = []
            for s in CHECKPOINTS:
                vals = [r["curve"][s] for r in rs if s in r["curve"]]
                cells.append(f"{statistics.median(vals):.3f} ({min(vals):.3f}-{max(vals):.3f})" if vals else "-")
            wall = statistics.median(r["rl_seconds"] for r in rs)
            lines.append(f"| {config} | {algorithm} | " + " | ".join(cells) + f" | {wall:.0f} |")
    return "\n".join(lines)


def svg_plot(rows: list, config: str, path: str):
    """Median held-out accuracy against RL step, one line per algorithm (a hand-written SVG, so
    no plotting library is needed)."""
    W, H, L, R, T, B = 560, 340, 55, 130, 30, 45
    rs = [r for r in rows if r["config"] == config]
    steps = sorted({s for r in rs for s in r["curve"]})
    lo = min(min(r["curve"].values()) for r in rs)
    lo = max(0.0, min(0.9, round(lo - 0.05, 1)))
    x = lambda s: L + (W - L - R) * s / max(steps)
    y = lambda a: T + (H - T - B) * (1 - (a - lo) / (1 - lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="18" font-size="14">{config}: median held-out accuracy over seeds</text>']
    for i in range(6):
        a = lo + (1 - lo) * i / 5
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{y(a):.1f}" y2="{y(a):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y(a) + 4:.1f}" text-anchor="end">{a:.2f}</text>')
    for s in steps[::2]:
        out.append(f'<text x="{x(s):.1f}" y="{H - B + 16}" text-anchor="middle">{s}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 8}" text-anchor="middle">RL step</text>')
    for k, algorithm in enumerate(dict.fromkeys(r["algorithm"] for r in rs)):
        ars = [r for r in rs if r["algorithm"] == algorithm]
        pts = [(s, statistics.median(r["curve"][s] for r in ars)) for s in steps if all(s in r["curve"] for r in ars)]
        color = COLORS[k % len(COLORS)]
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                   + " ".join(f"{x(s):.1f},{y(a):.1f}" for s, a in pts) + '"/>')
        out.append(f'<text x="{W - R + 8}" y="{T + 16 * k + 10}" fill="{color}">{algorithm}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["AdderRLConfig", "MultiplierRLConfig"])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--threads", type=int, default=0, help="threads per run (default: cores / jobs)")
    parser.add_argument("--out_dir", default=os.path.join(REPO, "out", "compare"))
    parser.add_argument("--plot_dir", default=os.path.join(REPO, "docs"))
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
                print(json.dumps(row), flush=True)
        os.makedirs(args.plot_dir, exist_ok=True)
        svg_plot(rows, config, os.path.join(args.plot_dir, f"compare_{config}.svg"))
    print(f"\n{len(args.seeds)} seeds, {args.jobs} runs at a time with {threads} thread(s) each\n" + table(rows))


if __name__ == "__main__":
    main()
