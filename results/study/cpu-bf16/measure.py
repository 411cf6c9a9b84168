"""bf16 autocast against fp32 on this CPU (issue 33, item 1: precision where the device has it): the adder's update
alone on one fixed sampled batch and its sampling alone, at the preset's 64 prompts x 8 answers, as the perf sweep
times them (rl/tools/perf.py: random weights, digit_match, so every answer trains). One JSON line a measurement, then
the ratios, with this CPU's bf16 flags (rl/dist.py cpu_has_bf16).

    PYTHONPATH=. python results/study/cpu-bf16/measure.py [prompts] > results/study/cpu-bf16/<cpu>.json
"""
import json
import sys

import torch

from rl import dist
from rl.tools import results
from rl.tools.perf import Sweep, sweep_sampling, sweep_update


def main(prompts: int = 64):
    s = Sweep("AdderRLConfig", torch.device("cpu"), reps=1)
    trainer = s.trainer(prompts)
    rows = {}
    for precision in ("fp32", "bf16"):
        rows[f"update_{precision}_s"] = sweep_update(s, trainer, precision)["seconds"]
        rows[f"sampling_{precision}_s"] = sweep_sampling(s, trainer, precision, False)["seconds"]
    print(json.dumps({"prompts": prompts, "answers": prompts * trainer.config.rl_rollout_size,
                      "threads": torch.get_num_threads(), "cpu_has_bf16": dist.cpu_has_bf16(), **rows,
                      "update_bf16_over_fp32": rows["update_bf16_s"] / rows["update_fp32_s"],
                      "sampling_bf16_over_fp32": rows["sampling_bf16_s"] / rows["sampling_fp32_s"],
                      **results.machine()}, indent=1))


if __name__ == "__main__":
    main(*map(int, sys.argv[1:]))
