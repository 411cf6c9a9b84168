"""The presets on one GPU: each preset's GPU settings chosen on validation (one seed), then confirmed on three.

    python -m rl.tools.gpu                               # every preset below: choose on seed 0, confirm on 1337 0 1
    python -m rl.tools.gpu --configs AdderRLConfig --choose_seed 0 --seeds 1337 0 1
    python -m rl.tools.gpu --table                       # the tables of the files in results/gpu/*/, running nothing

Every run is the benchmark's (rl/tools/benchmark.py: the README's command in a fresh folder, timed on the
run's own clock with the warm start included) and its file is written to results/gpu/<GPU>/ as soon as it
finishes, naming the GPU, its driver and torch; a run whose file exists for this GPU is read back, not run again.

The choice looks at validation only: of a preset's CANDIDATES (each a list of --set overrides), the one whose
validation accuracy first reaches the preset's target soonest on the run's clock; a candidate that never
reaches it ranks after every one that does, by its final validation accuracy. The chosen settings are then run
on every seed, and the test split (reported) is read only there. A choice is kept as a GPU preset of configs/gpu.py,
and the README's "On a GPU" rows follow it: they are the runs whose settings are exactly a preset's (`preset_of`
names it; tests/test_config.py fails until such runs exist), so a new choice is one edit there.
"""

import argparse
import functools
import json
import os
import statistics
import sys
from types import SimpleNamespace

import torch

from configs.gpu import gpu_preset_for
from rl.errors import ConfigError
from rl.rl_ddp import config_from_args
from rl.tools import benchmark, launch, results
from rl.tools.report import first_reaching, markdown_table, median_range

# without CUDA the runs would train on the CPU for hours and file CPU seconds as a GPU's
NO_CUDA = ("error: python -m rl.tools.gpu runs the presets on a GPU, and CUDA is not available here; "
           "--table prints the saved results, python -m rl.tools.benchmark runs them on the CPU")

# preset -> (the validation accuracy its choice aims at, the candidates: --set overrides on the preset). Every
# candidate evaluates often (a graph-replayed evaluation costs milliseconds), in one batch a split, trains in one
# micro-batch, and stops once validation holds a target a little above the aim, rl_train_steps its upper bound.
ADDER = ["rl_ga_steps=1", "eval_interval=2", "eval_batch_size=1000", "rl_train_steps=600", "rl_target_accuracy=0.995"]
MULTIPLIER = ["rl_ga_steps=1", "eval_interval=5", "eval_batch_size=2000", "rl_train_steps=400",
              "rl_target_accuracy=0.995"]
MULTIPLIER3 = ["rl_ga_steps=1", "eval_interval=5", "eval_batch_size=1000", "rl_train_steps=400",
               "rl_target_accuracy=0.99"]
MATMUL = ["matmul_attention=true"]  # attention in plain matmuls: flash attention's tiles are mostly padding here
CANDIDATES = {  # (the 256-prompt candidates of earlier sessions lost on an H200: results/gpu/NVIDIA-H200/)
    "AdderRLConfig": (0.99, [
        ADDER,
        [*ADDER, *MATMUL],
        # a supervised step costs about what an RL step does on a GPU: let the warm start go further
        [*ADDER, *MATMUL, "sft_target_accuracy=0.9", "sft_batch_size=512", "sft_learning_rate=2e-3",
         "sft_max_steps=1500"],
    ]),
    "MultiplierRLConfig": (0.99, [
        MULTIPLIER,
        [*MULTIPLIER, *MATMUL],
        [*MULTIPLIER, *MATMUL, "sft_target_accuracy=0.95", "sft_max_steps=1500"],
    ]),
    "Multiplier3RLConfig": (0.98, [
        MULTIPLIER3,
        [*MULTIPLIER3, *MATMUL],
        [*MULTIPLIER3, *MATMUL, "sft_target_accuracy=0.95"],
    ]),
}


def preset_of(config_name: str, overrides: list):
    """The GPU preset (configs/gpu.py) that runs as config_name with these --set overrides does on CUDA (None: no
    GPU preset does): the name the README gives such runs."""
    return _preset_of(config_name, tuple(overrides))


@functools.lru_cache(maxsize=None)  # (the README's tables ask it of every record, several times)
def _preset_of(config_name: str, overrides: tuple):
    gpu = gpu_preset_for(config_name)
    if gpu is None:
        return None
    try:
        ran = config_from_args(["--config_name", config_name, *(f"--{kv}" for kv in overrides)]).to_dict()
    except ConfigError:  # (runs of a setting since renamed or removed: what ran is no preset of today's)
        return None
    preset = config_from_args(["--config_name", gpu.__name__]).to_dict()
    return gpu if all(ran[k] == preset[k] for k in ran if k not in ("device", "out_dir")) else None


def run(config_name: str, seed: int, overrides: list, out_dir: str) -> dict:
    """One benchmark run (read back from results/gpu/<this GPU>/ when its file exists)."""
    args = SimpleNamespace(configs=[config_name], seeds=[seed], out_dir=out_dir, set=list(overrides), nproc=1,
                           samplers=None, rerun=False, what_rl_adds=False, results=results.gpu_folder())
    return benchmark.measure(args)[0]


def seconds_to_validation(row: dict, target: float):
    """When validation first reached the target on the run's clock (None: never). Records written before the
    validation curve was kept have the seconds only for the benchmark's TARGETS; 3-digit multiplication's aim
    (0.98) is not one of them, so those records rank by final validation alone."""
    if "validation_seconds_curve" in row:
        return first_reaching(row["validation_seconds_curve"], target)
    return row.get(f"seconds_to_validation_{target}")


def rank(row: dict, target: float) -> tuple:
    """Sooner to the target on validation first; then a higher final validation accuracy."""
    seconds = seconds_to_validation(row, target)
    return (seconds is None, seconds or 0.0, -(row["final_validation"] or 0.0))


def choose(config_name: str, seed: int, out_dir: str) -> list:
    target, candidates = CANDIDATES[config_name]
    rows = [run(config_name, seed, overrides, out_dir) for overrides in candidates]
    best = min(range(len(rows)), key=lambda i: rank(rows[i], target))
    print(json.dumps({"config": config_name, "chosen": candidates[best], "on": f"validation, seed {seed}",
                      "seconds_to_validation": [seconds_to_validation(r, target) for r in rows],
                      "final_validation": [r["final_validation"] for r in rows]}), flush=True)
    return candidates[best]


def table(rows: list) -> str:
    """Median (min-max) over seeds of each preset x settings x GPU; runs with exactly a GPU preset's settings are
    named by it (configs/gpu.py), as the README's tables name them."""
    groups = {}
    for r in rows:  # seconds compare only on one card: a group is one GPU's
        groups.setdefault((r["config"], tuple(r.get("set", [])), r.get("gpu", "-")), []).append(r)
    lines = []
    for (config, overrides, _), rs in sorted(groups.items()):
        target = CANDIDATES.get(config, (0.99,))[0]
        gpu = preset_of(config, list(overrides))  # (as the README names them: a GPU preset's runs by its name)
        lines.append([gpu.__name__ if gpu else config, "(preset)" if gpu or not overrides else " ".join(overrides),
                      str(len(rs)),
                      median_range([r["final_accuracy"] for r in rs]),
                      median_range([first_reaching(r["curve"], target) for r in rs], "{:.1f}") + f" (>= {target})",
                      median_range([r["wall_seconds"] for r in rs], "{:.1f}"),
                      median_range([r["warm_start_seconds"] for r in rs], "{:.1f}"), rs[0].get("gpu", "-")])
    return markdown_table(["preset", "--set", "seeds", "final test", "first test >= target, s", "run, s",
                           "warm start, s", "GPU"], lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--choose_seed", type=int, default=0)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1337, 0, 1])
    parser.add_argument("--out_dir", default=os.path.join(launch.REPO, "out", "gpu"))
    parser.add_argument("--table", action="store_true", help="print the tables of results/gpu/*/, running nothing")
    args = parser.parse_args()
    if not args.table and not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        raise SystemExit(2)
    if not args.table:
        for name in args.configs:
            chosen = choose(name, args.choose_seed, args.out_dir)
            for seed in args.seeds:
                run(name, seed, chosen, args.out_dir)
    print(table([r for r in results.load_tree("gpu") if "config" in r and "seed" in r]))


if __name__ == "__main__":
    main()
