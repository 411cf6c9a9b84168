"""Encoding problems as tokens with the built-in operations vectorized (one call on the batch's arrays) against the
same operations called once a problem on Python's ints (the path before, and every operation registered without
vectorized=True), issue 33: each preset's task at 256, 512 and 4,096 problems, the two in turn, `rounds` rounds of
20 calls each; one JSON line a preset and size (median milliseconds a call over the rounds, and the range).

    PYTHONPATH=. python results/study/vectorized-encode/bench.py [rounds] > results/study/vectorized-encode/cpu.jsonl
"""

import dataclasses
import json
import statistics
import sys
import time

import numpy as np
import torch

from rl.math_env import MathEnvironment
from rl.rl_ddp import get_config_class


def ms_per_call(env, a, b, calls: int = 20) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        env.encode(a, b)
    return 1000 * (time.perf_counter() - t) / calls


def main(rounds: int = 5):
    for name in ("AdderRLConfig", "MultiplierRLConfig", "Multiplier3RLConfig"):
        config = get_config_class(name)().get_args_ready()
        fast = MathEnvironment(**config.task_args())
        slow = MathEnvironment(**config.task_args())
        slow.op = dataclasses.replace(slow.op, vectorized=False)
        for n in (256, 512, 4096):
            a, b = fast.sample_operands(n, np.random.default_rng(0))
            assert all(torch.equal(x, y) for x, y in zip(fast.encode(a, b), slow.encode(a, b)))
            times = {"vectorized": [], "one by one": []}
            for _ in range(rounds):
                times["one by one"].append(ms_per_call(slow, a, b))
                times["vectorized"].append(ms_per_call(fast, a, b))
            print(json.dumps({"config": name, "task": config.task, "ndigit": config.ndigit,
                              "show_work": config.show_work, "problems": n, "threads": torch.get_num_threads(),
                              "torch": torch.__version__,
                              **{f"{k} ms": round(statistics.median(v), 3) for k, v in times.items()},
                              **{f"{k} ms range": [round(min(v), 3), round(max(v), 3)] for k, v in times.items()}}),
                  flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
