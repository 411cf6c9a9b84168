"""A run's three evaluation sets in a fresh process (the warm start's 250 validation problems, then RL's 4,000 of
validation and of test), on the tree named on PYTHONPATH: milliseconds of each eval_operands call, for the 3-digit
adder, then 3-digit multiplication in the same process (the same operand space). One JSON line each.

    for i in 1 2 3; do for t in <tree before> .; do PYTHONPATH=$t python results/study/eval-sets/bench.py $t; done; done
"""
import json
import sys
import time

from rl.math_env import MathEnvironment

for task in ("adder", "multiplier"):
    env = MathEnvironment(task, 3, show_work=task == "multiplier")
    ms = []
    for split, num in (("validation", 250), ("validation", 4000), ("test", 4000)):
        t = time.perf_counter()
        env.eval_operands(num, split)
        ms.append(round(1000 * (time.perf_counter() - t), 1))
    print(json.dumps({"tree": sys.argv[1] if len(sys.argv) > 1 else ".", "task": task, "ndigit": 3, "ms": ms,
                      "total_ms": round(sum(ms), 1)}), flush=True)
