"""Device check 7 of issue 33: the RL step's reads of the device, before and after (the tree on PYTHONPATH), and
its optimizer steps replayed from CUDA graphs (label "graphed": --rl_cuda_graphs, the tree after).

    PYTHONPATH=<tree> python results/gpu/session7_probe.py <old|new|graphed> [prompts]

The perf sweep's trainer (random weights, digit_match, bf16 autocast, CUDA graphs, matmul attention; rl/tools/perf.py)
at 64 prompts x 8 answers, the presets' batch: the update alone on one fixed batch three times (median of at most 30
calls each), then whole steps after the warm-up (median of at most 30). One JSON line each, with the label. Run for
the tree before the change (e5829fa: 64 reads of the device a step, counted on the CPU) and after (4 since the
rewards' statistics are read with the metrics, 5 since 6b55ed3, 6 before), in turn.
"""
import json
import sys

import torch

from rl.tools.perf import Sweep, sweep_steps, sweep_update


def main(label: str, prompts: int = 64):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    s = Sweep("AdderRLConfig", device, reps=30, budget_s=3.0)
    trainer = s.trainer(prompts)
    graphed = {"rl_graphs": True} if label == "graphed" else {}  # (the tree before has no such argument)
    for _ in range(3):
        row = sweep_update(s, trainer, "bf16", matmul=True, **graphed)
        print(json.dumps({"label": label, "metric": "update", "prompts": prompts, **row}), flush=True)
    del trainer
    row = sweep_steps(s, prompts, "auto", s.cuda, matmul=True, **graphed)
    print(json.dumps({"label": label, "metric": "step", "prompts": prompts, **row}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
