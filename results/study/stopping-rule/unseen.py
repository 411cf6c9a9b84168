"""Greedy accuracy of final policies on validation problems their stopping rule never read (issue 33).

A run with num_eval=N stops on the first N problems of the validation split's fixed set; those problems picked
the moment it stopped, so their accuracy at that moment is biased upwards. This script evaluates each snapshot on
the first 10,000 validation problems in three parts: 1-1,000 (what the rule reads at num_eval=1000), 1,001-4,000
(what it reads too at num_eval=4000) and 4,001-10,000, which no run's rule read.

    PYTHONPATH=. python results/study/stopping-rule/unseen.py OUT.json SNAPSHOT [SNAPSHOT ...]
"""

import json
import sys
import time

import torch

from rl.dist import DistInfo
from rl.evaluate import evaluate, load_for_evaluation

PARTS = ((0, 1000), (1000, 4000), (4000, 10000))


def main(out: str, paths: list):
    torch.set_num_threads(2)
    info = DistInfo()  # one process, the CPU
    rows = []
    for path in paths:
        t0 = time.time()
        model, envs, snap = load_for_evaluation(path)
        env = envs[None]
        a, b = env.eval_operands(PARTS[-1][1], "validation")
        right = {f"{lo + 1}-{hi}": evaluate(model, env, a[lo:hi], b[lo:hi], info, batch_size=1000, num_mistakes=0,
                                            split="validation").accuracy for lo, hi in PARTS}
        rows.append({"file": path, "step": snap["step"], "accuracy": right, "seconds": round(time.time() - t0, 1)})
        print(json.dumps(rows[-1]), flush=True)
    with open(out, "w") as f:
        json.dump({"command": " ".join(["python", *sys.argv]), "threads": torch.get_num_threads(), "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
