"""What the tools print: Markdown tables and medians with their range (plots: rl/tools/readme.py).

    print(markdown_table(["config", "acc"], [["AdderRLConfig", median_range([0.997, 0.99, 1.0])]]))
"""

import math
import statistics


def markdown_table(headers: list, rows: list) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def median_range(values: list, fmt: str = "{:.3f}") -> str:
    """'median (min-max)' of the values. None is a run that never got there: it counts as later than
    any value, so the median or the max can be 'never'; '-' when no run has a value at all."""
    if all(v is None for v in values):
        return "-"
    ranked = [math.inf if v is None else v for v in values]
    show = lambda v: "never" if v == math.inf else fmt.format(v)
    if len(values) == 1:
        return show(ranked[0])
    return f"{show(statistics.median(ranked))} ({show(min(ranked))}-{show(max(ranked))})"


def first_reaching(curve: list, target: float):
    """The x of the first point (x, y) of a curve with y >= target, or None."""
    return next((x for x, y in curve if y >= target), None)
