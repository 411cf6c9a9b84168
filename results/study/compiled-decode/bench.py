"""The decode with and without compile=true's compiled cached passes, on this machine (issue 33): the perf sweep's
sampling measurement (rl/tools/perf.py sweep_sampling: the adder's model from random weights, 64 prompts x 8
answers, fp32, eager loop) for the plain decode and prefix sharing's, eager and compiled, in rounds (A B C D A B C D
...), each row's first call (the compile, where compiled) timed alone. One JSON line a row, then a summary line.

    PYTHONPATH=. python results/study/compiled-decode/bench.py [rounds] > results/study/compiled-decode/cpu.jsonl
"""

import json
import platform
import statistics
import sys

import torch

from rl.tools.perf import Sweep, sweep_sampling

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
s = Sweep("AdderRLConfig", torch.device("cpu"), reps=5, budget_s=30)
trainer = s.trainer(64)
rows = []
for r in range(rounds):
    for compile in (False, True):
        for share in (False, True):
            row = dict(round=r, compile=compile, prefix_sharing=share,
                       **sweep_sampling(s, trainer, "fp32", False, prefix_sharing=share, compile=compile))
            rows.append(row)
            print(json.dumps(row), flush=True)
median = lambda c, p: statistics.median(x["seconds"] for x in rows if x["compile"] == c and x["prefix_sharing"] == p)
print(json.dumps(dict(summary=True, torch=torch.__version__, threads=torch.get_num_threads(), cpu=platform.processor(),
                      median_seconds={f"{'compiled' if c else 'eager'}{' shared' if p else ''}": median(c, p)
                                      for c in (False, True) for p in (False, True)})))
