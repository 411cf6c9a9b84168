"""A run's curves in one PNG, several runs overlaid: the quickest look at how a run is going.

    python -m rl.tools.plot out/AdderRLConfig                          # writes out/AdderRLConfig/curves.png
    python -m rl.tools.plot out/run_a out/run_b --out docs/runs.png    # two runs, one colour each

Four panels, one colour per run, labelled by its folder's name: (a) held-out accuracy, test
(`eval/accuracy`, solid) and validation (`val/accuracy`, dashed), against step; (b) the same
against seconds since the command started (`perf/run_seconds`, warm start included; a resumed run
counts from 0 again at its resume); (c) the mean reward of the first round's answers
(`train/avg_reward`); (d) answers generated per step, refill rounds included
(`train/answers_generated`). It reads metrics.jsonl as it is (rl/run_dir.py read_metrics), so a run
still going plots what it has logged so far; run it again to refresh. Needs matplotlib, a
dependency of the measuring tools only (requirements-tools.txt).
"""

import argparse
import os
import sys

from rl import run_dir
from rl.errors import MetricsError

ACCURACY = [("eval/accuracy", "-", "test"), ("val/accuracy", "--", "validation")]
# (x metric, x label, [(y metric, line style, which)], y label, title): one per panel, (a) to (d)
PANELS = [("step", "RL step", ACCURACY, "accuracy (greedy)", "held-out accuracy"),
          ("perf/run_seconds", "seconds since the command started", ACCURACY, "accuracy (greedy)",
           "held-out accuracy against time"),
          ("step", "RL step", [("train/avg_reward", "-", None)], "mean reward", "reward"),
          ("step", "RL step", [("train/answers_generated", "-", None)], "answers", "answers generated per step")]
DEFAULT_NAME = "curves.png"


class PlotError(ValueError):
    """Bad input to the plot; the message is one line that says what is wrong and how to fix it."""


def read_run(folder: str) -> list:
    """The run's metrics lines; PlotError when there are none to plot or the file is damaged."""
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise PlotError(f"{folder} {what}; give a run's out_dir (e.g. out/AdderRLConfig)")
    try:  # a torn last line (a run killed while writing it) is dropped, and the note says so
        rows = run_dir.read_metrics(folder, warn=lambda note: print(note, file=sys.stderr))
    except MetricsError as e:
        raise PlotError(str(e)) from None
    if not rows:  # no file yet, or emptied by --resume=never: the first line comes after the first evaluation
        raise PlotError(f"{folder} has no metrics.jsonl lines: the run has not logged yet; "
                        f"run this again after its first evaluation")
    return rows


def labels(folders: list) -> list:
    """Each run's folder name; the path as given where two runs share a name (out/a/run, out/b/run)."""
    names = [os.path.basename(os.path.normpath(f)) for f in folders]
    return [name if names.count(name) == 1 else f for name, f in zip(names, folders)]


def series(rows: list, x: str, y: str) -> tuple:
    """(xs, ys) of the lines that log both x and y, in logged order (evaluations are every
    eval_interval steps, training metrics every logged step)."""
    points = [(row[x], row[y]) for row in rows if x in row and y in row]
    return [p[0] for p in points], [p[1] for p in points]


def draw(plt, runs: dict):
    """The figure of runs ({label: metrics lines}): one panel per PANELS row, one colour per run.
    A run that logged none of a panel's metrics yet (only step 0, say) draws nothing there."""
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.4))  # four of readme.py's (7, 4.2) plots
    for ax, (x, xlabel, ys, ylabel, title) in zip(axes.flat, PANELS):
        for i, (label, rows) in enumerate(runs.items()):
            for y, style, which in ys:
                xs, values = series(rows, x, y)
                # markers while points are few: a run at its first evaluation is one point, no line
                ax.plot(xs, values, style, color=f"C{i}", marker="." if len(xs) < 30 else None, linewidth=1.5,
                        label=f"{label} {which}" if which else label)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        if ys is ACCURACY:  # a share: the same scale for every run and every look
            ax.set_ylim(-0.02, 1.02)
        if x == "step":
            ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("matplotlib is not installed (pip install -r requirements-tools.txt)") from None
    return plt


def plot(folders: list, out: str):
    """Write the PNG of the runs in folders to out; the figure drawn (closed), or PlotError."""
    if not out.lower().endswith(".png"):
        raise PlotError(f"--out {out}: the plot is a PNG; give a file name ending in .png")
    runs = dict(zip(labels(folders), [read_run(folder) for folder in folders]))
    plt = pyplot()
    fig = draw(plt, runs)
    try:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        fig.savefig(out, dpi=110)
    except OSError as e:
        raise PlotError(f"cannot write {out} ({e.strerror}); give another --out") from None
    finally:
        plt.close(fig)  # closed, the figure still holds what it drew
    return fig


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.tools.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_FOLDER", help="a run's out_dir; several are overlaid")
    parser.add_argument("--out", help=f"the PNG to write (default: the first run folder's {DEFAULT_NAME})")
    args = parser.parse_args(argv)
    out = args.out or os.path.join(args.runs[0], DEFAULT_NAME)
    try:
        plot(args.runs, out)
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
