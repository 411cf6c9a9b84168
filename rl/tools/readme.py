"""The result tables and plots of README.md and docs/results.md, generated from the result files in results/.

    python -m rl.tools.readme            # rewrite every generated block of both files and the plots in docs/
    python -m rl.tools.readme --check    # exit 1 if either file differs from what the result files say

A generated block sits between `<!-- results: NAME -->` and `<!-- end results -->`; everything
between the two lines is replaced, nothing else is touched. Each block is a function of the files
alone (BLOCKS), so tests/test_readme.py can check that the documents say what the files say. The
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
from rl.tools.report import first_reaching, markdown_table, median_range

DOCUMENTS = ("README.md", os.path.join("docs", "results.md"))  # every file whose blocks are rendered, from the root
PLOTS = os.path.join(launch.REPO, "docs")
BLOCK = re.compile(r"(<!-- results: (\S+) -->\n)(.*?)(<!-- end results -->)", re.S)
TASKS = ("AdderRLConfig", "MultiplierRLConfig")
PRESETS = ("AdderRLConfig", "MultiplierRLConfig", "Multiplier3RLConfig", "ScarceMultiplierRLConfig")


def benchmark_rows(keep) -> list:
    return [r for r in benchmark.saved_results() if keep(r)]


def preset_runs(config: str) -> list:
    """The runs of a preset as it ships: 1 process, no --set, and the problem sampler the preset
    itself sets (named with --samplers, as the problem-selection runs do, or left to the preset)."""
    from rl.rl_ddp import get_config_class
    own = get_config_class(config)().problem_sampler
    return benchmark_rows(lambda r: r["config"] == config and r["sampler"] in ("default", own)
                          and not r.get("set") and r["processes"] == 1)


def what_it_learns(resolved: dict) -> str:
    """'2-digit multiplication, showing the work, 256 worked answers', from a run's resolved config."""
    operation = {"adder": "addition", "subtractor": "subtraction", "multiplier": "multiplication"}
    return ", ".join([f"{resolved['ndigit']}-digit {operation.get(resolved['task'], resolved['task'])}",
                      *(["showing the work"] if resolved["show_work"] else []),
                      *([f"worked answers of {resolved['sft_worked_examples']} pairs only"]
                        if resolved.get("sft_worked_examples") else [])])


def headline() -> str:
    """Each shipped preset end to end: test accuracy at the end and wall seconds of the whole run, on the CPU and,
    where measured, on a GPU (the settings chosen there, rl/tools/gpu.py)."""
    rows, sources, machines = [], [], set()
    for config in PRESETS:
        rs = preset_runs(config)
        if not rs:
            rows.append([f"`{config}`", "(not measured)", "-", "-", "-", "-",
                         f"`python rl/rl_ddp.py --config_name {config}`"])
            continue
        machines |= {f"{r['cpu']}, {r['cores']} cores, {r['threads']} threads, torch {r['torch']}" for r in rs}
        rows.append([f"`{config}`", what_it_learns(rs[0]["resolved_config"]), f"CPU, {rs[0]['cores']} cores", len(rs),
                     median_range([r["final_accuracy"] for r in rs]),
                     median_range([r["wall_seconds"] for r in rs], "{:.0f}"),
                     f"`python rl/rl_ddp.py --config_name {config}`"])
        sampler = {r["sampler"] for r in rs} - {"default"}
        sources.append(f"`python -m rl.tools.benchmark --configs {config} --seeds {' '.join(str(r['seed']) for r in rs)}"
                       + "".join(f" --samplers {s}" for s in sorted(sampler)) + "`")
    for config, rs in gpu_runs().items():  # ("On a GPU" below says which settings, and where chosen)
        name, command = gpu_command(config, rs[0]["set"])
        rows.append([f"`{name}`", what_it_learns(rs[0]["resolved_config"]), rs[0]["gpu"], len(rs),
                     median_range([r["final_accuracy"] for r in rs]), median_range([r["wall_seconds"] for r in rs],
                                                                                  "{:.0f}"), f"`{command}`"])
    table = markdown_table(["preset", "task", "machine", "seeds", "test accuracy, median (min-max)",
                            "wall s (warm start included)", "command"], rows)
    return (table + "\n\nCPU rows: " + "; ".join(sorted(machines)) + ", one run at a time, from the files in "
            "`results/benchmark/` written by " + ", ".join(sources) + " (each run is the command shown with "
            "`--seed=S --no_wandb`, and the preset's own `--problem_sampler` where the benchmark names it). GPU rows: "
            "`results/gpu/<GPU>/`: the CPU preset with its GPU preset's settings (`configs/gpu.py`), chosen by `python "
            "-m rl.tools.gpu` on an H100, run on the card named (README, \"On a GPU\").")


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
    from rl.tools import formats  # (only when this block is drawn: the tool's imports are a training script's)
    records = [r for r in results.load("formats") if r["key"]["ndigit"] == ndigit]
    return formats.table(records) if records else f"(no results yet: `python -m rl.tools.formats --ndigit {ndigit}`)"


# The runs before the preset took the carry column and a window of 4 ids name the values they ran with
# (results/lengths/README.md): a key's overrides are the --set of its command today.
BEFORE = ["carry_column=false", "attention_window=0"]  # the preset before: no carry column, no window
PAD = ["sft_pad_ndigits=40", "rl_pad_ndigits=40", "pad_share=0.5"]
PADDED = [*PAD, *BEFORE]  # the padded layouts' runs (docs/results.md)
CARRY = [*PAD, "carry_column=true", "attention_window=0"]  # the same with each operand one leading zero wider
TRIES = (4, 0.95)  # each seed from the first of at most 4 warm starts at 0.95 on 20-digit validation, else the best
FIRST_PAD = [*PAD, "carry_column=true", "sft_first_pad_share=0.25", "attention_window=0"]  # a quarter of the first
# phase padded too (rl/warm_start.py)
WINDOW = ["carry_column=true", "attention_window=8"]  # trained with a window of 8 position ids (model/gpt.py)


def lengths_table(part: str, overrides=(), tries=(1, 1.0)) -> str:
    """Past the training lengths: the three arms of LongAdderRLConfig (rl/tools/lengths.py), as it ships or with
    overrides (and a choice of warm starts: tries, its most and its target): greedy accuracy by length ("greedy"),
    or the exact pass@k ("pass")."""
    from rl.tools import lengths
    tries = lengths.Tries(*tries)
    recs = lengths.saved(overrides=overrides, tries=tries)
    if not recs:
        return f"(no results yet: `python -m rl.tools.lengths --seeds 0 1 2{' --set ' if overrides else ''}" \
               f"{' '.join(overrides)}{tries.flags()}`)"
    if part == "pass":
        return lengths.pass_table(recs)
    return lengths.greedy_table(recs) + "\n\n" + lengths.provenance(recs)


def plot_lengths() -> list:
    from rl.tools import lengths
    recs = lengths.saved()
    if not recs:
        return []
    path = os.path.join(PLOTS, "lengths_LongAdderRLConfig.png")
    lengths.plot(recs, path)
    return [path]


def speed() -> str:
    from rl.tools import perf
    records = [r for r in results.load("perf") if r["key"]["config"] == "AdderRLConfig" and not r["key"]["compile"]]
    return perf.table(records[-1]) if records else "(no results yet: `python -m rl.tools.benchmark --perf`)"


def presets_study() -> str:
    """The runs that chose the problem-selection presets (results/study/problem-selection/): validation only."""
    folder = os.path.join(results.ROOT, "study", "problem-selection")
    rows = []
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as f:
            d = json.load(f)
        curve, cached = d["validation_curve"], d["warm_start_cached"]
        at = lambda p: f"{p[2]:.3f} @{p[0]} ({p[1]:.0f} s)"
        rows.append([d["run"].split("-")[0], " ".join(f"`{o[2:]}`" for o in d["overrides"]) or "(none: `uniform` draws)",
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


# the card whose runs the README shows (issue 33's targets name an H100; its runs are under "gpu-presets-h100")
README_GPU = "NVIDIA H200"
CHOICE_GPU = "NVIDIA H100 80GB HBM3"  # the card the GPU settings were chosen on: every candidate ran there
# what each card's runs were made with beyond the card, the driver and torch (gpu_presets's footnote)
GPU_NOTES = {
    "NVIDIA H200": "with Python's bytecode cached, as a pip install leaves it (results/gpu/session6/)",
    "NVIDIA H100 80GB HBM3": "before the bytecode cache was found (results/gpu/session5/): whether its torch had one "
                             "was not checked; its 3.6-5.5 s of start-up match the H200's without one",
}


def gpu_runs(card: str = README_GPU) -> dict:
    """{CPU preset: its runs on one GPU with exactly its GPU preset's settings (configs/gpu.py)}, by seed. The
    presets hold the settings chosen on validation (by rl/tools/gpu.py on CHOICE_GPU, where every candidate ran),
    so a better choice is one edit there, and the README follows it."""
    from configs.gpu import GPU_PRESETS, cpu_preset
    from rl.tools.gpu import preset_of
    rows = [r for r in results.load_tree("gpu") if "seed" in r and r["gpu"] == card]
    runs = {}
    for gpu in GPU_PRESETS:
        config = cpu_preset(gpu).__name__
        picked = sorted((r for r in rows if r["config"] == config and preset_of(config, r["set"]) is gpu),
                        key=lambda r: r["seed"])
        if picked:
            runs[config] = picked
    return runs


def gpu_command(config: str, overrides: list) -> tuple:
    """(the preset's name, the command) that runs as these runs did: their GPU preset (configs/gpu.py) where one
    has exactly their settings, else the CPU preset with the settings written out."""
    from rl.tools.gpu import preset_of
    gpu = preset_of(config, overrides)
    if gpu is not None:
        return gpu.__name__, f"python rl/rl_ddp.py --config_name {gpu.__name__}"
    return config, f"python rl/rl_ddp.py --config_name {config} {' '.join('--' + kv for kv in overrides)}"


def gpu_presets(card: str = README_GPU) -> str:
    """The presets on one GPU, chosen settings, every seed: final test accuracy, first test >= the aim, the run."""
    from rl.tools.gpu import CANDIDATES
    rows, gpus = [], set()
    for config, rs in gpu_runs(card).items():
        aim = CANDIDATES[config][0]
        gpus |= {f"{r['gpu']} (driver {r['driver']}, torch {r['torch']}, CUDA {r['cuda']})" for r in rs}
        rows.append([f"`{gpu_command(config, rs[0]['set'])[0]}`",
                     f"`{config}` with `{' '.join('--' + kv for kv in rs[0]['set'])}`",
                     " ".join(str(r["seed"]) for r in rs), median_range([r["final_accuracy"] for r in rs]),
                     median_range([first_reaching(r["curve"], aim) for r in rs], "{:.1f}") + f" (>= {aim})",
                     median_range([r["curve"][0][0] for r in rs], "{:.1f}"),
                     median_range([r["wall_seconds"] for r in rs], "{:.1f}")])
    table = markdown_table(["preset", f"its settings, chosen on validation (seed 0, {CHOICE_GPU})", "seeds",
                            "final test", "first test >= aim, s", "RL starts at, s", "whole run, s"], rows)
    note = f", {GPU_NOTES[card]}" if card in GPU_NOTES else ""  # (a card without a note gets none, not ", .")
    return table + "\n\nOn " + "; ".join(sorted(gpus)) + f"{note}. \"First test\" and \"RL " \
        "starts\" are on the run's own clock (`perf/run_seconds`, from the model's build on: CUDA's start-up, the warm " \
        "start and every evaluation included; Python's imports before it are not); \"whole run\" is the process's " \
        "wall seconds."


def gpu_candidates() -> str:
    """Every preset x settings x GPU that rl/tools/gpu.py ran (the candidates on seed 0, the chosen on three)."""
    from rl.tools import gpu
    return gpu.table([r for r in results.load_tree("gpu") if "seed" in r]) + \
        "\n\n`python -m rl.tools.gpu --table`; first test >= the preset's aim on the run's clock, warm start included."


def gpu_speed() -> str:
    """The perf sweep's table (python -m rl.tools.perf --device cuda) and where it ran."""
    from rl.tools import perf
    recs = [r for r in results.load_tree("gpu") if r.get("tool") == "perf-sweep"]
    early = lambda r: any(row["metric"] == "sweep_step" and "warmup_steps" not in row for row in r["rows"])
    return "\n\n".join(perf.sweep_table(r["rows"]) + f"\n\n`{r['command']}` on {r['gpu']}, torch {r['torch']}"
                       + ("; whole steps timed after one warm-up step only (on the H200, steps that still capture decode "
                          "graphs: results/gpu/session5/)"
                          if early(r) else "") + "." for r in recs)


def what_rl_adds_pass() -> str:
    """pass@k of what RL adds: runs of `benchmark --what_rl_adds --results what-rl-adds`, kept apart from the
    3-seed table's runs (results/benchmark/), which ran before pass@k was measured and on older code."""
    rows = [r for r in results.load("what-rl-adds") if "pass_at_k" in r]
    return benchmark.adds_pass_table(rows) if rows else \
        "(no results yet: `python -m rl.tools.benchmark --what_rl_adds --results what-rl-adds`)"


BLOCKS = {"what-rl-adds-pass": what_rl_adds_pass, "gpu-presets": gpu_presets, "gpu-presets-h100": lambda: gpu_presets("NVIDIA H100 80GB HBM3"), "gpu-candidates": gpu_candidates, "gpu-speed": gpu_speed, "headline": headline, "problem-selection": problem_selection, "presets-study": presets_study, "what-rl-adds": what_rl_adds, "speed": speed,
          "scarce-study": scarce_study,
          "lengths": lambda: lengths_table("greedy"), "lengths-pass": lambda: lengths_table("pass"),
          "lengths-before": lambda: lengths_table("greedy", BEFORE),
          "lengths-before-pass": lambda: lengths_table("pass", BEFORE),
          "lengths-padded": lambda: lengths_table("greedy", PADDED),
          "lengths-padded-pass": lambda: lengths_table("pass", PADDED),
          "lengths-carry": lambda: lengths_table("greedy", CARRY),
          "lengths-carry-pass": lambda: lengths_table("pass", CARRY),
          "lengths-carry-tries": lambda: lengths_table("greedy", CARRY, TRIES),
          "lengths-carry-tries-pass": lambda: lengths_table("pass", CARRY, TRIES),
          "lengths-first-pad": lambda: lengths_table("greedy", FIRST_PAD),
          "lengths-first-pad-pass": lambda: lengths_table("pass", FIRST_PAD),
          "lengths-window": lambda: lengths_table("greedy", WINDOW),
          "lengths-window-pass": lambda: lengths_table("pass", WINDOW),
          "formats-2digit": lambda: formats_table(2), "formats-3digit": lambda: formats_table(3),
          "multiplier3": lambda: end_to_end("Multiplier3RLConfig"),
          **{f"compare-{c}": (lambda c=c: compare_table(c)) for c in TASKS}}


def render(text: str, document: str = "README.md") -> str:
    """text (of document) with every generated block replaced by what the files say now."""
    unknown = [name for _, name, _, _ in BLOCK.findall(text) if name not in BLOCKS]
    if unknown:
        raise SystemExit(f"{document} has a results block no generator knows: {unknown[0]} (known: {', '.join(BLOCKS)})")
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


def plot_headline(plt) -> str:
    """Test accuracy against wall seconds (warm start included) of every preset run of the headline."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, config in enumerate(PRESETS):
        for j, r in enumerate(preset_runs(config)):
            xs, ys = zip(*r["curve"])  # (wall seconds since the command started, test accuracy) per evaluation
            ax.plot(xs, ys, color=f"C{i}", linewidth=1.2, alpha=0.8,
                    label=f"{config} ({len(preset_runs(config))} seeds)" if j == 0 else None)
    ax.set(xlabel="wall seconds since the command started (the first point: the warm start's end)",
           ylabel="test accuracy (greedy)", title="The shipped presets end to end, one line per seed (2-core CPU)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center right")
    return save(fig, plt, "headline_curves.png")


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
    return [plot_headline(plt), *[path for config in configs for path in plot_compare(plt, config)], *plot_lengths()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that the documents equal the files")
    args = parser.parse_args()
    for document in DOCUMENTS:
        path = os.path.join(launch.REPO, document)
        with open(path) as f:
            text = f.read()
        new = render(text, document)
        if args.check:
            if new != text:
                raise SystemExit(f"{document} differs from results/: run python -m rl.tools.readme")
            print(f"{document} equals what results/ says")
            continue
        with open(path, "w") as f:
            f.write(new)
        print(f"{document}: {len(BLOCK.findall(new))} blocks from results/")
    if not args.check:
        print(*plots(), sep="\n")


if __name__ == "__main__":
    main()
