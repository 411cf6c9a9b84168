"""One run's evaluation curve from its metrics.jsonl, as a JSON line: step, held-out (test) and validation accuracy
and the run's own clock at each evaluation, its final held-out accuracy, and the label given.

    PYTHONPATH=. python results/study/cpu-curves/curves.py RUN_DIR label
"""
import json
import sys

from rl.run_dir import read_metrics


def main(run: str, label: str):
    rows = read_metrics(run)
    evals = [{"step": r["step"], "test": r["eval/accuracy"], "validation": r.get("val/accuracy"),
              "run_seconds": round(r["perf/run_seconds"], 1)} for r in rows if "eval/accuracy" in r]
    print(json.dumps({"label": label, "final_heldout": evals[-1]["test"], "evals": evals}))


if __name__ == "__main__":
    main(*sys.argv[1:])
