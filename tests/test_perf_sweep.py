"""The device sweep of rl/tools/perf.py (python -m rl.tools.perf --device cuda), run tiny on the CPU: every
measurement's row, the whole steps' shares, no CUDA-graph row off CUDA, and the one-line refusal of
--device cuda where there is no CUDA.
Run: python -m pytest tests/test_perf_sweep.py"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rl.graphs import CapturedSteps
from rl.tools import perf
from rl.tools.perf import MAX_WARMUP_STEPS, NO_CUDA, Sweep, sweep_main, sweep_steps

SHARES = ("rollout", "reward", "update", "other")

REPO = Path(__file__).resolve().parents[1]
KINDS = {"sweep_sampling": "seconds", "sweep_update": "seconds", "sweep_forward_backward": "seconds",
         "sweep_step": "step_seconds"}


def test_cpu_sweep_records_every_measurement(tmp_path, capsys, monkeypatch):
    out = tmp_path / "perf-sweep.json"
    # a model of one narrow layer: each row's code path is the same, and bf16 matmuls, slow on a CPU without bf16
    # instructions, no longer take most of the test's time (17 of 24 s at the preset's 4 layers x 256 on an EPYC)
    monkeypatch.setattr(perf, "PERF_OVERRIDES", {**perf.PERF_OVERRIDES, "n_layer": 1, "n_embed": 32, "n_head": 2})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two threads on a busy two-core machine wait on each other for seconds
    try:
        assert sweep_main(["--device", "cpu", "--sizes", "2", "--reps", "1", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    rec = json.loads(out.read_text())
    assert rec["tool"] == "perf-sweep" and rec["device"] == "cpu"
    assert rec["command"].startswith("python -m rl.tools.perf --device cpu")
    assert "commit" in rec and "torch" in rec  # results.machine()
    rows = rec["rows"]
    assert {r["metric"] for r in rows} == set(KINDS)
    for r in rows:
        assert r["status"] == "ok" and r["prompts"] == 2 and r["device"] == "cpu"
        assert math.isfinite(r[KINDS[r["metric"]]]) and r[KINDS[r["metric"]]] > 0, r
    # both precisions of each kind, and the two whole-step settings (auto, fp32)
    plain = [r for r in rows if not r.get("matmul_attention") and not r.get("prefix_sharing")]
    for kind in ("sweep_sampling", "sweep_update", "sweep_forward_backward"):
        assert sorted(r["precision"] for r in plain if r["metric"] == kind) == ["bf16", "fp32"]
    # and sampling, the update (bf16) and a whole step (auto) with attention in plain matmuls
    matmul = [(r["metric"], r["precision"]) for r in rows if r.get("matmul_attention")]
    assert sorted(matmul) == [("sweep_sampling", "bf16"), ("sweep_step", "auto"), ("sweep_update", "bf16")]
    # and sampling and the update (fp32, the CPU's fastest) and a whole step (auto) reading each prompt once for its
    # answers
    shared = [(r["metric"], r["precision"]) for r in rows if r.get("prefix_sharing")]
    assert sorted(shared) == [("sweep_sampling", "fp32"), ("sweep_step", "auto"), ("sweep_update", "fp32")]
    steps = [r for r in rows if r["metric"] == "sweep_step"]
    assert sorted(r["precision"] for r in steps) == ["auto", "auto", "auto", "fp32"]
    for r in steps:
        shares = [r[f"{k}_share"] for k in ("rollout", "reward", "update", "other")]
        assert all(0.0 <= x <= 1.0 for x in shares) and abs(sum(shares) - 1.0) < 1e-6, r
        assert r["answers_per_second"] > 0
    assert not any(r.get("graphs") for r in rows)  # CUDA graphs are CUDA-only
    assert all(r["warmup_steps"] == 1 and r["captures_timed"] == 0 and r["warmup_seconds"] > 0 for r in steps)
    assert all(r["first_call_seconds"] > 0 for r in rows if r["metric"] == "sweep_update")  # (compiling, if asked)
    printed = capsys.readouterr().out
    assert printed.count('"metric": "sweep_') == len(rows) and "| prompts |" in printed


def test_cuda_without_cuda_is_one_line_and_exit_2():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no CUDA here, whatever the machine has
    proc = subprocess.run([sys.executable, "-m", "rl.tools.perf", "--device", "cuda"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr == NO_CUDA + "\n"
    assert NO_CUDA == "error: --device cuda but CUDA is not available here; use --device cpu"


def test_each_gpu_keeps_its_results_in_its_own_folder(tmp_path, monkeypatch):
    """Seconds compare only on one card: rl/tools/gpu.py and the sweep write to results/gpu/<GPU>/, and the
    tables read every card's folder."""
    from rl.tools import results
    monkeypatch.setattr(results, "ROOT", str(tmp_path))
    for folder, value in (("gpu/NVIDIA-H200", 1), ("gpu", 2), ("gpu/NVIDIA-H100-80GB-HBM3", 3)):
        results.save({"value": value}, results.path(folder, "run"))
    assert [r["value"] for r in results.load_tree("gpu")] == [2, 3, 1]  # the top folder, then each card's
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: "NVIDIA H100 80GB HBM3")
    assert results.gpu_folder() == "gpu/NVIDIA-H100-80GB-HBM3"


def test_the_gpu_table_never_pools_two_cards():
    from rl.tools.gpu import table
    run = lambda gpu, seed, acc: {"config": "AdderRLConfig", "set": ["rl_ga_steps=1"], "seed": seed, "gpu": gpu,
                                  "final_accuracy": acc, "curve": [(3.0, 0.5), (9.0, 0.995)], "wall_seconds": 10.0,
                                  "warm_start_seconds": 2.0}
    lines = table([run("NVIDIA H200", 0, 0.99), run("NVIDIA H100 80GB HBM3", 0, 1.0), run("NVIDIA H100 80GB HBM3", 1, 0.998)]
                  ).splitlines()[2:]
    assert len(lines) == 2
    assert "| 2 | 0.999 (0.998-1.000) | 9.0 (9.0-9.0) (>= 0.99)" in next(l for l in lines if "H100" in l)
    assert "| 1 | 0.990 |" in next(l for l in lines if "H200" in l)


def test_the_gpu_table_names_a_gpu_presets_runs_by_it():
    """`python -m rl.tools.gpu --table` names runs as the README does: those with exactly a GPU preset's settings
    by the preset, any others by their CPU preset and --set."""
    from rl.tools.gpu import table
    ran = ["rl_ga_steps=1", "eval_interval=5", "eval_batch_size=1000", "rl_train_steps=400", "rl_target_accuracy=0.99",
           "matmul_attention=true", "sft_target_accuracy=0.95"]  # Multiplier3GPUConfig's (configs/gpu.py)
    run = lambda overrides: {"config": "Multiplier3RLConfig", "set": overrides, "seed": 0, "gpu": "NVIDIA H200",
                             "final_accuracy": 0.99, "curve": [(3.0, 0.5), (9.0, 0.995)], "wall_seconds": 10.0,
                             "warm_start_seconds": 2.0}
    lines = table([run(ran), run(ran[:-1]), run([])]).splitlines()[2:]
    assert [l.split(" | ")[:2] for l in lines] == [["| Multiplier3RLConfig", "(preset)"],  # (sorted by --set)
                                                   ["| Multiplier3RLConfig", " ".join(ran[:-1])],
                                                   ["| Multiplier3GPUConfig", "(preset)"]]


def test_the_gpu_choice_ranks_by_the_first_time_validation_reaches_any_aim():
    """3-digit multiplication aims at 0.98, which is not one of the benchmark's thresholds: the choice reads the
    validation curve itself (sooner first, then the never-reaching by final validation)."""
    from rl.tools.gpu import rank
    later = {"validation_seconds_curve": [(10.0, 0.9), (27.7, 0.982), (36.2, 0.992)], "final_validation": 0.992}
    sooner = {"validation_seconds_curve": [(10.0, 0.9), (25.1, 0.98), (30.5, 0.99)], "final_validation": 0.99}
    never = {"validation_seconds_curve": [(10.0, 0.9), (33.6, 0.977)], "final_validation": 0.977}
    legacy = {"seconds_to_validation_0.99": 19.7, "final_validation": 0.996}  # written before the curve was kept
    assert sorted([never, later, sooner], key=lambda r: rank(r, 0.98)) == [sooner, later, never]
    assert rank(later, 0.98) == (False, 27.7, -0.992) and rank(never, 0.98) == (True, 0.0, -0.977)
    assert rank(legacy, 0.99) == (False, 19.7, -0.996) and rank(legacy, 0.98) == (True, 0.0, -0.996)


def test_whole_steps_are_timed_once_a_step_captures_no_new_decode_graph():
    """The first steps of a run capture a decode graph for each new refill size (a one-off cost): sweep_steps
    keeps warming up until a step captures none, and then times only steps that capture nothing."""
    class Trainer:
        capturing = 3  # its first steps capture a graph each

        def __init__(self):
            self.model, self.calls = SimpleNamespace(graph_captures=0), 0
            self.updater = SimpleNamespace(graphed=False, graphs=None)

        def train_step(self):
            self.calls += 1
            self.model.graph_captures += self.calls <= self.capturing
            return {"perf/step_seconds": 1.0 if self.calls <= self.capturing else 0.1,
                    "perf/samples_per_second": 10.0, "train/answers_generated": 8,
                    **{f"perf/{k}_share": 0.25 for k in SHARES}}

    trainers = []
    sweep = Sweep("AdderRLConfig", torch.device("cpu"), reps=3)
    sweep.trainer = lambda prompts, **overrides: trainers.append(Trainer()) or trainers[-1]
    row = sweep_steps(sweep, 2, "auto", graphs=True)
    assert row["warmup_steps"] == 4 and row["captures_timed"] == 0  # three that captured, one that did not
    assert row["steps"] == 3 and row["step_seconds"] == 0.1 and trainers[-1].calls == 7
    # a run that keeps capturing stops warming up after MAX_WARMUP_STEPS, and says what the timed steps captured
    Trainer.capturing = 100
    row = sweep_steps(sweep, 2, "auto", graphs=True)
    assert row["warmup_steps"] == MAX_WARMUP_STEPS and row["captures_timed"] == 3 and row["step_seconds"] == 1.0


def test_whole_steps_with_graphed_updates_are_timed_once_the_update_captures_no_new_graph():
    """Under rl_cuda_graphs the update's first WARMUP optimizer steps run eagerly and capture nothing; the sweep
    warms up through them and through the step that captures, and times only steps that capture nothing."""
    class Trainer:
        def __init__(self):
            self.model = SimpleNamespace(graph_captures=0)
            self.updater = SimpleNamespace(graphed=True, graphs=None)

        def train_step(self):  # one optimizer step a step: eager for WARMUP calls, then one capture
            if self.updater.graphs is None:
                self.updater.graphs = CapturedSteps(torch.optim.AdamW(torch.nn.Linear(2, 2).parameters()))
            graphs = self.updater.graphs
            graphs.calls += 1
            graphs.warmed.add((64,))
            if graphs.calls == graphs.WARMUP + 1:
                graphs.graphs[(64,)] = "graph"
            return {"perf/step_seconds": 0.1 if graphs.calls > graphs.WARMUP + 1 else 1.0,
                    "perf/samples_per_second": 10.0, "train/answers_generated": 8,
                    **{f"perf/{k}_share": 0.25 for k in SHARES}}

    sweep = Sweep("AdderRLConfig", torch.device("cpu"), reps=3)
    sweep.trainer = lambda prompts, **overrides: Trainer()
    row = sweep_steps(sweep, 2, "auto", graphs=True, rl_graphs=True)
    assert row["warmup_steps"] == 5 and row["captures_timed"] == 0 and row["step_seconds"] == 0.1


def test_the_sweep_table_puts_each_kind_of_update_in_its_own_column():
    """An update with matmul attention, compiled, and graphed (rl_cuda_graphs) each in its column, whatever the order
    of the rows."""
    from rl.tools.perf import sweep_table
    row = lambda seconds, **labels: {"metric": "sweep_update", "prompts": 64, "precision": "bf16", "status": "ok",
                                     "seconds": seconds, **labels}
    rows = [row(0.003, matmul_attention=True, rl_cuda_graphs=True), row(0.02, matmul_attention=True, compile=True),
            row(0.01, matmul_attention=True), row(0.012)]
    header, _, line = ([c.strip() for c in text.split("|")] for text in sweep_table(rows).splitlines())
    update = header.index("update s bf16")  # (the step's columns that follow repeat some names)
    assert header[update:update + 6] == ["update s bf16", "the same, matmul attention", "and compiled",
                                         "or graphed (rl_cuda_graphs)", "or prefix sharing", "prefix sharing, compiled"]
    assert line[update:update + 6] == ["0.0120", "0.0100", "0.0200", "0.0030", "-", "-"]
    # a prefix-sharing update has its own column too, and compiled another, each taking nobody else's
    rows.insert(0, row(0.005, matmul_attention=True, compile=True, prefix_sharing=True))
    _, _, line = ([c.strip() for c in text.split("|")] for text in sweep_table(rows).splitlines())
    assert line[update:update + 6] == ["0.0120", "0.0100", "0.0200", "0.0030", "-", "0.0050"]
    rows.insert(0, row(0.007, matmul_attention=True, prefix_sharing=True))
    _, _, line = ([c.strip() for c in text.split("|")] for text in sweep_table(rows).splitlines())
    assert line[update:update + 6] == ["0.0120", "0.0100", "0.0200", "0.0030", "0.0070", "0.0050"]


def test_the_sweep_table_puts_sampling_with_shared_prompts_in_its_own_column():
    from rl.tools.perf import sweep_table
    row = lambda tokens, **labels: {"metric": "sweep_sampling", "prompts": 64, "status": "ok",
                                    "tokens_per_second": tokens, **labels}
    rows = [row(4e6, precision="bf16", graphs=True, matmul_attention=True, prefix_sharing=True),
            row(3e6, precision="bf16", graphs=True, matmul_attention=True), row(2e6, precision="bf16", graphs=True),
            row(1e6, precision="fp32", graphs=False)]
    header, _, line = ([c.strip() for c in text.split("|")] for text in sweep_table(rows).splitlines())
    assert header[2:6] == ["sampling tok/s eager fp32", "sampling tok/s graphs bf16", "the same, matmul attention",
                           "or prompts shared (prefix sharing)"]
    assert line[2:6] == ["1,000,000", "2,000,000", "3,000,000", "4,000,000"]


def test_a_fixed_update_starts_the_models_a_first_step_starts():
    """fixed_update (the sweep's and the studies' update alone) starts what a run's first step starts: ppo_critic's
    critic, a KL term's frozen reference; its update then trains the critic as a step's does."""
    from helpers import critic_of, make_trainer
    from rl.tools.perf import fixed_update
    trainer = make_trainer(rl_algorithm="ppo_critic", kl_coef=0.1)
    batch, update = fixed_update(trainer)
    critic = {k: v.clone() for k, v in critic_of(trainer).state_dict().items()}
    assert trainer.ref_model is not None and len(batch) > 0
    update()
    assert any(not torch.equal(v, critic[k]) for k, v in critic_of(trainer).state_dict().items())


def test_the_gpu_tool_without_cuda_is_one_line_and_exit_2_and_its_table_still_prints(monkeypatch, capsys):
    """Without CUDA its runs would train on the CPU for hours and file CPU seconds as a GPU's."""
    from rl.tools import gpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu, "run", lambda *a: pytest.fail("started a run without CUDA"))
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--configs", "AdderRLConfig"])
    with pytest.raises(SystemExit) as stop:
        gpu.main()
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == "" and err == gpu.NO_CUDA + "\n"
    assert gpu.NO_CUDA == ("error: python -m rl.tools.gpu runs the presets on a GPU, and CUDA is not available here; "
                           "--table prints the saved results, python -m rl.tools.benchmark runs them on the CPU")
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--table"])
    gpu.main()
    assert "| AdderRLConfig |" in capsys.readouterr().out  # the saved results/gpu/ files
