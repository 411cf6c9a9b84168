"""Device check 4 of issue 33 (one H100): the result files of results/gpu/NVIDIA-H100-80GB-HBM3/, rebuilt here.

The device tool brings back no file whose name holds "=" or "+", so the run records that rl/tools/gpu.py wrote
there did not come back. Their run folders did (metrics.jsonl, summary.json, config.json; snapshots left out),
and the gpu-*.log files hold each run's printed row with its wall seconds on the device. This script makes each
record as rl/tools/benchmark.py would have (summarize() of the folder, that row's wall seconds, the command), with
the machine fields of the sweep's record from the same session. The commit is the one whose tree the device ran
(the device's checkout reported its parent). Run once, from the repository root: PYTHONPATH=. python results/gpu/session4/rebuild.py FOLDER...
"""
import glob
import json
import os
import sys

from rl.tools import benchmark, results

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = "gpu/NVIDIA-H100-80GB-HBM3"
COMMIT = "b4212b0"

machine = json.load(open(results.path(GPU, "perf-AdderRLConfig")))
machine = {k: machine[k] for k in ("cpu", "cores", "memory_gib", "threads", "torch", "gpu", "gpu_memory_gib",
                                   "driver", "cuda")}
printed = {}
for log in glob.glob(os.path.join(HERE, "gpu-*.log")):
    for line in open(log):
        if line.startswith("{") and "wall_seconds_here" in line:
            row = json.loads(line)
            printed[os.path.basename(row["out_dir"])] = row
for folder in sys.argv[1:]:
    name = os.path.basename(folder.rstrip("/"))
    logged = printed[name]
    config, seed, overrides = logged["config"], logged["seed"], logged["set"]
    row = benchmark.summarize(folder, dict(config=config, sampler="default", seed=seed, processes=1, set=overrides),
                              logged["wall_seconds_here"])
    row["out_dir"] = logged["out_dir"]
    for key in ("final_accuracy", "wall_seconds", "start_accuracy"):  # the rebuilt record says what the device said
        assert row[key] == logged[key], (name, key, row[key], logged[key])
    row["command"] = " ".join(["python -m rl.tools.benchmark --configs", config, "--seeds", str(seed), "--results",
                               GPU, "--set", *overrides])
    row.update(machine, commit=COMMIT)
    results.save(row, results.path(GPU, name))
    print(name, row["final_accuracy"], row["wall_seconds"])
