"""Past the training lengths: does RL carry addition further than supervised training at equal seconds?

    python -m rl.tools.lengths --seeds 0 1 2          # run (or read back) each seed, then the table
    python -m rl.tools.lengths --table                # the table and the plot from the saved files only
    python -m rl.tools.lengths --seeds 0 1 2 --warm_start_tries 2   # each seed from the better of two warm starts

One seed is one run of the config (LongAdderRLConfig: a warm start on sft_ndigits, 1-10 digits, then RL
on rl_ndigits, 1-20, for rl_train_steps), then three arms from that run's one warm start:

    none  the warm start itself
    rl    the run's last snapshot: RL with the final-answer reward
    sft   supervised training on rl_ndigits with the right answers, for as many seconds as RL's
          steps took (rl_train_seconds): teacher forcing as the warm start trains (one width a step,
          random position offsets, its batch and learning rate), 10 warmup steps, cosine to a tenth

Each arm is evaluated alike at every length of --ndigits, on the test split (reported) and on the
validation split (what a choice between settings may read): greedy accuracy, and the exact pass@k
of --k from one teacher-forced pass (rl/evaluate.py: the right sum is one token sequence, so
p(right) is exact and pass@k = 1 - (1 - p)^k has no sampling noise). The table gives, per arm and
length, the median (min-max) over seeds, and the longest length up to which an arm holds >= 0.99
and >= 0.5 at every evaluated length. Each seed is written to results/lengths/<config>-seed<S>.json
as it finishes; a seed whose file exists is read back, not run (and refused in one line if its run's
settings are not what the command gives today: a preset changed since). A seed stopped on the way (Ctrl-C, kill) and
run again continues its run from where it stopped, snapshot or warm start progress; the supervised arm
and the evaluations run again. A seed run again once finished (other RL settings, its file moved away)
reuses the warm start its folder out/lengths/<label>/ holds when every setting that makes it matches, and
says so in its summary (warm_start_cached, with the seconds it took when made).

How far a warm start reaches past its own lengths varies from seed to seed (docs/results.md), and RL follows it.
With --warm_start_tries K a seed's arms start from the first of at most K warm starts to reach
--warm_start_target, else the best of them: sft_seed = seed, seed + 1000, ... (rl/warm_start.py: the warm
start's own seed; RL's draws stay the seed's), each made once by a run with
rl_train_steps=0 in out/lengths/<label>.warm-starts/sft_seed<X>/ and judged by greedy accuracy on the validation
sums at RL's longest length (20 digits for the preset: a length RL trains on, never a test problem). The record
keeps each try's accuracy and seconds (warm_start_choice); a seed whose own warm start wins is its run without
tries, read back from that run's file when saved.
"""

import argparse
import dataclasses
import json
import os
import shutil
from typing import NamedTuple

import numpy as np
import torch

from configs.base import BaseRLConfig
from model.gpt import GPT, GPTConfig
from rl import run_dir, seeding
from rl.dist import DistInfo
from rl.evaluate import evaluate, exact_pass_at_k, p_right
from rl.long_env import environments, parse_range
from rl.rl_ddp import config_from_args
from rl.snapshot import load_snapshot
from rl.tools import launch, results
from rl.tools.benchmark import supervised_for_seconds
from rl.tools.report import markdown_table, median_range
from rl.warm_start import cached_start, start_path, teacher_forced_step

ARMS = ("none", "sft", "rl")
ARM_NAMES = {"none": "warm start only", "sft": "+ supervised", "rl": "+ RL"}
LENGTHS = (5, 10, 15, 20, 30, 40, 60, 80, 100)
THRESHOLDS = (0.99, 0.5)
TRY_STRIDE = 1000  # a seed's k-th warm start try is sft_seed = seed + 1000 k: seeds below 1000 never share a try


class Tries(NamedTuple):
    """A choice of warm starts (choose_warm_start): at most k, stopping at the first that reaches target."""
    k: int = 1
    target: float = 1.0

    def key(self) -> dict:
        """What a record's key adds (nothing without a choice; the target only when it stops the tries)."""
        return {} if self.k == 1 else {"warm_start_tries": self.k,
                                       **({"warm_start_target": self.target} if self.target < 1 else {})}

    def part(self) -> list:
        """What a seed's file name adds."""
        return [f"{name}={value}" for name, value in self.key().items()]

    def flags(self) -> str:
        """What the command line adds."""
        return "".join(f" --{name} {value}" for name, value in self.key().items())

    @classmethod
    def of(cls, key: dict) -> "Tries":
        return cls(key.get("warm_start_tries", 1), key.get("warm_start_target", 1.0))


def supervised_arm(model, config, env, seconds: float, seed: int) -> dict:
    """Supervised training of model (the warm start's weights) on env's lengths for `seconds`, as the
    benchmark's matched-compute baseline trains (supervised_for_seconds); returns its steps and seconds."""
    def step(i: int, optimizer):
        # as the warm start's steps, on streams of their own (seed + 1), so no problem repeats one of RL's draws
        seeding.set_step_width(env, seed + 1, i, seeding.SFT_WIDTHS)
        a, b = env.sample_operands(config.sft_batch_size, seeding.numpy_rng(seed + 1, 0, i, seeding.SFT_PROBLEMS))
        teacher_forced_step(model, env, optimizer, a, b, "cpu", grad_clip=config.grad_clip,
                            rng=seeding.numpy_rng(seed + 1, 0, i, seeding.POSITIONS))
    steps, spent = supervised_for_seconds(model, config, seconds, step)
    model.eval()
    return {"sft_steps": steps, "sft_seconds": round(spent, 1)}


def evaluate_arm(model, envs: dict, num: int, ks: list, temperature: float) -> dict:
    """{split: {length: {"greedy", "pass@k" exact..., "digit_errors", "end_errors"}}} on the fixed sets of test
    and validation (digit_errors: the share of answers wrong at each column, least significant first; end_errors:
    the share not ended where they should be)."""
    out = {}
    for split in ("test", "validation"):
        out[split] = {}
        for length, env in envs.items():
            a, b = env.eval_operands(num, split)
            greedy = evaluate(model, env, a, b, DistInfo(), batch_size=250, num_mistakes=0, split=split)
            p = p_right(model, env, a, b, temperature=temperature, batch_size=250)
            out[split][str(length)] = {"greedy": greedy.accuracy, "mean_p_right": p.mean().item(),
                                       **{f"pass@{k}": exact_pass_at_k(p, k).mean().item() for k in ks},
                                       "digit_errors": [round(x, 4) for x in greedy.digit_errors],
                                       "end_errors": greedy.end_errors}
    return out


def fresh_folder_but_the_warm_start(out: str):
    """Empty out (a run's folder) but for its cached warm start (and its padded phase), which the run reuses only
    when every setting that determines it matches (rl/warm_start.py) and retrains otherwise; the run's summary
    then says warm_start_cached, with the seconds it took when made. A seed rerun with other RL settings skips
    its minutes."""
    cached = [(path, out.rstrip(os.sep) + "." + os.path.basename(path))  # (kept beside the folder)
              for path in (run_dir.warm_start_path(out), run_dir.padded_path(out))]
    for path, kept in cached:
        if os.path.isfile(path):
            os.replace(path, kept)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for path, kept in cached:
        if os.path.isfile(kept):
            os.replace(kept, path)


def start_or_continue(out: str) -> str:
    """The run's --resume: a run that did not finish (no summary.json: stopped, or killed) continues from where
    it stopped, its snapshot or its warm start's progress ("auto"); a finished one, whose results file was moved
    away, runs again in a fresh folder but for its cached warm start ("never"), as does a seed never run."""
    if os.path.isdir(out) and not os.path.exists(run_dir.summary_path(out)):
        return "auto"
    fresh_folder_but_the_warm_start(out)
    return "never"


def rl_train_seconds(out: str) -> float:
    """The seconds of the run's RL steps, from its metrics: those of a run continued after a stop included (the
    summary counts only its last invocation's), each step once (a continued run redoes the steps after its
    snapshot, and their first lines are set aside: rl/run_dir.py). Equal to the summary's for a run never stopped."""
    return sum(r["perf/step_seconds"] for r in run_dir.read_metrics(out) if "perf/step_seconds" in r)


def try_accuracy(config, num: int) -> float:
    """Greedy accuracy of the file RL would start from (start_path) on the first `num` validation sums at RL's
    longest length: how a warm start try is judged (choose_warm_start)."""
    length = parse_range("rl_ndigits", config.rl_ndigits)[1]
    env = environments(config.task_args(), [length])["eval"][length]
    model = GPT(GPTConfig(**config.model_args()))
    model.load_state_dict(load_snapshot(start_path(config))["model"])
    a, b = env.eval_operands(num, "validation")
    return evaluate(model, env, a, b, DistInfo(), batch_size=250, num_mistakes=0, split="validation").accuracy


def choose_warm_start(config_name: str, seed: int, overrides: list, out: str, tries: Tries, num: int) -> dict:
    """The best of tries.k warm starts, sft_seed = seed, seed + TRY_STRIDE, ... (rl/warm_start.py), by greedy
    accuracy on validation sums at RL's longest length (try_accuracy; the first tried wins a tie), the tries
    stopping at the first that reaches tries.target. Each is made by a run with rl_train_steps=0 in a folder of its
    own, out + ".warm-starts/sft_seed<X>", reused once done (and continued if stopped). Returns {"sft_seed": the
    chosen, "length", "num", "accuracy": {X: ...}, "seconds": {X: the seconds it took when made}}: a choice that
    reads validation only, and RL's lengths only."""
    base = [f"--{kv}" for kv in overrides if not kv.startswith("rl_train_steps=")]  # (no RL step runs here)
    accuracy, seconds = {}, {}
    for k in range(tries.k):
        x = seed + TRY_STRIDE * k
        folder = try_folder(out, x)
        args = ["--config_name", config_name, f"--seed={seed}", "--no_wandb", f"--out_dir={folder}", *base,
                f"--sft_seed={x}", "--rl_train_steps=0"]
        if not os.path.exists(run_dir.summary_path(folder)):
            launch.run([*args, f"--resume={start_or_continue(folder)}"], log_path=run_dir.log_path(folder))
        config = config_from_args(args)
        accuracy[str(x)] = try_accuracy(config, num)
        seconds[str(x)] = round(run_dir.read_summary(folder)["warm_start_seconds"], 1)
        print(json.dumps({"seed": seed, "warm_start_try": x, "validation_accuracy": accuracy[str(x)]}))
        if accuracy[str(x)] >= tries.target:
            break
    best = max(accuracy, key=accuracy.get)  # (max keeps the first of equal values: the earliest try)
    return {"sft_seed": int(best), "length": parse_range("rl_ndigits", config.rl_ndigits)[1], "num": num,
            "accuracy": accuracy, "seconds": seconds}


def try_folder(out: str, sft_seed: int) -> str:
    """The folder of the warm start try sft_seed of the seed whose run's folder is out."""
    return os.path.join(out + ".warm-starts", f"sft_seed{sft_seed}")


def take_warm_start(chosen: str, out: str):
    """Copy the chosen try's warm start files (the padded phase's too) into the run's folder out, each whole or
    not at all, in place of whatever warm start out held."""
    for path in (run_dir.warm_start_path(chosen), run_dir.padded_path(chosen)):
        if os.path.isfile(path):
            target = os.path.join(out, os.path.basename(path))
            shutil.copyfile(path, target + ".tmp")
            os.replace(target + ".tmp", target)


def run_seed(config_name: str, seed: int, overrides: list, lengths: list, num: int, ks: list,
             tries: Tries = None) -> dict:
    """One seed: read back from results/lengths/ when its file exists, else run, evaluated and saved. With
    tries.k > 1, RL and the arms start from the best of the warm starts tried (choose_warm_start); where the seed's
    own warm start is the best, they are those of its saved run without tries, when there is one (the same run)."""
    tries = tries or Tries()
    label = seed_label(config_name, overrides + tries.part(), seed)
    file = results.path("lengths", label)
    if os.path.exists(file):
        with open(file) as f:
            return checked(json.load(f), file)
    out = os.path.join("out", "lengths", label)
    choice = choose_warm_start(config_name, seed, overrides, out, tries, num) if tries.k > 1 else None
    if choice and (rec := plain_run(config_name, seed, overrides, tries, choice)):
        results.save(rec, file)
        return rec
    resume = start_or_continue(out)
    if choice and resume == "never":  # (a stopped run continues with the warm start it had: the same choice)
        take_warm_start(try_folder(out, choice["sft_seed"]), out)
    args = ["--config_name", config_name, f"--seed={seed}", "--no_wandb", f"--resume={resume}",
            f"--out_dir={out}", *[f"--{kv}" for kv in overrides],
            *([f"--sft_seed={choice['sft_seed']}"] if choice else [])]
    launch.run(args, log_path=run_dir.log_path(out))
    summary, rl_seconds = run_dir.read_summary(out), rl_train_seconds(out)
    config = config_from_args(args)
    if "warm_start_steps" not in summary:  # a continued run's summary: its last invocation, which loaded a snapshot
        summary = {**summary, **cached_start(config, world_size=1)}
    envs = environments(config.task_args(), lengths)
    model = GPT(GPTConfig(**config.model_args()))
    warm = load_snapshot(start_path(config))["model"]  # (the padded phase's, with sft_pad_ndigits)
    rl_steps, last_path = run_dir.snapshot_steps(out)[-1]
    last = load_snapshot(last_path)["model"]
    arms, extra = {}, {}
    for arm in ARMS:
        model.load_state_dict(last if arm == "rl" else warm)
        if arm == "sft":
            extra = supervised_arm(model, config, envs["rl"], rl_seconds, seed)
        model.eval()
        arms[arm] = evaluate_arm(model, envs["eval"], num, ks, config.rl_temperature)
        print(json.dumps({"seed": seed, "arm": arm, "test_greedy": {L: round(v["greedy"], 3)
                                                                    for L, v in arms[arm]["test"].items()}}))
    rec = {"tool": "lengths", **results.machine(),
           "command": f"python -m rl.tools.lengths --config {config_name} --seeds {seed}"
                      f"{' --set ' + ' '.join(overrides) if overrides else ''}"
                      f"{tries.flags()}",
           "key": {"config": config_name, "seed": seed, "overrides": overrides, **tries.key()}, "lengths": lengths,
           "ks": ks, "num_problems": num, "config": run_dir.read_config(out), "summary": summary, **extra,
           **({"warm_start_choice": choice} if choice else {}),
           "rl_train_seconds": round(rl_seconds, 1), "rl_steps": rl_steps, "arms": arms,
           "rl_curve": [(r["step"], r.get("val/accuracy"), {k[len("val/accuracy_len"):]: v for k, v in r.items()
                                                              if k.startswith("val/accuracy_len")})
                        for r in run_dir.read_metrics(out) if "val/accuracy" in r]}
    results.save(rec, file)
    return rec


def plain_run(config_name: str, seed: int, overrides: list, tries: Tries, choice: dict):
    """The record of a seed whose own warm start was chosen (sft_seed = seed): its saved run without tries, the
    same warm start file and RL draws, with the choice added; None where another try won or none is saved."""
    plain = results.path("lengths", seed_label(config_name, overrides, seed))
    if choice["sft_seed"] != seed or not os.path.exists(plain):
        return None
    with open(plain) as f:
        rec = json.load(f)
    return {**rec, "key": {**rec["key"], **tries.key()}, "command": rec["command"] + tries.flags(),
            "warm_start_choice": choice, "arms_from": os.path.relpath(plain, results.ROOT)}


def seed_label(config_name: str, named: list, seed: int) -> str:
    """A seed's file and folder name: the config, what --set changes (and warm start tries), the seed."""
    return results.fit_name("-".join([config_name, *(["+".join(named)] if named else [])]), f"-seed{seed}")


def saved(config: str = "LongAdderRLConfig", overrides: list = (), seeds=None, tries: Tries = Tries()) -> list:
    """The saved records of config with these overrides (the preset as it ships: none) and choice of warm
    starts, by seed; each checked against the settings they name today (checked)."""
    recs = [r for r in results.load("lengths") if r["key"]["config"] == config
            and r["key"]["overrides"] == list(overrides) and Tries.of(r["key"]) == tries
            and (seeds is None or r["key"]["seed"] in seeds)]
    return [checked(r, f"the record of {seed_label(config, [*overrides, *tries.part()], r['key']['seed'])}")
            for r in sorted(recs, key=lambda r: r["key"]["seed"])]


def stale_settings(rec: dict) -> list:
    """The settings in which a record's run differs from what its key (config, seed, overrides) runs today:
    ["name=then (now ...)"], empty when none differ, as when a preset changed a default after the record was
    made. A setting the record predates counts as BaseRLConfig's default: a new setting's default keeps the
    behaviour from before it. (A record without its settings, as tests make, is not checked.)"""
    if "config" not in rec:
        return []
    key = rec["key"]
    now = config_from_args(["--config_name", key["config"], f"--seed={key['seed']}",
                            *[f"--{kv}" for kv in key["overrides"]]]).to_dict()
    base = {f.name: f.default for f in dataclasses.fields(BaseRLConfig)}
    then = lambda name: rec["config"].get(name, base.get(name))
    # where the run wrote its files, and the warm start's seed where tries chose it (in the key)
    unchecked = ("out_dir", *(["sft_seed"] if Tries.of(key).k > 1 else []))
    return [f"{name}={then(name)!r} (now {value!r})" for name, value in now.items()
            if name not in unchecked and then(name) != value]


def checked(rec: dict, what: str) -> dict:
    """rec, unless its run's settings differ from what its key runs today (stale_settings): then a one-line stop
    saying which, so no table or rerun passes a run of other settings off as these."""
    stale = stale_settings(rec)
    if stale:
        raise SystemExit(f"error: {what} was made with other settings than its command gives today: "
                         f"{', '.join(stale)}; move it away to run these settings, or name those values in its "
                         f"key and its file's name to keep it (results/lengths/README.md)")
    return rec


def provenance(recs: list) -> str:
    """One line: the command, the machine, and each seed's seconds."""
    r = recs[0]
    padded = lambda x: (f" ({x['summary']['warm_start_steps']} steps, {x['summary']['warm_start_padded_steps']} of "
                        f"them padded)" if "warm_start_padded_steps" in x["summary"] else "")
    steps = lambda x: x.get("rl_steps", x["summary"]["rl_steps_run"])  # (files before rl_steps: a run never stopped)
    seconds = ", ".join(f"seed {x['key']['seed']}: warm start {x['summary']['warm_start_seconds']:.0f} s{padded(x)}, "
                        f"RL {x['rl_train_seconds']:.0f} s ({steps(x)} steps), supervised "
                        f"{x['sft_seconds']:.0f} s ({x['sft_steps']} steps)" for x in recs)
    overrides = " --set " + " ".join(r["key"]["overrides"]) if r["key"]["overrides"] else ""
    tries = Tries.of(r["key"])
    return (f"`python -m rl.tools.lengths --seeds {' '.join(str(x['key']['seed']) for x in recs)}{overrides}"
            f"{tries.flags()}` on {machines(recs)} ({r['cores']} cores, "
            f"{r['threads']} threads, torch {r['torch']}); {r['num_problems']} test problems a length, greedy; "
            f"{seconds}.{''.join(choice_line(x) for x in recs if 'warm_start_choice' in x)}")


def machines(recs: list) -> str:
    """The CPU the seeds ran on, or, where they ran on more than one, each with its seeds."""
    cpus = list(dict.fromkeys(x["cpu"] for x in recs))
    seeds = lambda cpu: [str(x["key"]["seed"]) for x in recs if x["cpu"] == cpu]
    if len(cpus) == 1:
        return cpus[0]
    return ", ".join(f"{cpu} for seed{'s' * (len(seeds(cpu)) > 1)} {' and '.join(seeds(cpu))}" for cpu in cpus)


def choice_line(rec: dict) -> str:
    """One sentence: which warm start a seed's arms start from, what each try scored on validation, and the
    seconds they took in all."""
    c, target = rec["warm_start_choice"], Tries.of(rec["key"]).target
    scores = ", ".join(f"sft_seed {x}: {a:.3f} ({c['seconds'][x]:.0f} s)" for x, a in c["accuracy"].items())
    which = (f"the first of its warm starts to reach {target:g}" if c["accuracy"][str(c["sft_seed"])] >= target
             else f"the best of the {len(c['accuracy'])} tried, none at {target:g}")
    return (f" Seed {rec['key']['seed']} starts from sft_seed {c['sft_seed']}, {which} on {c['num']} validation sums "
            f"of {c['length']} digits ({scores}; {sum(c['seconds'].values()):.0f} s of warm starts in all).")


def longest_holding(by_length: dict, threshold: float):
    """The longest evaluated length up to which every evaluated length is >= threshold (None: not even the shortest)."""
    best = None
    for length in sorted(by_length, key=int):
        if by_length[length] < threshold:
            break
        best = int(length)
    return best


def greedy_table(recs: list, split: str = "test") -> str:
    """Markdown: per arm, greedy accuracy at each length (median (min-max) over seeds), and the longest
    length up to which it holds >= 0.99 and >= 0.5 (0: not even the shortest)."""
    lengths, rows = recs[0]["lengths"], []
    for arm in ARMS:
        by_seed = [{str(L): r["arms"][arm][split][str(L)]["greedy"] for L in lengths} for r in recs]
        holds = [median_range([longest_holding(s, t) or 0 for s in by_seed], "{:.0f}") for t in THRESHOLDS]
        rows.append([ARM_NAMES[arm], *[median_range([s[str(L)] for s in by_seed], "{:.2f}") for L in lengths], *holds])
    return markdown_table(["arm", *[f"{L}" for L in lengths], *[f"holds >= {t}" for t in THRESHOLDS]], rows)


def pass_table(recs: list, split: str = "test") -> str:
    """Markdown: per arm and length, the exact pass@k of each k (median (min-max) over seeds)."""
    ks, rows = recs[0]["ks"], []
    for arm in ARMS:
        for L in recs[0]["lengths"]:
            rows.append([ARM_NAMES[arm], L, *[median_range([r["arms"][arm][split][str(L)][f"pass@{k}"] for r in recs])
                                              for k in ks]])
    return markdown_table(["arm", "digits", *[f"exact pass@{k}" for k in ks]], rows)


def table(recs: list, split: str = "test") -> str:
    return greedy_table(recs, split) + "\n\n" + pass_table(recs, split)


def plot(recs: list, path: str, split: str = "test"):
    """Greedy accuracy and exact pass@(largest k) against length, median over seeds, one line per arm."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    lengths, k = recs[0]["lengths"], max(recs[0]["ks"])
    sft_hi, rl_hi = (parse_range(name, recs[0]["config"][name])[1] for name in ("sft_ndigits", "rl_ndigits"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, metric in zip(axes, ("greedy", f"pass@{k}")):
        for arm in ARMS:
            ax.plot(lengths, [float(np.median([r["arms"][arm][split][str(L)][metric] for r in recs])) for L in lengths],
                    marker="o", label=ARM_NAMES[arm])
        ax.set_xlabel("operand digits")
        seeds = f"median of {len(recs)} seeds" if len(recs) > 1 else "1 seed"
        ax.set_title(f"{'greedy accuracy' if metric == 'greedy' else 'exact ' + metric} ({split}, {seeds})")
        ax.axvspan(0, sft_hi, color="0.85", label="warm start's lengths", zorder=0)
        ax.axvspan(sft_hi, rl_hi, color="0.94", label="RL's and supervised lengths", zorder=0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="LongAdderRLConfig")
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="default: 0 (with --table: every saved seed)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every seed")
    parser.add_argument("--ndigits", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--num", type=int, default=200, help="problems per length and split")
    parser.add_argument("--k", nargs="+", type=int, default=[1, 8, 64])
    parser.add_argument("--table", action="store_true", help="only the table and plot of the saved files")
    parser.add_argument("--split", default="test", choices=("test", "validation"))
    parser.add_argument("--warm_start_tries", type=int, default=1, help="RL and the arms start from the best of at "
                        "most this many warm starts (sft_seed = seed, seed + 1000, ...), judged on validation sums at "
                        "RL's longest length")
    parser.add_argument("--warm_start_target", type=float, default=1.0, help="with --warm_start_tries: stop trying "
                        "at the first warm start this accurate there")
    args = parser.parse_args()
    if not 1 <= args.warm_start_tries <= TRY_STRIDE:
        parser.error(f"--warm_start_tries must be 1 to {TRY_STRIDE}, got {args.warm_start_tries}")
    if not 0 < args.warm_start_target <= 1:
        parser.error(f"--warm_start_target must be in (0, 1], got {args.warm_start_target}")
    for name, values in (("--ndigits", args.ndigits), ("--k", args.k), ("--num", [args.num])):
        if min(values) < 1:  # (found only after a seed's training otherwise)
            parser.error(f"{name} takes positive integers, got {min(values)}")
    tries = Tries(args.warm_start_tries, args.warm_start_target)
    if args.warm_start_tries > 1 and any(kv.startswith("sft_seed=") for kv in args.set):
        parser.error("--warm_start_tries chooses sft_seed itself; leave sft_seed out of --set")
    torch.set_num_threads(torch.get_num_threads())
    if args.table:
        recs = saved(args.config, args.set, args.seeds, tries)
    else:
        launch.check_command(["--config_name", args.config, "--no_wandb", *[f"--{kv}" for kv in args.set]])
        recs = [run_seed(args.config, s, args.set, sorted(args.ndigits), args.num, sorted(set(args.k)),
                         tries) for s in args.seeds or [0]]
    if not recs:
        raise SystemExit(f"error: no results/lengths/ file for {args.config} with seeds {args.seeds}; "
                         f"run without --table")
    print(table(recs, args.split) + "\n\n" + provenance(recs))
    named = args.set + tries.part()
    path = os.path.join(results.ROOT, "lengths",
                        results.fit_name(f"{args.config}{'-' + '+'.join(named) if named else ''}", f"-{args.split}.png"))
    plot(recs, path, args.split)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
