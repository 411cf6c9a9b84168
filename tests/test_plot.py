"""rl/tools/plot.py on a real run: the PNG of two runs overlaid draws exactly the logged metrics, one
colour per run; a run at its start plots what it has; a torn last line is dropped with its note;
every bad input is one line on stderr and exit 2, with nothing written.
Run: python -m pytest tests/test_plot.py"""

import builtins
import json
import subprocess
import sys

import pytest

from helpers import REPO, TINY_ARGS
from rl import rl_ddp, run_dir
from rl.tools import plot

pytest.importorskip("matplotlib")
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A finished 4-step run (evaluations at steps 0, 2, 4) and one that has logged only its start."""
    root = tmp_path_factory.mktemp("runs")
    tiny, started = root / "tiny", root / "started"
    assert rl_ddp.main([*TINY_ARGS, "--no_wandb", "--rl_train_steps=4", "--eval_interval=2", f"--out_dir={tiny}"]) == 0
    started.mkdir()
    # its start's line, with test and validation accuracy apart (a tiny run's are both 0): a swap would show
    start = {**run_dir.read_metrics(str(tiny))[0], "eval/accuracy": 0.25, "val/accuracy": 0.75}
    (started / "metrics.jsonl").write_text(json.dumps(start) + "\n")
    return tiny, started


def main(capsys, args):
    """plot.main in this process: (exit code, stdout, stderr lines)."""
    code = plot.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


def drawn(fig) -> list:
    """Per panel, {line label: (xs, ys, colour)} of what the figure drew."""
    return [{line.get_label(): (list(line.get_xdata()), list(line.get_ydata()), line.get_color())
             for line in ax.lines} for ax in fig.axes]


def test_two_runs_overlaid_draw_exactly_the_logged_metrics(runs, tmp_path):
    tiny, started = runs
    fig = plot.plot([str(tiny), str(started)], str(tmp_path / "both.png"))
    assert (tmp_path / "both.png").read_bytes()[:8] == PNG
    rows = run_dir.read_metrics(str(tiny))
    evals, steps = [r for r in rows if "eval/accuracy" in r], [r for r in rows if "train/avg_reward" in r]
    assert [r["step"] for r in evals] == [0, 2, 4] and [r["step"] for r in steps] == [1, 2, 3, 4]
    start = run_dir.read_metrics(str(started))[0]
    col = lambda rs, key: [r[key] for r in rs]
    a, b = "C0", "C1"  # one colour per run, the same in every panel
    assert drawn(fig) == [
        {"tiny test": ([0, 2, 4], col(evals, "eval/accuracy"), a),
         "tiny validation": ([0, 2, 4], col(evals, "val/accuracy"), a),
         "started test": ([0], [start["eval/accuracy"]], b), "started validation": ([0], [start["val/accuracy"]], b)},
        {"tiny test": (col(evals, "perf/run_seconds"), col(evals, "eval/accuracy"), a),
         "tiny validation": (col(evals, "perf/run_seconds"), col(evals, "val/accuracy"), a),
         "started test": ([start["perf/run_seconds"]], [start["eval/accuracy"]], b),
         "started validation": ([start["perf/run_seconds"]], [start["val/accuracy"]], b)},
        {"tiny": ([1, 2, 3, 4], col(steps, "train/avg_reward"), a), "started": ([], [], b)},  # nothing trained yet
        {"tiny": ([1, 2, 3, 4], col(steps, "train/answers_generated"), a), "started": ([], [], b)}]


def test_a_torn_last_line_is_dropped_with_its_note_and_the_rest_plotted(runs, tmp_path, capsys):
    tiny, _ = runs
    torn = tmp_path / "torn"
    torn.mkdir()
    text = (tiny / "metrics.jsonl").read_bytes()
    (torn / "metrics.jsonl").write_bytes(text[:-20])  # a kill in the middle of the last line
    code, out, err = main(capsys, [torn])
    assert (code, out) == (0, f"wrote {torn / 'curves.png'}\n")  # the (first) run's folder by default
    assert (torn / "curves.png").read_bytes()[:8] == PNG
    assert err == [f"note: dropped the torn last line of {torn / 'metrics.jsonl'} (a run stopped while writing it)"]


def damaged(tmp_path, tiny):
    folder = tmp_path / "damaged"
    folder.mkdir()
    lines = (tiny / "metrics.jsonl").read_bytes().split(b"\n")
    (folder / "metrics.jsonl").write_bytes(b"\n".join([lines[0], b"{not json", *lines[2:]]))
    return folder


@pytest.mark.parametrize("case,message", [
    ("missing", "{folder} does not exist; give a run's out_dir (e.g. out/AdderRLConfig)"),
    ("a file", "{folder} is not a folder; give a run's out_dir (e.g. out/AdderRLConfig)"),
    ("not logged yet", "{folder} has no metrics.jsonl lines: the run has not logged yet; "
                       "run this again after its first evaluation"),
    ("damaged", "{folder}/metrics.jsonl line 2 is not a metrics line, and only a last line can be torn by a crash; "
                "move the file aside (or delete that line) and run again"),  # run_dir.MetricsError's
    ("not a png", "--out {out}: the plot is a PNG; give a file name ending in .png"),
])
def test_bad_input_is_one_line_and_exit_2(runs, tmp_path, capsys, case, message):
    tiny, _ = runs
    folder, out = tmp_path / "run", tmp_path / ("curves.pdf" if case == "not a png" else "curves.png")
    if case == "a file":
        folder.write_text("")
    elif case == "not logged yet":
        folder.mkdir()
    elif case == "damaged":
        folder = damaged(tmp_path, tiny)
    elif case == "not a png":
        folder = tiny
    before = sorted(tmp_path.rglob("*"))
    code, stdout, err = main(capsys, [tiny, folder, f"--out={out}"])  # the good run first: each is checked
    assert (code, stdout, err) == (2, "", ["error: " + message.format(folder=folder, out=out)])
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


def test_without_matplotlib_one_line_says_how_to_install_it(runs, tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **kw: (_ for _ in ()).throw(ImportError(name))
                        if name.startswith("matplotlib") else real_import(name, *a, **kw))
    assert main(capsys, [runs[0], f"--out={tmp_path / 'curves.png'}"]) == (
        2, "", ["error: matplotlib is not installed (pip install -r requirements-tools.txt)"])


def test_the_command_exits_2_with_one_line_and_no_torch(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rl.tools.plot", str(tmp_path / "nope")], cwd=REPO,
                          capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.splitlines() == [f"error: {tmp_path / 'nope'} does not exist; give a run's out_dir "
                                        f"(e.g. out/AdderRLConfig)"]
    # plotting a run that is still training takes no torch: only the metrics file is read
    light = subprocess.run([sys.executable, "-c", "import sys; import rl.tools.plot; print('torch' in sys.modules)"],
                           cwd=REPO, capture_output=True, text=True, check=True)
    assert light.stdout == "False\n"
