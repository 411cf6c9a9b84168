"""What update.py and sampling.py share: two settings timed in turn in one process, and the row they print and keep."""

import json
import os
import statistics
import time

from rl.tools import results


def alternate(call, pairs: int) -> dict:
    """call(False) and call(True) in turn (A B, then B A), `pairs` times: {flag: [seconds of each call]}."""
    seconds = {False: [], True: []}
    for i in range(pairs):
        for flag in ((False, True) if i % 2 == 0 else (True, False)):
            t0 = time.perf_counter()
            call(flag)
            seconds[flag].append(time.perf_counter() - t0)
    return seconds


def summary(seconds: dict) -> dict:
    """Each setting's median seconds, and shared / plain pair by pair (median, min, max)."""
    ratios = [s / p for s, p in zip(seconds[True], seconds[False])]
    return dict(seconds_plain=statistics.median(seconds[False]), seconds_shared=statistics.median(seconds[True]),
                ratio_median=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios))


def emit(row: dict, out: str, tool: str):
    """Print the row with the machine, as one JSON line, and add it to out's rows (a record of `tool`) when given."""
    row = {**row, **results.machine()}
    print(json.dumps(row), flush=True)
    if out:
        rec = json.load(open(out)) if os.path.exists(out) else {"tool": tool, "rows": []}
        rec["rows"].append(row)
        results.save(rec, out)
