"""Results as data: one JSON file per measured run under results/<tool>/, and reading them back.

    rec = record(out_dir, tool="compare", command="python -m rl.tools.compare ...", key={...})
    save(rec, path)            # results/compare/AdderRLConfig-grpo-seed0.json
    rows = load("compare")     # every file of one tool, for tables and plots

A record holds what it takes to check or redraw a number without the run folder (which is not
committed): the tool's command for this one run, the commit-independent settings that name it
(`key`: config, seed, algorithm, overrides...), the resolved config, the commit and machine it ran
on, the evaluation curve, one compact row per RL step and the run's summary.json. A tool reruns a
run only when no file holds its key, so a long measurement continues after an interruption; the
commit is recorded, not part of the key, so results survive commits that do not change behaviour.
"""

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess

import torch

from rl import run_dir
from rl.tools import launch

ROOT = os.path.join(launch.REPO, "results")


def machine() -> dict:
    """Where a result was measured: CPU model, cores, memory, threads, torch version and the commit."""
    cpu, memory = platform.processor(), None
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    if os.path.exists("/proc/meminfo"):
        with open("/proc/meminfo") as f:  # "MemTotal:  24589600 kB"
            memory = next((round(int(line.split()[1]) / 2 ** 20, 1) for line in f if line.startswith("MemTotal")), None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=launch.REPO, capture_output=True,
                            text=True).stdout.strip()
    threads = int(os.environ.get("OMP_NUM_THREADS", 0)) or torch.get_num_threads()
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": memory, "threads": threads, "torch": torch.__version__,
            "commit": commit, **gpu()}


def gpu() -> dict:
    """The GPU a result was measured on (name, driver, CUDA, memory); {} without CUDA."""
    if not torch.cuda.is_available():
        return {}
    props = torch.cuda.get_device_properties(0)
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines() if shutil.which("nvidia-smi") else []
    return {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2 ** 30, 1),
            "driver": driver[0] if driver else None, "cuda": torch.version.cuda}


def gpu_folder() -> str:
    """The results folder of this machine's GPU, "gpu/<its name>" (gpu/NVIDIA-H200): seconds compare only on one
    card, and a run read back instead of rerun must have run on this one."""
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no-GPU"
    return "gpu/" + re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def curve_and_steps(rows: list) -> tuple:
    """From metrics.jsonl rows: the evaluation curve [{step, seconds, answers, test, validation}], where
    seconds are RL step seconds summed so far (evaluations excluded, so runs that evaluate at different
    intervals compare) and answers the answers generated so far (refill rounds included); and one row
    per RL step [step, answers generated, answers trained on, seconds]."""
    seconds = answers = 0.0
    curve, steps = [], []
    for r in rows:
        if "train/answers_generated" in r:
            seconds += r["perf/step_seconds"]
            answers += r["train/answers_generated"]
            steps.append([r["step"], r["train/answers_generated"], r["train/batch_answers"],
                          round(r["perf/step_seconds"], 3)])
        if "eval/accuracy" in r:
            curve.append({"step": r["step"], "seconds": round(seconds, 1), "answers": answers,
                          "test": r["eval/accuracy"], "validation": r.get("val/accuracy")})
    return curve, steps


def record(out_dir: str, *, tool: str, command: str, key: dict, **extra) -> dict:
    """The record of the finished run in out_dir."""
    curve, steps = curve_and_steps(run_dir.read_metrics(out_dir))
    return {"tool": tool, "command": command, "key": key, **machine(), **extra,
            "config": run_dir.read_config(out_dir), "curve": curve, "steps": steps,
            "summary": run_dir.read_summary(out_dir)}


MAX_NAME = 246  # a file name holds at most 255 bytes: a record's name, ".json" and save's ".tmp"


def fit_name(head: str, tail: str) -> str:
    """head + tail as a file name; where that is too long, the end of head becomes a digest of the whole name, so
    two names still differ and tail (the seed) stays readable (the record inside holds every setting)."""
    name = head + tail
    if len(name) <= MAX_NAME:
        return name
    return f"{head[:MAX_NAME - len(tail) - 11]}~{hashlib.sha1(name.encode()).hexdigest()[:10]}{tail}"


def path(tool: str, name: str) -> str:
    return os.path.join(ROOT, tool, name + ".json")


def save(rec: dict, file: str):
    os.makedirs(os.path.dirname(file), exist_ok=True)
    with open(file + ".tmp", "w") as f:  # a crash mid-write leaves the old file, never half a record
        json.dump(rec, f, indent=1)
    os.replace(file + ".tmp", file)


def load_tree(tool: str) -> list:
    """Every record of one tool and of its subfolders (results/gpu/<GPU>/), folder by folder."""
    folder = os.path.join(ROOT, tool)
    subs = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))) if os.path.isdir(folder) else []
    return load(tool) + [r for d in subs for r in load_tree(f"{tool}/{d}")]


def load(tool: str) -> list:
    """Every record of one tool, in file-name order."""
    folder = os.path.join(ROOT, tool)
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json")) if os.path.isdir(folder) else []
    out = []
    for name in names:
        with open(os.path.join(folder, name)) as f:
            out.append(json.load(f))
    return out
