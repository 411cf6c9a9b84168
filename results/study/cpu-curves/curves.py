"""One run's evaluation curve from its metrics.jsonl, as a JSON line: step, held-out (test) and validation accuracy
and the run's own clock at each evaluation, its final held-out accuracy, and the label given.

    python results/study/cpu-curves/curves.py RUN_DIR label
"""
import json
import sys
from pathlib import Path


def main(run: str, label: str):
    rows = [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [{"step": r["step"], "test": r["eval/accuracy"], "validation": r.get("val/accuracy"),
              "run_seconds": round(r["perf/run_seconds"], 1)} for r in rows if "eval/accuracy" in r]
    print(json.dumps({"label": label, "final_heldout": evals[-1]["test"], "evals": evals}))


if __name__ == "__main__":
    main(*sys.argv[1:])
