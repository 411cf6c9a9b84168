"""Benchmark: end-to-end accuracy and time of the shipped configs, what RL adds, and the RL step's speed.

    python -m rl.tools.benchmark                                  # AdderRLConfig and MultiplierRLConfig, seeds 0 1 2
    python -m rl.tools.benchmark --configs Multiplier3RLConfig --seeds 0 --set rl_train_steps=100
    python -m rl.tools.benchmark --what_rl_adds                   # ... and supervised training for RL's seconds
    python -m rl.tools.benchmark --configs AdderRLConfig --nproc 2   # each run under torchrun, 2 processes
    python -m rl.tools.benchmark --perf [--compile]               # step speed against this machine's matmul peak
    python -m rl.tools.benchmark --configs MultiplierRLConfig --samplers uniform prioritized replay
                                                                  # problem selection, side by side
    python -m rl.tools.benchmark --table                          # the tables of every file in results/benchmark/

End to end: each run is the README's command (`python rl/rl_ddp.py --config_name NAME --seed=S
--no_wandb`, plus --set's overrides) in a fresh folder out/benchmark/<NAME>-...-seed<S>, one at a
time. From each run's metrics it reads the wall seconds, warm start included, at which test
accuracy first reached 0.95, 0.99 and 0.995 (from the run's own evaluations every eval_interval
steps; nothing is chosen on them), and the final accuracies.

Runs of one config, seed and --set share one warm start: the first trains it (timed) and leaves a
copy in out/benchmark/warm_starts/, the others start from that copy and count the warm start's
seconds as measured when it was trained (the same seed gives the same warm start:
tests/test_warm_start.py). --samplers runs each config once per problem sampler
(`--problem_sampler=NAME`; a spec NAME:KEY=VALUE,... adds settings for that sampler's runs, e.g. the
refill rounds it was tuned with).

Each run's result is written to results/benchmark/<name>.json as soon as it finishes (the name holds
the config, sampler, --set, seed and processes), and a run whose file exists is read back instead of
run again (--rerun to redo it), so an interrupted benchmark continues where it stopped. When the
summary grows a field, --add_fields adds it to the files whose run folders still hold their runs.

--what_rl_adds: after each run, the same warm start (out_dir/warm_start.pt) is trained on by
supervised learning instead, for as many seconds as the run's RL steps took (a matched-compute
baseline: teacher forcing on the warm start's training problems, its worked-example pool
included, the warm start's batch and learning rate, a fresh AdamW with 10 warmup steps and a cosine
decay to a tenth), then evaluated on the same test and validation sets; added to the run's file. If
the run's folder is gone, its warm start is trained again first and must match the file's (steps and
validation). Not for the task of many lengths (LongAdderRLConfig), refused before it runs: `python -m
rl.tools.lengths` makes that comparison there, per length.

Prints one JSON line per run, then Markdown tables of medians over seeds. docs/results.md's tables and
plots come from the files: `python -m rl.tools.readme`.
"""

import argparse
import json
import os
import shutil
import time

import numpy as np

from configs import get_config_class
from model.gpt import GPT, GPTConfig
from rl import run_dir
from rl.dist import DistInfo
from rl.errors import ConfigError
from rl.evaluate import evaluate, evaluate_set
from rl.math_env import MathEnvironment
from rl.rl_ddp import config_from_args
from rl.update import lr_lambda
from rl.snapshot import load_snapshot, model_from_snapshot
from rl.tools import launch, results
from rl.tools.report import first_reaching, markdown_table, median_range
from rl.warm_start import teacher_forced_step, training_pairs

TARGETS = (0.95, 0.99, 0.995)  # the problem-selection table's
END_TO_END_TARGETS = (0.9, 0.95, 0.99)  # the end-to-end table's: 3-digit multiplication is measured from 0.9


def run_name(config_name: str, sampler, seed: int, nproc: int, overrides: list = ()) -> str:
    """The file name of a run: every commit-independent setting that tells it apart."""
    label = sampler.replace(":", "+") if sampler else None  # a spec's settings stay in its file name
    return results.fit_name("-".join([config_name, *([label] if label else []),
                                      *(["+".join(overrides)] if overrides else [])]),
                            "".join([f"-seed{seed}", *([f"-{nproc}proc"] if nproc > 1 else [])]))


def sampler_args(spec: str) -> list:
    """'replay' -> ['--problem_sampler=replay']; 'uniform:dynamic_sampling_max_rounds=2' adds the
    settings that sampler is run with (a sampler and the refill rounds it was tuned with)."""
    name, _, settings = spec.partition(":")
    return [f"--problem_sampler={name}", *[f"--{kv}" for kv in settings.split(",") if kv]]


def script_args(config_name: str, seed: int, out_dir: str, extra: list, overrides: list) -> list:
    """The README's command for one run in a fresh out_dir, with extra flags and --set's overrides."""
    return ["--config_name", config_name, f"--seed={seed}", "--no_wandb", f"--out_dir={out_dir}", "--resume=never",
            *extra, *[f"--{kv}" for kv in overrides]]


def run_one(config_name: str, seed: int, args, sampler: str = None) -> dict:
    """The README's command in a fresh folder; what it did, read from its summary and metrics. With a
    sampler, the warm start of an earlier run of the same config and seed is reused (module docstring)."""
    name = run_name(config_name, sampler, seed, args.nproc, args.set)
    out_dir = os.path.join(args.out_dir, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    shared = os.path.join(args.out_dir, "warm_starts", run_name(config_name, None, seed, args.nproc, args.set) + ".pt")
    if sampler and os.path.exists(shared):
        shutil.copy(shared, run_dir.warm_start_path(out_dir))
    t0 = time.time()
    launch.run(script_args(config_name, seed, out_dir, sampler_args(sampler) if sampler else [], args.set),
               nproc=args.nproc, log_path=run_dir.log_path(out_dir))  # the console, to follow with tail -f
    wall = time.time() - t0
    row = summarize(out_dir, dict(config=config_name, sampler=sampler or "default", seed=seed, processes=args.nproc,
                                  set=args.set), wall)
    if sampler and not row["warm_start_cached"]:  # the first run of this config and seed: share its warm start
        os.makedirs(os.path.dirname(shared), exist_ok=True)
        shutil.copy(run_dir.warm_start_path(out_dir), shared)
    return row


def summarize(out_dir: str, row: dict, wall: float) -> dict:
    """A run's result from its folder (summary.json, metrics.jsonl), with the wall seconds it took
    here. A copied warm start took no time here: its seconds as measured when it was trained count."""
    s, rows = run_dir.read_summary(out_dir), run_dir.read_metrics(out_dir)
    offset = s.get("warm_start_seconds", 0.0) if s.get("warm_start_cached") else 0.0
    curve = [(r["perf/run_seconds"] + offset, r["eval/accuracy"]) for r in rows if "eval/accuracy" in r]
    steps = [r for r in rows if "train/answers_generated" in r]
    last_quarter = [r for r in steps if r["train/step"] > 0.75 * s["rl_steps_run"]]
    mean = lambda key, rs: round(float(np.mean([r[key] for r in rs])), 4) if rs else None
    row = {**row, "out_dir": out_dir, "wall_seconds_here": round(wall, 1), "warm_start_cached": bool(offset),
           "answers_per_step_last_quarter": mean("train/answers_generated", last_quarter),
           "trained_per_step_last_quarter": mean("train/batch_answers", last_quarter),
           "mixed_share_last_quarter": round(1 - mean("train/groups_all_equal", last_quarter), 4),
           "step_seconds_last_quarter": mean("perf/step_seconds", last_quarter),
           "validation_curve": [(r["step"], r["val/accuracy"]) for r in rows if "val/accuracy" in r],
           # per step: answers generated, answers trained on, share of first-round groups all equal, seconds
           "steps": [(r["step"], r["train/answers_generated"], r["train/batch_answers"],
                      round(r["train/groups_all_equal"], 4), round(r["perf/step_seconds"], 3)) for r in steps],
           # per step under replay: problems in the buffer, and the pass rate of the problems drawn
           "selection": [(r["step"], r["select/replay_size"], round(r["select/drawn_pass_rate"], 3))
                         for r in steps if "select/drawn_pass_rate" in r],
           "warm_start_steps": s.get("warm_start_steps"),
           "warm_start_seconds": round(s.get("warm_start_seconds", 0), 1),
           "warm_start_validation": s.get("warm_start_validation"), "start_accuracy": s["start_accuracy"],
           "final_accuracy": s["final_accuracy"], "final_steps_accuracy": s["final_steps_accuracy"],
           "final_validation": next((r["val/accuracy"] for r in reversed(rows) if "val/accuracy" in r), None),
           "rl_seconds": round(s["rl_seconds"], 1), "rl_train_seconds": round(s["rl_train_seconds"], 1),
           "rl_answers_generated": s["rl_answers_generated"],
           "rl_samples_per_second": round(s["rl_samples_per_second"], 1),
           "wall_seconds": round(wall + offset, 1), "curve": [(round(t, 1), a) for t, a in curve],
           "evals": results.curve_and_steps(rows)[0], "resolved_config": run_dir.read_config(out_dir), "summary": s}
    row.update({f"seconds_to_{t}": first_reaching(row["curve"], t) for t in TARGETS})
    # the same on validation, for whatever chooses between settings (rl/tools/gpu.py): test is only reported
    val_curve = [(r["perf/run_seconds"] + offset, r["val/accuracy"]) for r in rows if "val/accuracy" in r]
    row.update({f"seconds_to_validation_{t}": first_reaching(val_curve, t) for t in TARGETS})
    row["validation_seconds_curve"] = [(round(t, 2), a) for t, a in val_curve]  # for aims outside TARGETS
    return row


def add_fields() -> list:
    """Give each file in results/benchmark/ the fields summarize() has grown since it was written, read
    from its run folder if that still holds the same run (its summary.json equal to the file's). A
    field the file has is never changed. Returns (file name, fields added) per file changed."""
    changed = []
    for name in sorted(os.listdir(os.path.join(results.ROOT, "benchmark"))):
        path = os.path.join(results.ROOT, "benchmark", name)
        if not name.endswith(".json"):
            continue
        with open(path) as f:
            rec = json.load(f)
        folder = rec.get("out_dir", "")
        if not os.path.exists(run_dir.summary_path(folder)) or run_dir.read_summary(folder) != rec.get("summary"):
            continue  # the folder is gone or a later run has replaced it
        new = {k: v for k, v in summarize(folder, {}, rec["wall_seconds_here"]).items() if k not in rec}
        if new:
            results.save({**rec, **new}, path)
            changed.append((name, sorted(new)))
    return changed


def restore_warm_start(row: dict, config_name: str, seed: int, overrides: list) -> str:
    """Train the run's warm start again into its folder when the folder is gone (the same seed gives
    the same warm start), checked against the warm start the run's file describes."""
    out_dir = row["out_dir"]
    os.makedirs(out_dir, exist_ok=True)
    # the warm start alone: rl_train_steps=0 in place of any --set of it (an option is given once)
    overrides = [kv for kv in overrides if not kv.startswith("rl_train_steps=")]
    launch.run(script_args(config_name, seed, out_dir, ["--rl_train_steps=0"], overrides),
               log_path=run_dir.log_path(out_dir))
    s = run_dir.read_summary(out_dir)
    again, was = (s.get("warm_start_steps"), s.get("warm_start_validation")), (row["warm_start_steps"],
                                                                               row["warm_start_validation"])
    if again != was:
        raise SystemExit(f"the warm start trained again differs from the run's (steps, validation {again} against "
                         f"{was}): add --rerun to run the whole run again")
    return "the warm start trained again (same steps and validation as the run's)"


def supervised_for_seconds(model, config, seconds: float, step) -> tuple:
    """The matched-compute supervised baseline's loop: step(i, optimizer) (one teacher-forced step) until
    `seconds` are spent, with a fresh AdamW at the warm start's learning rate, 10 warmup steps and a cosine
    decay to a tenth; returns (steps, seconds). The schedule's length is re-estimated from the pace so far
    at every step (the first steps are slower, so a count fixed from them fell 29% short of RL's seconds)."""
    optimizer = model.configure_optimizer(lr=config.sft_learning_rate, weight_decay=config.weight_decay,
                                          betas=(config.adam_beta1, config.adam_beta2))
    model.train()
    t0, i, total = time.time(), 0, 10 ** 9
    while time.time() - t0 < seconds:
        for group in optimizer.param_groups:
            group["lr"] = config.sft_learning_rate * lr_lambda(i, warmup_steps=10, total_steps=total, min_lr_ratio=0.1)
        step(i, optimizer)
        i += 1
        total = max(i + 1, int(i * seconds / (time.time() - t0)))
    return i, time.time() - t0


def supervised_baseline(row: dict, config_name: str, seed: int, overrides: list) -> dict:
    """Supervised training from the run's warm start for its RL seconds (on the same worked examples
    as the warm start); test and validation accuracy at the end."""
    config = config_from_args(["--config_name", config_name, f"--seed={seed}", *[f"--{kv}" for kv in overrides]])
    restored = {}
    if not os.path.exists(run_dir.warm_start_path(row["out_dir"])):
        restored = {"sft_from": restore_warm_start(row, config_name, seed, overrides)}
    env = MathEnvironment(**config.task_args())
    model = GPT(GPTConfig(**config.model_args()))
    model.load_state_dict(load_snapshot(run_dir.warm_start_path(row["out_dir"]))["model"])
    rng = np.random.default_rng(seed)

    def step(i: int, optimizer):
        teacher_forced_step(model, env, optimizer, *training_pairs(config, env, config.sft_batch_size, rng), "cpu",
                            grad_clip=config.grad_clip)
    total, seconds = supervised_for_seconds(model, config, row["rl_train_seconds"], step)
    model.eval()
    # test is what is reported; validation is what a choice between settings may look at
    accuracy = {split: evaluate(model, env, *env.eval_operands(config.num_eval, split), DistInfo(),
                                batch_size=config.eval_batch_size, num_mistakes=0, split=split).accuracy
                for split in ("test", "validation")}
    return {"sft_steps": total, "sft_seconds": round(seconds, 1), "sft_accuracy": accuracy["test"],
            "sft_validation": accuracy["validation"], **restored,
            **pass_at_k_arms(config, env, row["out_dir"], model)}


PASS_KS, PASS_SAMPLES = (1, 8, 64), 64  # pass@k of what RL adds: n = 64 answers a problem, at RL's temperature


def pass_at_k_arms(config, env: MathEnvironment, out_dir: str, sft_model) -> dict:
    """Does RL raise pass@64, or only pass@1? {"pass_at_k": {arm: {k: {"sampled", "sampled_stderr", "exact"}}}}
    for the warm start, RL's last snapshot and the supervised baseline (sft_model), on the run's test set, at
    RL's temperature (rl/evaluate.py evaluate_set: sampled from PASS_SAMPLES answers a problem, and exact from
    one teacher-forced pass where the right answer is one token sequence, None with shown work); {} when the
    run's folder no longer holds its last snapshot."""
    steps = run_dir.snapshot_steps(out_dir) if os.path.isdir(out_dir) else []
    if not steps or not os.path.exists(run_dir.warm_start_path(out_dir)):
        return {}
    args = argparse.Namespace(batch_size=config.eval_batch_size, split="test", seed=config.seed, samples=PASS_SAMPLES,
                              temperature=config.rl_temperature, k=list(PASS_KS))
    a, b = env.eval_operands(config.num_eval, "test")
    out = {}
    for arm, weights in (("warm_start", run_dir.warm_start_path(out_dir)), ("rl", steps[-1][1]), ("sft", None)):
        model = sft_model if weights is None else model_from_snapshot(load_snapshot(weights))
        out[arm] = evaluate_set(model, env, a, b, args, "cpu")[0]["pass_at_k"]  # (in eval mode, whatever the model's)
    return {"pass_at_k": out, "pass_at_k_samples": PASS_SAMPLES}


def seconds_to(rs: list, target: float) -> str:
    """Median (min-max) wall seconds at which the runs' test accuracy first reached target; a target no
    run reached is 'never' (median_range's '-' would read as 'not measured')."""
    values = [first_reaching(r["curve"], target) for r in rs]
    return "never" if all(v is None for v in values) else median_range(values, "{:.0f}")


def sampler_table(rows: list) -> str:
    """Problem selection side by side: median (min-max) over seeds per config and sampler."""
    out = []
    for config, sampler in dict.fromkeys((r["config"], r["sampler"]) for r in rows):
        rs = [r for r in rows if r["config"] == config and r["sampler"] == sampler]
        col = lambda key, fmt="{:.3f}": median_range([r[key] for r in rs], fmt)
        out.append([config, sampler, len(rs), col("start_accuracy"), col("final_accuracy"),
                    *[seconds_to(rs, t) for t in TARGETS], col("wall_seconds", "{:.0f}"),
                    col("final_validation"), col("answers_per_step_last_quarter", "{:.0f}"),
                    col("trained_per_step_last_quarter", "{:.0f}"), col("mixed_share_last_quarter", "{:.2f}"),
                    col("step_seconds_last_quarter", "{:.2f}")])
    return markdown_table(["config", "sampler", "seeds", "RL starts (test)", "final (test)",
                           *[f"s to {t}" for t in TARGETS], "wall s", "final (validation)",
                           "answers/step, last quarter", "trained/step, last quarter",
                           "mixed groups (first round), last quarter", "s/step, last quarter"], out)


def group_label(r: dict) -> str:
    """What tells a table row's runs apart besides the config: sampler, overrides, processes."""
    parts = [*([r["sampler"]] if r["sampler"] != "default" else []), *r.get("set", []),
             *([f"{r['processes']} processes"] if r["processes"] > 1 else [])]
    return " ".join(parts) or "as shipped"


def groups(rows: list) -> list:
    """[(config, label, its rows)] in first-seen order: the runs a table row takes the median of."""
    keys = dict.fromkeys((r["config"], group_label(r)) for r in rows)
    return [(c, label, [r for r in rows if r["config"] == c and group_label(r) == label]) for c, label in keys]


def tables(rows: list) -> str:
    """End to end and, where measured, what RL adds: median (min-max) over seeds per config and label."""
    end_to_end = []
    for config, label, rs in groups(rows):
        col = lambda key, fmt="{:.3f}": median_range([r.get(key) for r in rs], fmt)
        end_to_end.append([config, label, len(rs), col("warm_start_validation"), col("start_accuracy"),
                           col("final_accuracy"), col("final_steps_accuracy"), *[seconds_to(rs, t) for t in END_TO_END_TARGETS],
                           col("warm_start_seconds", "{:.0f}"), col("rl_seconds", "{:.0f}"),
                           col("wall_seconds", "{:.0f}")])
    out = markdown_table(["config", "run", "seeds", "warm start (validation)", "RL starts (test)", "final (test)",
                          "steps all right", *[f"s to {t}" for t in END_TO_END_TARGETS], "warm start s", "RL s",
                          "wall s"], end_to_end)
    with_baseline = [r for r in rows if "sft_accuracy" in r]
    return out + ("\n\n" + adds_table(with_baseline) if with_baseline else "")


def adds_table(rows: list) -> str:
    """What RL adds: the warm start alone, + RL, and + supervised training for RL's seconds (test split)."""
    out = []
    pool_of = lambda rs: rs[0].get("resolved_config", {}).get("sft_worked_examples") or 0  # 0: every pair's work
    for config, label, rs in sorted(groups(rows), key=lambda g: (g[0], pool_of(g[2]))):  # by config, then pool
        col = lambda key, fmt="{:.3f}": median_range([r[key] for r in rs], fmt)
        pool = pool_of(rs) or "all"
        out.append([config, label, pool, len(rs), col("warm_start_steps", "{:.0f}"), col("start_accuracy"),
                    col("final_accuracy"), col("sft_accuracy"), col("rl_train_seconds", "{:.0f}"),
                    col("sft_steps", "{:.0f}")])
    return markdown_table(["config", "run", "worked examples", "seeds", "warm start steps", "warm start alone",
                           "warm start + RL",
                           "warm start + supervised, RL's seconds", "RL train s", "supervised steps"], out)


def adds_pass_table(rows: list) -> str:
    """What RL adds, in pass@k (test): per run with pass_at_k (benchmark --what_rl_adds), each arm's pass@k of
    PASS_KS, exact where the right answer is one token sequence, else sampled (+- its standard error)."""
    out = []
    for config, label, rs in groups(rows):
        for r in sorted(rs, key=lambda r: r["seed"]):
            for arm, name in (("warm_start", "warm start alone"), ("rl", "+ RL"),
                              ("sft", "+ supervised, RL's seconds")):
                cells = []
                for k in PASS_KS:
                    v = r["pass_at_k"][arm][str(k)]
                    cells.append(f"{v['exact']:.3f}" if v["exact"] is not None
                                 else f"{v['sampled']:.3f} +- {v['sampled_stderr']:.3f}")
                out.append([config, label, r["seed"], name, "exact" if v["exact"] is not None else "sampled", *cells])
    return markdown_table(["config", "run", "seed", "arm", "pass@k", *[f"pass@{k}" for k in PASS_KS]], out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["AdderRLConfig", "MultiplierRLConfig"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out_dir", default=os.path.join(launch.REPO, "out", "benchmark"))
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every run")
    parser.add_argument("--nproc", type=int, default=1, help="processes per run (torchrun when above 1)")
    parser.add_argument("--what_rl_adds", action="store_true", help="also supervised training for RL's seconds")
    parser.add_argument("--samplers", nargs="+", help="run each config with each problem_sampler (one warm start "
                        "per config and seed)")
    parser.add_argument("--rerun", action="store_true", help="run again what results/benchmark/ holds")
    parser.add_argument("--table", action="store_true", help="print the tables of every file in results/benchmark/, "
                        "running nothing")
    parser.add_argument("--add_fields", action="store_true", help="add the fields the summary has grown to each "
                        "file in results/benchmark/ whose run folder is still there, running nothing")
    parser.add_argument("--results", default="benchmark", help="the folder of results/ the files go to (gpu: runs "
                        "on a GPU, kept apart from the CPU's)")
    parser.add_argument("--perf", action="store_true", help="measure the RL step's speed instead (rl/tools/perf.py)")
    parser.add_argument("--compile", action="store_true", help="with --perf: also time torch.compile")
    args = parser.parse_args()
    if args.add_fields:
        for name, fields in add_fields():
            print(f"{name}: added {', '.join(fields)}")
        return
    if args.perf:
        from rl.tools import perf
        perf.main(args.configs, args.compile, args.rerun)
        return
    if not args.table:
        check_configs(args.configs, args.what_rl_adds)
        for name in args.configs:  # every run's command as the script reads it (seed and folder: any)
            for sampler in args.samplers or [None]:
                extra = sampler_args(sampler) if sampler else []
                launch.check_command(script_args(name, 0, args.out_dir, extra, args.set), args.nproc)
    rows = saved_results() if args.table else measure(args)
    print("\nmedian (min-max) over seeds; accuracies are greedy exact match of the final answer on the test split\n\n"
          + tables(rows))


def check_configs(names: list, what_rl_adds: bool):
    """Refuse in one line, before any run's minutes, what would fail after them: an unknown config, and
    --what_rl_adds on the task of many lengths (its supervised arm trains on one MathEnvironment; the lengths
    tool makes that comparison there, per length)."""
    for name in names:
        try:
            cls = get_config_class(name)
        except ConfigError as e:
            raise SystemExit(f"error: {e}") from None
        if what_rl_adds and cls.rl_ndigits:
            raise SystemExit(f"error: --what_rl_adds does not take {name}, a task of many lengths (rl_ndigits="
                             f"{cls.rl_ndigits!r}); python -m rl.tools.lengths --config {name} compares RL with "
                             f"supervised training there, per length")


def measure(args) -> list:
    """Each config x seed x sampler, seed-major so partial results cover every sampler; each result
    saved as it finishes, and read back instead of rerun (its supervised baseline added if asked)."""
    rows = []
    for name in args.configs:
        for seed in args.seeds:
            for sampler in args.samplers or [None]:
                folder = getattr(args, "results", "benchmark")
                path = results.path(folder, run_name(name, sampler, seed, args.nproc, args.set))
                if os.path.exists(path) and not args.rerun:
                    with open(path) as f:
                        row = json.load(f)
                else:
                    row = run_one(name, seed, args, sampler)
                    row["command"] = " ".join(["python -m rl.tools.benchmark --configs", name, "--seeds", str(seed),
                                               *(["--results", folder] if folder != "benchmark" else []),
                                               *(["--samplers", sampler] if sampler else []),
                                               *(["--nproc", str(args.nproc)] if args.nproc > 1 else []),
                                               *(["--set", *args.set] if args.set else [])])
                    row.update(results.machine())
                    results.save(row, path)
                if args.what_rl_adds and "sft_accuracy" not in row:
                    row.update(supervised_baseline(row, name, seed, args.set))
                    row["command"] += " --what_rl_adds"
                    results.save(row, path)
                rows.append(row)
                bulky = ("curve", "evals", "steps", "validation_curve", "validation_seconds_curve", "resolved_config",
                         "summary")
                print(json.dumps({k: v for k, v in row.items() if k not in bulky}), flush=True)
    return rows


def saved_results() -> list:
    """Every result file in results/benchmark/, in the order of docs/results.md's tables: config, sampler, seed."""
    order = ("default", "uniform", "prioritized", "replay")
    name = lambda r: r["sampler"].partition(":")[0]
    return sorted(results.load("benchmark"), key=lambda r: (r["config"], r.get("set", []), r["processes"],
                                                            order.index(name(r)) if name(r) in order else 9,
                                                            r["sampler"], r["seed"]))


if __name__ == "__main__":
    main()
