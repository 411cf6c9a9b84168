"""What the tools print and draw: Markdown tables, medians with their range, and line plots as SVG
(hand-written, so no plotting library is needed).

    print(markdown_table(["config", "acc"], [["AdderRLConfig", "0.997"]]))
    svg_lines({"dapo": [(0, 0.4), (50, 0.9)]}, "RL step", "held-out accuracy", "title", "docs/plot.svg")
"""

import math
import os
import statistics

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


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


def svg_lines(series: dict, xlabel: str, ylabel: str, title: str, path: str, y_floor: float = None):
    """One line per series {name: [(x, y), ...]}, on shared axes, written to path."""
    W, H, L, R, T, B = 600, 360, 60, 150, 34, 48
    points = [p for pts in series.values() for p in pts]
    x_max = max(x for x, _ in points) or 1
    lo = y_floor if y_floor is not None else max(0.0, min(0.9, round(min(y for _, y in points) - 0.05, 1)))
    x = lambda v: L + (W - L - R) * v / x_max
    y = lambda a: T + (H - T - B) * (1 - (a - lo) / (1 - lo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>', f'<text x="{L}" y="20" font-size="14">{title}</text>']
    for i in range(6):
        a = lo + (1 - lo) * i / 5
        out.append(f'<line x1="{L}" x2="{W - R}" y1="{y(a):.1f}" y2="{y(a):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y(a) + 4:.1f}" text-anchor="end">{a:.2f}</text>')
    for i in range(6):
        v = x_max * i / 5
        out.append(f'<text x="{x(v):.1f}" y="{H - B + 16}" text-anchor="middle">{v:.0f}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="14" y="{(T + H - B) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(T + H - B) / 2})">{ylabel}</text>')
    for k, (name, pts) in enumerate(series.items()):
        color = COLORS[k % len(COLORS)]
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                   + " ".join(f"{x(a):.1f},{y(max(b, lo)):.1f}" for a, b in pts) + '"/>')
        out.append(f'<text x="{W - R + 8}" y="{T + 16 * k + 10}" fill="{color}">{name}</text>')
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(out + ["</svg>"]) + "\n")
