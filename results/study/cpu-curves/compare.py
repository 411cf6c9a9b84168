"""Are two runs' curves the same, bit for bit? Compares every logged value but the clocks (`perf/`) of two runs'
metrics.jsonl, step by step (issue 33: CPU fp32 curves unchanged).

    PYTHONPATH=. python results/study/cpu-curves/compare.py RUN_A RUN_B [label]

Prints one JSON line: the steps both logged, how many values were compared, the first step and keys that differ
(none: the curves are equal), and each run's last held-out accuracy.
"""
import json
import sys

from rl.run_dir import read_metrics


def main(a: str, b: str, label: str = ""):
    A, B = read_metrics(a), read_metrics(b)
    compared, first_difference = 0, None
    for x, y in zip(A, B):
        keys = [k for k in x if k in y and not k.startswith("perf/")]
        compared += len(keys)
        differ = [k for k in keys if x[k] != y[k]]
        if differ and first_difference is None:
            first_difference = {"step": x.get("step"), "keys": differ[:5]}
    last = lambda R: next((r["eval/accuracy"] for r in reversed(R) if "eval/accuracy" in r), None)
    print(json.dumps({"label": label, "a": a, "b": b, "rows_compared": min(len(A), len(B)),
                      "last_step_compared": min(len(A), len(B)) and A[min(len(A), len(B)) - 1].get("step"),
                      "values_compared": compared, "first_difference": first_difference,
                      "a_last_heldout": last(A), "b_last_heldout": last(B)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
