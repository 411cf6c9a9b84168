"""How fast the RL step runs on this machine, measured against the machine's own matmul peak.

    python -m rl.benchmark --perf [--configs AdderRLConfig]

Prints one JSON line per measurement:

  matmul_peak_flops        a 4096 x 4096 fp32 GEMM at the thread count used below: the practical
                           ceiling for the update, which is mostly matmuls
  update                   update_flops (model FLOPs of forward + backward over the step's answers,
                           counted analytically, see `update_flops`), update_seconds, and
                           update_mfu = update_flops / update_seconds / matmul_peak_flops
  step_shares              share of a step spent in rollout, reward, update, and evaluation
                           (one held-out evaluation every eval_interval steps, amortised)
  rollout_tokens_per_second  sampled answer tokens per second, with and without the KV cache
  bf16                     seconds of a rollout and of a forward + backward in fp32 and in bf16
  torch_compile            (with --compile) compile time and forward + backward seconds, eager vs compiled
  end_to_end               wall seconds of the default runs, warm start included, read from the
                           runs `python -m rl.benchmark` left in out/benchmark
  samples_per_second       whole RL steps through the real script (rl/rl_ddp.py): 1 process with
                           1 thread, 1 process with all cores, N processes with 1 thread each
                           under torchrun, and the N-process / 1-process ratio

The in-process numbers use the config's model and batch from random weights with the
digit_match reward (so every answer carries gradient and none is skipped); speed does not
depend on what the weights know.
"""

import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from configs import get_config_class
from rl.math_trainer import MathRLTrainer
from rl.tools import launch

REPO = launch.REPO
PERF_OVERRIDES = dict(init_from="scratch", rewards="digit_match:1.0")


def emit(**row):
    print(json.dumps(row), flush=True)


def seconds_per_call(fn, reps: int = 3, warmup: int = 1) -> float:
    """Mean wall seconds of fn() over `reps` calls, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def matmul_peak_flops(n: int = 4096, reps: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n ** 3 / seconds_per_call(lambda: a @ b, reps, warmup=2)


def forward_flops(config, T: int) -> float:
    """Matmul FLOPs of one forward pass over one sequence of T tokens: per layer QKV, output
    projection and MLP (24 T d^2) plus attention scores and values (4 T^2 d), then the output
    head over every position (2 T d V). Backward costs twice the forward."""
    d, L, V = config.n_embed, config.n_layer, config.vocab_size
    return L * (24 * T * d * d + 4 * T * T * d) + 2 * T * d * V


def update_flops(config, num_sequences: int) -> float:
    """Forward + backward (3 forwards) over every sequence in each of ppo_epochs passes, plus the
    no-grad forwards the step also makes: the sampling policy's log-probs when a rollout feeds several optimizer steps
    (PPO ratios; every minibatch but the first, see MathRLTrainer.train_step), and the reference
    policy's when there is a KL penalty."""
    old = 1 - 1 / config.ppo_minibatches if config.ppo_epochs * config.ppo_minibatches > 1 else 0
    passes = 3 * config.ppo_epochs + old + int(config.kl_coef > 0)
    return passes * forward_flops(config, config.max_seq_len - 1) * num_sequences


def build_trainer(config_name: str):
    return MathRLTrainer.build(get_config_class(config_name)(**PERF_OVERRIDES).get_args_ready())


def measure_in_process(config_name: str, steps: int = 6):
    threads = torch.get_num_threads()
    peak = matmul_peak_flops()
    emit(metric="matmul_peak_flops", value=peak, threads=threads, dtype="float32")
    trainer = build_trainer(config_name)
    c = trainer.config
    trainer.train_step()  # warm-up: first-call allocations
    rows = [trainer.train_step() for _ in range(steps)]
    step_s = statistics.median(r["perf/step_seconds"] for r in rows)
    update_s = statistics.median(r["perf/step_seconds"] * r["perf/update_share"] for r in rows)
    flops = update_flops(c, c.rl_batch_size * c.rl_rollout_size)
    emit(metric="update", config=config_name, update_flops=flops, update_seconds=update_s,
         update_mfu=flops / update_s / peak, threads=threads)
    t0 = time.perf_counter()
    trainer.evaluate()
    eval_s = (time.perf_counter() - t0) / c.eval_interval  # one evaluation per eval_interval steps
    total = step_s + eval_s
    shares = {k: statistics.median(r[f"perf/{k}_share"] for r in rows) * step_s / total
              for k in ("rollout", "reward", "update")}
    emit(metric="step_shares", config=config_name, **shares, evaluation=eval_s / total, step_seconds=step_s,
         threads=threads)
    env, model = trainer.env, trainer.model.eval()
    prompts, _ = env.encode(*env.sample_operands(c.rl_batch_size, np.random.default_rng(0)))
    out = {}
    tokens = c.rl_batch_size * c.rl_rollout_size * env.answer_len
    for use_cache in (True, False):
        seconds = seconds_per_call(lambda: model.generate(prompts, env.answer_len, num_samples=c.rl_rollout_size,
                                                          use_cache=use_cache))
        out["with_cache" if use_cache else "without_cache"] = tokens / seconds
    emit(metric="rollout_tokens_per_second", config=config_name, **out, threads=threads)
    measure_bf16(model, env, prompts, c, threads)


def measure_bf16(model, env, prompts, c, threads: int, reps: int = 3):
    """Seconds of a rollout (generate with the cache) and of a forward + backward over the same
    number of sequences, in fp32 and in bf16 (a bf16 copy of the weights): whether bf16 would
    pay on this machine. A bf16 rollout would also sample from a slightly different policy than
    the fp32 one the update differentiates."""
    row = {}
    seq = torch.randint(0, env.vocab_size, (len(prompts) * c.rl_rollout_size, c.max_seq_len - 1))
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        m = copy.deepcopy(model).to(dtype)

        def rollout():
            with torch.inference_mode():
                m.generate(prompts, env.answer_len, num_samples=c.rl_rollout_size)

        def fwd_bwd():
            m(seq).float().logsumexp(-1).mean().backward()

        for key, fn in (("rollout_seconds", rollout), ("forward_backward_seconds", fwd_bwd)):
            row[f"{key}_{name}"] = seconds_per_call(fn, reps)
    emit(metric="bf16", config=c.__class__.__name__, **row, threads=threads)


def script_samples_per_second(config_name: str, nproc: int, threads: int, steps: int = 8) -> float:
    """Median samples/s of steps 3.. of a real run (the first steps pay one-off costs)."""
    with tempfile.TemporaryDirectory() as out:
        args = ["rl/rl_ddp.py", "--config_name", config_name, "--no_wandb", f"--out_dir={out}",
                f"--rl_train_steps={steps}", "--eval_interval=1000", "--save_interval=1000", "--num_eval=100",
                *[f"--{k}={v}" for k, v in PERF_OVERRIDES.items()]]
        launch.run(args[1:], nproc=nproc, threads=threads)
        with open(os.path.join(out, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
    return statistics.median(r["perf/samples_per_second"] for r in rows if r["step"] >= 3)


def measure_scaling(config_name: str):
    cores = os.cpu_count() or 1
    one = script_samples_per_second(config_name, 1, 1)
    all_threads = script_samples_per_second(config_name, 1, cores)
    many = script_samples_per_second(config_name, cores, 1)
    emit(metric="samples_per_second", config=config_name, one_process_one_thread=one,
         one_process_all_threads=all_threads, threads_all=cores, processes=cores, processes_one_thread_each=many,
         ratio_processes_over_one=many / one)


def measure_compile(config_name: str, reps: int = 3):
    """torch.compile on the update's forward + backward: its one-off compile time against the
    seconds it saves per step."""
    trainer = build_trainer(config_name)
    c, model = trainer.config, trainer.model
    seq = torch.randint(0, c.vocab_size, (c.rl_batch_size * c.rl_rollout_size, c.max_seq_len - 1))
    row = {}
    for name, m in (("eager", model), ("compiled", torch.compile(model))):
        def fwd_bwd():
            m(seq).logsumexp(-1).mean().backward()
        row[f"first_call_seconds_{name}"] = seconds_per_call(fwd_bwd, reps=1, warmup=0)  # compiles, if it will
        row[f"forward_backward_seconds_{name}"] = seconds_per_call(fwd_bwd, reps, warmup=0)
    emit(metric="torch_compile", config=config_name, **row, threads=torch.get_num_threads())


def end_to_end(config_name: str, root: str = os.path.join(REPO, "out", "benchmark")):
    """Wall seconds of the default runs, warm start included, as `python -m rl.benchmark` left them."""
    summaries = []
    for seed_dir in sorted(d for d in os.listdir(root) if d.startswith(f"{config_name}-seed")) if os.path.isdir(root) else []:
        path = os.path.join(root, seed_dir, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                summaries.append(json.load(f))
    if not summaries:
        emit(metric="end_to_end", config=config_name, note=f"no runs in {root}; run python -m rl.benchmark first")
    for world_size in sorted({s["world_size"] for s in summaries}):
        runs = [s for s in summaries if s["world_size"] == world_size]
        emit(metric="end_to_end", config=config_name, processes=world_size, runs=len(runs),
             wall_seconds_median=statistics.median(s["total_seconds"] for s in runs),
             warm_start_seconds_median=statistics.median(s.get("warm_start_seconds", 0.0) for s in runs),
             final_accuracy_median=statistics.median(s["final_accuracy"] for s in runs), source=root)


def main(configs: list, compile: bool = False):
    for name in configs:
        measure_in_process(name)
        measure_scaling(name)
        if compile:
            measure_compile(name)
        end_to_end(name)
