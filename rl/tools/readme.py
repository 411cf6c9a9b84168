"""The README's result tables and plots, generated from the result files in results/.

    python -m rl.tools.readme            # rewrite every generated block of README.md and the plots in docs/
    python -m rl.tools.readme --check    # exit 1 if README.md differs from what the files say

A generated block sits between `<!-- results: NAME -->` and `<!-- end results -->`; everything
between the two lines is replaced, nothing else is touched. Each block is a function of the files
alone (BLOCKS), so tests/test_readme.py can check that the README says what the files say. The
plots need matplotlib, a dependency of the measuring tools only (requirements-tools.txt); without
it the tables are still written and one line says how to install it.
"""

import argparse
import json
import os
import re
import statistics
import sys

from rl.tools import benchmark, compare, launch, results
from rl.tools.report import markdown_table

README = os.path.join(launch.REPO, "README.md")
PLOTS = os.path.join(launch.REPO, "docs")
BLOCK = re.compile(r"(<!-- results: (\S+) -->\n)(.*?)(<!-- end results -->)", re.S)
TASKS = ("AdderRLConfig", "MultiplierRLConfig")


def benchmark_rows(keep) -> list:
    return [r for r in benchmark.saved_results() if keep(r)]


def problem_selection() -> str:
    """The two shipped tasks' samplers side by side (3-digit multiplication's are in its own block)."""
    return benchmark.sampler_table(benchmark_rows(lambda r: r["config"] in TASKS and r["sampler"] != "default"
                                                  and not r.get("set")))


def compare_table(config: str) -> str:
    records = [r for r in results.load("compare") if r["key"]["config"] == config]
    if not records:
        return f"(no results yet: `python -m rl.tools.compare --configs {config}`)"
    return compare.table(records, config)


def end_to_end(config: str) -> str:
    rows = benchmark_rows(lambda r: r["config"] == config)
    return benchmark.tables(rows) if rows else f"(no results yet: `python -m rl.tools.benchmark --configs {config}`)"


def what_rl_adds() -> str:
    rows = benchmark_rows(lambda r: "sft_accuracy" in r)
    return benchmark.adds_table(rows) if rows else "(no results yet: `python -m rl.tools.benchmark --what_rl_adds`)"


def formats_table(ndigit: int) -> str:
    from rl.tools import formats  # registers its own operation: only when this block is drawn
    records = [r for r in results.load("formats") if r["key"]["ndigit"] == ndigit]
    return formats.table(records) if records else f"(no results yet: `python -m rl.tools.formats --ndigit {ndigit}`)"


def speed() -> str:
    from rl.tools import perf
    records = [r for r in results.load("perf") if r["key"]["config"] == "AdderRLConfig" and not r["key"]["compile"]]
    return perf.table(records[-1]) if records else "(no results yet: `python -m rl.tools.benchmark --perf`)"


def presets_study() -> str:
    """The runs that chose the problem-selection presets (results/study/problem-selection/, written by
    the exploration scripts of the time): validation only."""
    folder = os.path.join(results.ROOT, "study", "problem-selection")
    rows = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            d = json.load(f)
        curve, cached = d["validation_curve"], d["warm_start_cached"]
        at = lambda p: f"{p[2]:.3f} @{p[0]} ({p[1]:.0f} s)"
        rows.append([d["run"].split("-")[0], " ".join(f"`{o[2:]}`" for o in d["overrides"]) or "(the preset of the time: `uniform`)",
                     "-" if d["warm_start_validation"] is None else f"{d['warm_start_validation']:.3f}"
                     + ("" if cached else f" (trained, {d['warm_start_seconds']:.0f} s)"),
                     at(curve[len(curve) // 2]), at(curve[-1]) + ("" if d.get("finished") else " (stopped)"),
                     f"{d['answers_per_step_last_quarter']:,.0f}", f"{d['step_seconds_last_quarter']:.2f}"])
    return markdown_table(["config", "overrides", "warm start (val)", "validation at the middle (s)",
                                     "at the end (s)", "answers/step, last quarter", "s/step, last quarter"], rows)


def scarce_study() -> str:
    """The runs that chose the scarce-worked-examples RL settings (rl.tools.study, seed 0): validation only."""
    rows = []
    for rec in results.load("study"):
        if rec["key"]["config"] != "ScarceMultiplierRLConfig":
            continue
        # init_from is the K's warm start trained by that K's first variant: the same start, not a setting
        own = [kv for kv in rec["key"]["overrides"] if not kv.startswith(("eval_interval=", "init_from="))]
        curve, steps, end = rec["curve"], rec["steps"], rec["curve"][-1]
        at = lambda step: next((f"{p['validation']:.3f}" for p in curve if p["step"] == step), "-")
        trained = statistics.median(s[2] / s[1] for s in steps)  # steps: [step, answers, trained answers, s]
        rows.append([rec["key"]["variant"], rec["config"]["sft_worked_examples"], " ".join(f"`{kv}`" for kv in own),
                     f"{curve[0]['validation']:.3f}", at(100), at(300),
                     f"{end['validation']:.3f} @{end['step']}", f"{trained:.2f}", f"{end['seconds']:.0f}"])
    return markdown_table(["variant", "K", "overrides", "validation at RL start", "at step 100", "at 300",
                           "at the end", "trained share of answers (median step)", "RL s"], rows)


BLOCKS = {"problem-selection": problem_selection, "presets-study": presets_study, "what-rl-adds": what_rl_adds, "speed": speed,
          "scarce-study": scarce_study,
          "formats-2digit": lambda: formats_table(2), "formats-3digit": lambda: formats_table(3),
          "multiplier3": lambda: end_to_end("Multiplier3RLConfig"),
          **{f"compare-{c}": (lambda c=c: compare_table(c)) for c in TASKS}}


def render(text: str) -> str:
    """text with every generated block replaced by what the files say now."""
    unknown = [name for _, name, _, _ in BLOCK.findall(text) if name not in BLOCKS]
    if unknown:
        raise SystemExit(f"README.md has a results block no generator knows: {unknown[0]} (known: {', '.join(BLOCKS)})")
    return BLOCK.sub(lambda m: m.group(1) + "\n" + BLOCKS[m.group(2)]() + "\n\n" + m.group(4), text)


def median_curve(curves: list, key: str) -> list:
    """(median x, median test accuracy) at each evaluation the seeds share."""
    n = min(len(c) for c in curves)
    return [(statistics.median(c[i][key] for c in curves), statistics.median(c[i]["test"] for c in curves))
            for i in range(n)]


def plot_compare(plt, config: str) -> list:
    """Median test accuracy over seeds against answers generated and against RL seconds, one line per run."""
    records = [r for r in results.load("compare") if r["key"]["config"] == config]
    runs = sorted(dict.fromkeys(r["key"]["run"] for r in records),
                  key=lambda spec: compare.DEFAULT_RUNS.index(spec) if spec in compare.DEFAULT_RUNS else 99)
    written = []
    for key, label in (("answers", "answers generated"), ("seconds", "RL seconds (evaluations excluded)")):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for run in runs:
            curves = [r["curve"] for r in records if r["key"]["run"] == run]
            xs, ys = zip(*median_curve(curves, key))
            ax.plot([x / 1000 if key == "answers" else x for x in xs], ys, label=f"{compare.label(run)} ({len(curves)} seeds)",
                    linewidth=1.5)
        ax.set(xlabel=label + (" (thousands)" if key == "answers" else ""), ylabel="test accuracy (median of seeds)",
               title=f"{config}: every algorithm from the same warm starts")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        written.append(save(fig, plt, f"compare_{config}_{key}.png"))
    return written


def save(fig, plt, name: str) -> str:
    path = os.path.join(PLOTS, name)
    os.makedirs(PLOTS, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plots() -> list:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install -r requirements-tools.txt)", file=sys.stderr)
        return []
    configs = dict.fromkeys(r["key"]["config"] for r in results.load("compare"))
    return [path for config in configs for path in plot_compare(plt, config)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that README.md equals the files")
    args = parser.parse_args()
    with open(README) as f:
        text = f.read()
    new = render(text)
    if args.check:
        if new != text:
            raise SystemExit("README.md differs from results/: run python -m rl.tools.readme")
        print("README.md equals what results/ says")
        return
    with open(README, "w") as f:
        f.write(new)
    print(f"README.md: {len(BLOCK.findall(new))} blocks from results/", *plots(), sep="\n")


if __name__ == "__main__":
    main()
