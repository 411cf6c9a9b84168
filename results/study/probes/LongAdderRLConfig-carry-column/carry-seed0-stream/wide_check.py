"""Probe: a padded warm start's greedy validation accuracy on 10-digit sums written at 10, 20, 30 and 40 digits
(leading zeros: the padded phase's own layouts) and on 20-digit sums. From the repository root:

    python results/study/probes/LongAdderRLConfig-carry-column/carry-seed0-stream/wide_check.py FILE...
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.getcwd())
from rl.dist import DistInfo  # noqa: E402
from rl.evaluate import evaluate, load_for_evaluation  # noqa: E402
from rl.long_env import environments  # noqa: E402

widen = lambda x, width: np.pad(x, ((0, 0), (0, width - x.shape[1])))
for path in sys.argv[1:]:
    model, envs, snap = load_for_evaluation(path, [20])
    sft = environments(snap["task"], [20])["sft"]
    a, b = sft.unpadded().eval_operands(200, "validation")
    out = {}
    for width in (10, 20, 30, 40):
        sft.set_width(10, width)
        out[f"10 digits at {width}"] = evaluate(model, sft, widen(a, width), widen(b, width), DistInfo(),
                                                split="validation").accuracy
    a, b = envs[20].eval_operands(200, "validation")
    out["20 digits"] = evaluate(model, envs[20], a, b, DistInfo(), split="validation").accuracy
    print(path, json.dumps(out), flush=True)
