"""A study of settings: run variants of a config, choose on the validation split.

    python -m rl.tools.study --config AdderRLConfig --seeds 0 --common eval_interval=10 \
        --variants "default:" "lr 6e-4:learning_rate=6e-4" "32 prompts:rl_batch_size=32,warmup_steps=10"

Each variant is NAME:KEY=VALUE,KEY=VALUE (config overrides; none for the config as it is). Every run
is the real command in a fresh folder out/study/<config>/<name>-seed<S>, one at a time with the
whole machine, so their wall seconds compare. The table reports, per variant and as the median
over seeds, what choices may look at: the wall seconds (warm start included) at which *validation*
accuracy first reached 0.95 and 0.99 in the run's own evaluations, the final validation accuracy,
and the warm start's validation accuracy. The test split is not read. Each run is written to
results/study/<config>-<variant>-seed<S>.json as it finishes; one whose file exists is read back.
"""

import argparse
import json
import os
import shutil

from rl import run_dir
from rl.tools import launch, results
from rl.tools.report import first_reaching, markdown_table, median_range


def run_variant(config: str, name: str, overrides: list, seed: int, root: str) -> dict:
    """One variant and seed: read back from results/study/ when its file exists, else run and saved."""
    label = f"{config}-{name.replace(' ', '_')}-seed{seed}"
    file = results.path("study", label)
    if os.path.exists(file):
        with open(file) as f:
            return summarize(json.load(f))
    out = os.path.join(root, label)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    launch.run(["--config_name", config, f"--seed={seed}", "--no_wandb", "--resume=never", f"--out_dir={out}",
                *[f"--{kv}" for kv in overrides]], log_path=run_dir.log_path(out))
    rec = results.record(out, tool="study", command=f"python -m rl.tools.study --config {config} --seeds {seed} "
                         f"--common '' --variants '{name}:{','.join(overrides)}'",
                         key={"config": config, "variant": name, "overrides": overrides, "seed": seed},
                         run_seconds=[r["perf/run_seconds"] for r in run_dir.read_metrics(out) if "val/accuracy" in r])
    results.save(rec, file)
    return summarize(rec)


def summarize(rec: dict) -> dict:
    """What the table reads from a record: validation only, seconds since the run began."""
    summary, key = rec["summary"], rec["key"]
    curve = [(t, p["validation"]) for t, p in zip(rec["run_seconds"], rec["curve"])]
    return {"variant": key["variant"], "seed": key["seed"], "overrides": key["overrides"], "curve": curve,
            "warm_start_validation": summary.get("warm_start_validation"), "final_validation": curve[-1][1],
            "seconds_to_0.95": first_reaching(curve, 0.95), "seconds_to_0.99": first_reaching(curve, 0.99),
            "total_seconds": round(summary["total_seconds"], 1)}


def starts_from_a_later_file(overrides: list) -> bool:
    """Whether a variant's init_from names a file not there yet: the warm start an earlier variant of the same
    command leaves in its folder (docs/results.md, "Choosing RL's settings for K = 256")."""
    init = next((kv.partition("=")[2] for kv in overrides if kv.startswith("init_from=")), "sft")
    return init not in ("sft", "scratch") and not os.path.exists(init)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="AdderRLConfig")
    parser.add_argument("--variants", nargs="+", default=["default:"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--common", default="eval_interval=10",
                        help="KEY=VALUE,... set in every variant (evaluations every 10 steps time the curve finely)")
    parser.add_argument("--out_dir", default=os.path.join(launch.REPO, "out", "study"))
    args = parser.parse_args()
    variants = [(name, [kv for kv in f"{args.common},{settings}".split(",") if kv])
                for name, _, settings in (spec.partition(":") for spec in args.variants)]
    for name, overrides in variants:  # every variant as the script reads it, before the first one's minutes,
        if not starts_from_a_later_file(overrides):  # (that one: checked as it starts)
            launch.check_command(["--config_name", args.config, "--no_wandb", *[f"--{kv}" for kv in overrides]])
    rows = []
    for name, overrides in variants:
        for seed in args.seeds:
            rows.append(run_variant(args.config, name, overrides, seed, args.out_dir))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "curve"}), flush=True)
    table = []
    for name in dict.fromkeys(r["variant"] for r in rows):
        rs = [r for r in rows if r["variant"] == name]
        own = [kv for kv in rs[0]["overrides"] if kv not in args.common.split(",")]
        table.append([name, " ".join(own) or "(the config as it is)", len(rs),
                      median_range([r["warm_start_validation"] for r in rs]),
                      median_range([r["seconds_to_0.95"] for r in rs], "{:.0f}"),
                      median_range([r["seconds_to_0.99"] for r in rs], "{:.0f}"),
                      median_range([r["final_validation"] for r in rs]),
                      median_range([r["total_seconds"] for r in rs], "{:.0f}")])
    print("\nvalidation split only; median (min-max) over seeds\n\n" + markdown_table(
        ["variant", "overrides", "seeds", "warm start (val)", "s to 0.95 (val)", "s to 0.99 (val)", "final (val)",
         "wall s"], table))


if __name__ == "__main__":
    main()
