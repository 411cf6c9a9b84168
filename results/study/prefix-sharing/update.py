"""The RL step's update with and without prefix_sharing, on one fixed sampled batch of a preset's trainer.

    PYTHONPATH=. python results/study/prefix-sharing/update.py AdderRLConfig [--prefix_sharing] [--reps 7]

Builds the trainer as rl/tools/perf.py does (random weights, the digit_match reward, so every answer trains and
none is skipped), samples one step's batch, runs the update once untimed, then `reps` times, and prints one JSON
line: the median and range of the update's seconds, and the tokens its forwards read (the linear layers' rows).
"""

import argparse
import json
import statistics
import time

import torch

from rl.tools.perf import build_trainer, fixed_update


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--prefix_sharing", action="store_true")
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    trainer = build_trainer(a.config, prefix_sharing=a.prefix_sharing)
    batch, update = fixed_update(trainer)
    tokens = []

    def count(module, args, kwargs):  # what the linear layers of each forward read
        groups = kwargs.get("groups")
        idx = args[0]
        tokens.append(idx.numel() if groups is None else len(groups.first) * groups.length
                      + idx[:, groups.length:].numel())
    hook = trainer.model.register_forward_pre_hook(count, with_kwargs=True)
    update()  # untimed: first-call allocations
    hook.remove()
    seconds = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        update()
        seconds.append(time.perf_counter() - t0)
    c = trainer.config
    print(json.dumps(dict(config=a.config, prefix_sharing=a.prefix_sharing, rows=len(batch),
                          ppo_minibatches=c.ppo_minibatches, rl_ga_steps=c.rl_ga_steps, forwards=len(tokens),
                          tokens=sum(tokens), threads=torch.get_num_threads(),
                          update_seconds_median=statistics.median(seconds), update_seconds_min=min(seconds),
                          update_seconds_max=max(seconds), reps=a.reps, torch=torch.__version__)))


if __name__ == "__main__":
    main()
