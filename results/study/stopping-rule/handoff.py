"""Where a preset's warm start should hand over to RL at its GPU settings (issue 33): for each warm-start target,
the warm start's steps, RL's steps to the first validation (and test) accuracy >= the preset's aim, RL's steps to
its end (its rule held, or its last step), and those in one count, warm-start steps plus R times RL steps, for
R = 3 and 5 (an RL step of 256 prompts with its evaluations costs about 3-5 warm-start steps on the H200: 55-68 ms
and evaluations against 17-25 ms). Reads the benchmark's records in results/study/gpu-recipe-on-cpu/ (settings as
results/study/stopping-rule/README.md says); prints one row per target and seed and a JSON line per row.

    PYTHONPATH=. python3 results/study/stopping-rule/handoff.py               # the adder (aim 0.99, 4,000 problems)
    PYTHONPATH=. python3 results/study/stopping-rule/handoff.py multiplier3   # 3-digit multiplication (aim 0.98)
"""

import glob
import json
import re
import sys

from rl.tools.report import first_reaching

FOLDER = "results/study/gpu-recipe-on-cpu/"
PRESETS = {  # name: (the records, the aim)
    "adder": (FOLDER + "AdderRLConfig-replay+rl_batch_size=256-*num_eval=4000*.json", 0.99),
    "multiplier3": (FOLDER + "Multiplier3RLConfig-replay+rl_batch_size=256-*sft_target_accuracy=*.json", 0.98),
}
RATIOS = (3, 5)


def row(path: str, aim: float) -> dict:
    d = json.load(open(path))
    target = float(re.search(r"sft_target_accuracy=([0-9.]+)", " ".join(d["set"])).group(1))
    val, test = (first_reaching([(e["step"], e[key]) for e in d["evals"]], aim) for key in ("validation", "test"))
    out = {"sft_target_accuracy": target, "seed": d["seed"], "warm_start_steps": d["warm_start_steps"],
           "validation_at_rl_start": d["evals"][0]["validation"], f"rl_step_first_validation_{aim}": val,
           f"rl_step_first_test_{aim}": test, "rl_steps": d["summary"]["rl_steps_run"],
           "final_test": d["final_accuracy"]}
    for r in RATIOS:
        out[f"count_R{r}"] = None if val is None else d["warm_start_steps"] + r * val
        out[f"count_to_end_R{r}"] = d["warm_start_steps"] + r * out["rl_steps"]
    return out


def main(preset: str = "adder"):
    records, aim = PRESETS[preset]
    rows = sorted((row(p, aim) for p in glob.glob(records)), key=lambda r: (r["seed"], r["sft_target_accuracy"]))
    print(f"| seed | warm start to | warm-start steps | validation at RL's start | RL step of the first validation "
          f"/ test >= {aim} | RL steps | " + " | ".join(f"steps + {r} x RL steps (to the end)" for r in RATIOS)
          + " | final test |")
    print("|---" * (7 + len(RATIOS)) + "|")
    for r in rows:
        counts = " | ".join(f"{r[f'count_R{k}']} ({r[f'count_to_end_R{k}']})" for k in RATIOS)
        print(f"| {r['seed']} | {r['sft_target_accuracy']} | {r['warm_start_steps']} | {r['validation_at_rl_start']}"
              f" | {r[f'rl_step_first_validation_{aim}']} / {r[f'rl_step_first_test_{aim}']} | {r['rl_steps']} | "
              f"{counts} | {r['final_test']} |")
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main(*sys.argv[1:])
