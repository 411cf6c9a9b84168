"""Benchmark: end-to-end accuracy and time of the shipped configs, and the speed of the RL step.

    python -m rl.benchmark                                   # AdderRLConfig and MultiplierRLConfig, seeds 0 1 2
    python -m rl.benchmark --configs AdderRLConfig --seeds 0 --set rl_train_steps=100
    python -m rl.benchmark --configs AdderRLConfig --nproc 2      # each run under torchrun, 2 processes
    python -m rl.benchmark --perf                            # step speed against this machine's matmul peak
    python -m rl.benchmark --perf --compile                  # ... and whether torch.compile pays

End to end: each run is the real command (`python rl/rl_ddp.py --config_name NAME --seed=S
--no_wandb`) in a fresh folder out/benchmark/<NAME>-seed<S>, so the warm start is trained, not read
from a cache. Prints one JSON line per run, then a Markdown table of medians for the README.

--perf: JSON lines measured on this machine (see rl/perf.py for what each number means).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(config_name: str, seed: int, out_root: str, extra: list, nproc: int = 1) -> dict:
    out_dir = os.path.join(out_root, f"{config_name}-seed{seed}" + (f"-{nproc}proc" if nproc > 1 else ""))
    shutil.rmtree(out_dir, ignore_errors=True)
    launcher = [sys.executable] if nproc == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    cmd = [*launcher, "rl/rl_ddp.py", "--config_name", config_name, f"--seed={seed}", "--no_wandb",
           f"--out_dir={out_dir}", "--resume=never", *[f"--{kv}" for kv in extra]]
    os.makedirs(out_dir)
    log_path = os.path.join(out_dir, "run.log")  # the run's console output, to follow with tail -f
    t0 = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    if proc.returncode != 0:
        with open(log_path) as log:
            raise SystemExit(f"run failed ({' '.join(cmd)}):\n{log.read()[-2000:]}")
    with open(os.path.join(out_dir, "summary.json")) as f:
        s = json.load(f)
    return {"config": config_name, "seed": seed, "processes": nproc, "warm_start_accuracy": s["start_accuracy"],
            "final_accuracy": s["final_accuracy"], "warm_start_seconds": round(s.get("warm_start_seconds", 0.0), 1),
            "warm_start_steps": s.get("warm_start_steps"), "rl_seconds": round(s["rl_seconds"], 1),
            "rl_samples_per_second": round(s["rl_samples_per_second"], 1), "wall_seconds": round(wall, 1)}


def markdown_table(rows: list) -> str:
    lines = ["| config | processes | seeds | warm start acc | final acc | warm start s | RL s | RL samples/s | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, nproc in dict.fromkeys((r["config"], r["processes"]) for r in rows):
        rs = [r for r in rows if r["config"] == name and r["processes"] == nproc]
        med = lambda key: statistics.median(r[key] for r in rs)
        lines.append(f"| {name} | {nproc} | {len(rs)} | {med('warm_start_accuracy'):.3f} | {med('final_accuracy'):.3f} "
                     f"({min(r['final_accuracy'] for r in rs):.3f}-{max(r['final_accuracy'] for r in rs):.3f}) | "
                     f"{med('warm_start_seconds'):.0f} | {med('rl_seconds'):.0f} | {med('rl_samples_per_second'):.0f} | "
                     f"{med('wall_seconds'):.0f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["AdderRLConfig", "MultiplierRLConfig"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out_dir", default=os.path.join(REPO, "out", "benchmark"))
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every run")
    parser.add_argument("--nproc", type=int, default=1, help="processes per run (torchrun when above 1)")
    parser.add_argument("--perf", action="store_true", help="measure the RL step's speed instead (rl/perf.py)")
    parser.add_argument("--compile", action="store_true", help="with --perf: also time torch.compile (slow to compile)")
    args = parser.parse_args()
    if args.perf:
        from rl import perf
        perf.main(args.configs, args.compile)
        return
    rows = []
    for name in args.configs:
        for seed in args.seeds:
            rows.append(run_one(name, seed, args.out_dir, args.set, args.nproc))
            print(json.dumps(rows[-1]), flush=True)
    print("\nmedians over seeds (final accuracy: median (min-max)):\n" + markdown_table(rows))


if __name__ == "__main__":
    main()
