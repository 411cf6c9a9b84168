"""Device check 7 of issue 33: where the RL step's time outside sampling, scoring and the update goes (its "other"
share: 11-17% of a 4,096-prompt step on the H200, 12-17 ms), by the host's clock.

    PYTHONPATH=. python results/gpu/session7_other.py [prompts] [steps]

The perf sweep's trainer (random weights, digit_match; rl/tools/perf.py) at 4,096 prompts x 8 answers, bf16 autocast,
CUDA graphs and matmul attention, after warm-up steps until one captures no new decode graph. Then the stages of
`steps` steps timed by the host's clock, the device synchronised before and after each (one JSON line a stage:
median milliseconds): the problem sampler's draws, encoding the problems, generate, scoring and each round's host
read, dynamic sampling's selection, the problem sampler's observe, the advantages, the update; and a cProfile of
those steps, the 25 functions with the most time of their own (the waits for the device show in the reads that
sync).
"""
import cProfile
import io
import json
import pstats
import statistics
import sys
import time

import torch

from rl import rollout
from rl.tools.perf import Sweep, graph_captures


def main(prompts: int = 4096, steps: int = 5):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    s = Sweep("AdderRLConfig", device)
    trainer = s.trainer(prompts, precision="auto", cuda_graphs=True, matmul_attention=device.type == "cuda")
    for _ in range(8):  # (until a step captures no new decode graph)
        captures = graph_captures(trainer)
        trainer.train_step()
        if graph_captures(trainer) == captures:
            break
    times = {}

    def timed(obj, name, label):
        f = getattr(obj, name)

        def g(*args, **kwargs):
            sync()
            t = time.perf_counter()
            out = f(*args, **kwargs)
            sync()
            times.setdefault(label, []).append(time.perf_counter() - t)
            return out
        setattr(obj, name, g)

    timed(trainer.problem_sampler, "draw", "problem draws")
    timed(trainer.env, "encode", "encode")
    timed(trainer.model, "generate", "generate")
    timed(rollout, "compute_rewards", "rewards")
    timed(rollout.Rollout, "cat", "dynamic sampling's cat")
    timed(trainer.rollouts, "collect", "collect (all of sampling)")
    timed(trainer, "observe_outcomes", "observe")
    timed(trainer, "advantages", "advantages")
    timed(trainer, "update", "update")
    timed(trainer, "train_step", "step")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(steps):
        trainer.train_step()
    profile.disable()
    for label, values in times.items():  # per step: a stage called twice a step (two rounds) counts twice
        print(json.dumps({"prompts": prompts, "stage": label, "calls_per_step": len(values) / steps,
                          "median_ms": 1000 * statistics.median(values), "per_step_ms": 1000 * sum(values) / steps}),
              flush=True)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue(), flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
