"""Where the adder's warm start should hand over to RL at its GPU settings (issue 33): for each warm-start target,
the warm start's steps, RL's steps to the first validation (and test) accuracy >= 0.99 on 4,000 problems, and the
two in one count, warm-start steps plus R times RL steps, for R = 3 and 5 (an RL step of 256 prompts with its
evaluations costs about 3-5 warm-start steps on the H200: 55-68 ms and evaluations against 17-25 ms). Reads the
benchmark's records in results/study/gpu-recipe-on-cpu/ (settings as results/study/stopping-rule/README.md says);
prints one row per target and seed and a JSON line per row.

    PYTHONPATH=. python3 results/study/stopping-rule/handoff.py
"""

import glob
import json
import re

from rl.tools.report import first_reaching

RECORDS = "results/study/gpu-recipe-on-cpu/AdderRLConfig-replay+rl_batch_size=256-*num_eval=4000*.json"
RATIOS = (3, 5)


def row(path: str) -> dict:
    d = json.load(open(path))
    target = float(re.search(r"sft_target_accuracy=([0-9.]+)", " ".join(d["set"])).group(1))
    val, test = (first_reaching([(e["step"], e[key]) for e in d["evals"]], 0.99) for key in ("validation", "test"))
    out = {"sft_target_accuracy": target, "seed": d["seed"], "warm_start_steps": d["warm_start_steps"],
           "validation_at_rl_start": d["evals"][0]["validation"], "rl_step_first_validation_0.99": val,
           "rl_step_first_test_0.99": test, "rl_steps": d["summary"]["rl_steps_run"],
           "final_test": d["final_accuracy"]}
    for r in RATIOS:
        out[f"count_R{r}"] = None if val is None else d["warm_start_steps"] + r * val
    return out


def main():
    rows = sorted((row(p) for p in glob.glob(RECORDS)), key=lambda r: (r["seed"], r["sft_target_accuracy"]))
    print("| seed | warm start to | warm-start steps | validation at RL's start | RL step of the first validation "
          "/ test >= 0.99 | RL steps | " + " | ".join(f"steps + {r} x RL steps" for r in RATIOS) + " | final test |")
    print("|---" * (7 + len(RATIOS)) + "|")
    for r in rows:
        counts = " | ".join(str(r[f"count_R{k}"]) for k in RATIOS)
        print(f"| {r['seed']} | {r['sft_target_accuracy']} | {r['warm_start_steps']} | {r['validation_at_rl_start']}"
              f" | {r['rl_step_first_validation_0.99']} / {r['rl_step_first_test_0.99']} | {r['rl_steps']} | {counts}"
              f" | {r['final_test']} |")
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
