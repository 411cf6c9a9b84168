"""The table of README.md from test/*.eval.json: per arm, with and without log-n attention, greedy test accuracy at
each length (median (min-max) over seeds 0-2) and the longest length each holds >= 0.99 and >= 0.5 at (as
python -m rl.tools.lengths counts it); then exact pass@1 at 40, 60, 80 and 100 digits.

    python results/study/probes/LongAdderRLConfig-carry-logn-attention/table.py
"""
import json
import os

from rl.tools.lengths import ARM_NAMES, longest_holding
from rl.tools.report import markdown_table, median_range

here = os.path.dirname(os.path.abspath(__file__))
LENGTHS = ["5", "10", "15", "20", "30", "40", "60", "80", "100"]


def by_length(seed: int, arm: str, L: int) -> dict:
    with open(os.path.join(here, "test", f"seed{seed}-{arm}-L{L}.eval.json")) as f:
        return json.load(f)["by_length"]


greedy, exact = [], []
for arm in ("none", "sft", "rl"):
    for L in (0, 24):
        runs = [by_length(s, arm, L) for s in (0, 1, 2)]
        acc = [{n: r[n]["greedy_accuracy"] for n in LENGTHS} for r in runs]
        name = ARM_NAMES[arm] + (", log-n attention past 24 tokens" if L else "")
        greedy.append([name, *[median_range([a[n] for a in acc], "{:.2f}") for n in LENGTHS],
                       *[median_range([longest_holding(a, t) or 0 for a in acc], "{:.0f}") for t in (0.99, 0.5)]])
        exact.append([name, *[median_range([r[n]["pass_at_k"]["1"]["exact"] for r in runs]) for n in LENGTHS[-4:]]])
print(markdown_table(["arm", *LENGTHS, "holds >= 0.99", "holds >= 0.5"], greedy))
print()
print(markdown_table(["arm", *[f"exact pass@1, {n}" for n in LENGTHS[-4:]]], exact))
