"""The replay buffer's observe (rl/problem_sampler.py ReplaySampler.observe: its rule applied a group after another in
Python) against two others that leave the same buffer: the same loop with no method call a group (`one_by_one`),
and array operations (`replay_order`, tried for issue 33's "nothing per problem in Python"). The adder preset's
buffer (capacity 4,096) fed rounds of 256 and 4,096 groups of 8 answers, half of them drawn again from the buffer,
with a tenth and with nine tenths of the groups all right; the same buffer after every round from all three (the
script checks), the three in turn, `rounds` rounds after 5 to fill it. One JSON line a setting: the median
milliseconds a call, and the range.

    PYTHONPATH=. python results/study/vectorized-replay/bench.py [rounds] > results/study/vectorized-replay/cpu.jsonl
"""

import json
import statistics
import sys
import time
from collections import OrderedDict

import numpy as np
import torch

from rl.math_env import MathEnvironment
from rl.problem_sampler import ReplaySampler, pair_keys, training_only


def replay_order(old_keys: np.ndarray, old_rates: np.ndarray, keys: np.ndarray, rates: np.ndarray,
                 solved: np.ndarray, capacity: int):
    """The replay buffer after a step's groups, by array operations: what the groups taken one after another leave (a
    solved group's key leaves; another's joins the back, or keeps its place if it is in already, its rate updated),
    then the oldest leaving down to `capacity`. old_keys, old_rates (K,): the buffer, oldest first; keys, rates,
    solved (M,), M >= 1: the groups in order (a key may come more than once). Returns the buffer's keys and rates,
    oldest first, then the groups' distinct keys (U,) and the index of each one's last group (U,)."""
    M = len(keys)
    order = np.arange(M)
    unique, inverse = np.unique(keys, return_inverse=True)
    U = len(unique)
    last, last_solved, enters = np.zeros(U, np.int64), np.full(U, -1), np.full(U, M)
    np.maximum.at(last, inverse, order)
    np.maximum.at(last_solved, inverse[solved], order[solved])
    after = order > last_solved[inverse]  # a key (re-)enters at its first group after its last solved one
    np.minimum.at(enters, inverse[after], order[after])
    stays = ~solved[last]
    place = np.minimum(np.searchsorted(unique, old_keys), U - 1)
    seen = unique[place] == old_keys  # the entries this step's groups name
    was_in = np.zeros(U, dtype=bool)
    was_in[place[seen]] = True
    kept = stays & was_in & (last_solved < 0)  # in already and never solved this step: it keeps its place
    joins = np.flatnonzero(stays & ~kept)
    joins = joins[np.argsort(enters[joins], kind="stable")]  # at the back, in the order they entered
    old = ~seen | kept[place]
    old_rates = np.where(seen, rates[last[place]], old_rates)
    new_keys = np.concatenate([old_keys[old], unique[joins]])
    new_rates = np.concatenate([old_rates[old], rates[last[joins]]])
    excess = max(len(new_keys) - capacity, 0)  # the oldest leave first
    return new_keys[excess:], new_rates[excess:], unique, last


def one_by_one(sampler: ReplaySampler, keys, successes, G: int):
    """observe as it was: the groups one after another, then the oldest out down to capacity."""
    keys, successes, _ = training_only(sampler.env, keys, successes)
    buffer = sampler.buffer
    for key, solved, rate in zip(keys.tolist(), (successes == G).tolist(), (successes / G).tolist()):
        if solved:
            buffer.pop(key, None)
        else:
            buffer[key] = rate
    for _ in range(len(buffer) - sampler.capacity):
        buffer.popitem(last=False)


def by_arrays(sampler: ReplaySampler, keys, successes, G: int):
    keys, successes, _ = training_only(sampler.env, keys, successes)
    buffer = sampler.buffer
    old_keys = np.fromiter(buffer, dtype=np.int64, count=len(buffer))
    old_rates = np.fromiter(buffer.values(), dtype=np.float64, count=len(buffer))
    new_keys, new_rates, _, _ = replay_order(old_keys, old_rates, keys, successes / G, successes == G, sampler.capacity)
    sampler.buffer = OrderedDict(zip(new_keys.tolist(), new_rates.tolist()))


def main(rounds: int = 20):
    env, G = MathEnvironment("adder", 3), 8
    for groups in (256, 4096):
        for solved_share in (0.1, 0.9):
            samplers = {name: ReplaySampler(env, share=0.5, capacity=4096)
                        for name in ("observe", "one by one", "array operations")}
            rng = np.random.default_rng(0)
            times = {name: [] for name in samplers}
            paths = {"observe": lambda s, k, c: s.observe(k, c, G),
                     "one by one": lambda s, k, c: one_by_one(s, k, c, G),
                     "array operations": lambda s, k, c: by_arrays(s, k, c, G)}
            for r in range(5 + rounds):
                a, b = env.sample_operands(groups // 2, rng)  # half fresh, half drawn again from the buffer
                first = samplers["observe"]
                old = np.fromiter(first.buffer, dtype=np.int64, count=len(first.buffer))
                again = rng.choice(old, size=min(groups - len(a), len(old)), replace=False) if len(old) else old
                keys = np.concatenate([pair_keys(env, a, b), again])
                successes = np.where(rng.random(len(keys)) < solved_share, G, rng.integers(0, G, len(keys)))
                for name, sampler in samplers.items():
                    t = time.perf_counter()
                    paths[name](sampler, keys, successes)
                    if r >= 5:
                        times[name].append(1000 * (time.perf_counter() - t))
                assert len({tuple(s.buffer.items()) for s in samplers.values()}) == 1
            print(json.dumps({"groups": groups, "all_right_share": solved_share, "capacity": 4096,
                              "buffer_size": len(first.buffer), "threads": torch.get_num_threads(),
                              **{f"{k} ms": round(statistics.median(v), 3) for k, v in times.items()},
                              **{f"{k} ms range": [round(min(v), 3), round(max(v), 3)] for k, v in times.items()}}),
                  flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
