"""Per arm: read plainly (the log-n probe's test/*-L0 files: the same weights and sums), with log-n attention
(its -L24 files), through a window of 8 position ids (test/*-W8 here) and through it with "+" and "=" global
(test/*-W8g): greedy test accuracy at each length
(median (min-max) over seeds 0-2) and the longest length each holds >= 0.99 and >= 0.5 at (as
python -m rl.tools.lengths counts it); then exact pass@1 at 40, 60, 80 and 100 digits; then each seed's RL row.

    python results/study/probes/LongAdderRLConfig-carry-id-window/table.py
"""
import json
import os

from rl.tools.lengths import ARM_NAMES, longest_holding
from rl.tools.report import markdown_table, median_range

here = os.path.dirname(os.path.abspath(__file__))
logn = os.path.join(here, "..", "LongAdderRLConfig-carry-logn-attention", "test")
LENGTHS = ["5", "10", "15", "20", "30", "40", "60", "80", "100"]
READS = {"L0": (logn, ""), "L24": (logn, ", log-n attention past 24 tokens"),
         "W8": (os.path.join(here, "test"), ", a window of 8 position ids"),
         "W8g": (os.path.join(here, "test"), ", a window of 8 ids, + and = global")}


def by_length(seed: int, arm: str, read: str) -> dict:
    with open(os.path.join(READS[read][0], f"seed{seed}-{arm}-{read}.eval.json")) as f:
        return json.load(f)["by_length"]


greedy, exact, seeds = [], [], []
for arm in ("none", "sft", "rl"):
    for read in READS:
        runs = [by_length(s, arm, read) for s in (0, 1, 2)]
        acc = [{n: r[n]["greedy_accuracy"] for n in LENGTHS} for r in runs]
        name = ARM_NAMES[arm] + READS[read][1]
        greedy.append([name, *[median_range([a[n] for a in acc], "{:.2f}") for n in LENGTHS],
                       *[median_range([longest_holding(a, t) or 0 for a in acc], "{:.0f}") for t in (0.99, 0.5)]])
        exact.append([name, *[median_range([r[n]["pass_at_k"]["1"]["exact"] for r in runs]) for n in LENGTHS[-4:]]])
        if read.startswith("W"):
            seeds += [[f"{name}, seed {s}", *[f"{a[n]:.3f}" for n in LENGTHS]] for s, a in enumerate(acc)]
print(markdown_table(["arm", *LENGTHS, "holds >= 0.99", "holds >= 0.5"], greedy))
print()
print(markdown_table(["arm", *[f"exact pass@1, {n}" for n in LENGTHS[-4:]]], exact))
print()
print(markdown_table(["each seed", *LENGTHS], seeds))
