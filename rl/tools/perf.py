"""How fast the RL step runs on this machine, measured against the machine's own matmul peak.

    python -m rl.tools.benchmark --perf [--configs AdderRLConfig] [--compile]

Prints one JSON line per measurement:

  matmul_peak_flops        a 4096 x 4096 fp32 GEMM at the thread count used: the practical ceiling
                           for the update, which is mostly matmuls
  update                   one step's update (forward + backward + optimizer steps) on a fixed
                           sampled batch: update_flops (model FLOPs, counted analytically, see
                           `update_flops`), update_seconds (median of several), update_mfu =
                           update_flops / update_seconds / matmul_peak_flops; with the machine's
                           threads and, from a child process, with one thread
  update_profile           where the update's time goes, from torch.profiler: the operators with
                           the most self time and their share
  step_shares              share of whole steps spent sampling, scoring and updating, and in
                           evaluation (one every eval_interval steps, amortised)
  rollout_tokens_per_second  sampled answer tokens per second, with and without the KV cache
  bf16                     seconds of a rollout and of the update's forward + backward in fp32, in
                           bf16 weights, and under bf16 autocast (fp32 weights)
  torch_compile            (with --compile) compile time and forward + backward seconds, eager vs compiled
  samples_per_second       answers generated per second of whole steps through the real script
                           (rl/rl_ddp.py), every sampling round counted: 1 process with 1 thread, 1
                           process with every core, N processes with 1 thread each under torchrun,
                           and the N-process / 1-process ratio

The in-process numbers use the config's model and batch from random weights with the digit_match
reward (so every answer carries gradient and none is skipped): speed does not depend on what the
weights know.

The device sweep (same model and reward; rl_batch_size = each of --sizes prompts, rl_ga_steps=1, the
config's rl_rollout_size answers a prompt), one JSON line a row, one record in --out at the end:

    python -m rl.tools.perf --device cuda [--configs AdderRLConfig] [--sizes 64,512,4096,8192] [--reps 5]
    python -m rl.tools.perf --device cpu --sizes 2 --reps 2 --out /tmp/perf-sweep.json   # a smoke test

  sweep_sampling          generate alone (with_stats, with_nonfinite, as the rollout calls it): eager and
                          CUDA-graphed (CUDA only) x fp32 and bf16 autocast; and with each prompt's cache one copy
                          for its answers (prefix_sharing: graphs, bf16 and matmul attention on CUDA, fp32 on the
                          CPU); on CUDA with its cached passes compiled (--compile=true: inside the graph), with and
                          without prefix_sharing; tokens and answers per second, first_call_seconds: its first call
                          alone (the capture, and the compile where compiled)
  sweep_update            the step's update alone on a fixed sampled batch (as `fixed_update`), fp32 and bf16;
                          on CUDA also bf16 with matmul attention compiled (--compile=true: torch.compile);
                          with each prompt read once for its answers (prefix_sharing: bf16 and matmul
                          attention on CUDA, fp32 on the CPU; and on CUDA compiled too); first_call_seconds: its
                          first call alone (the compile, where compiled: torch.compile's graphs serve every model of
                          one structure and setting, so a row compiles only the passes no row before it compiled)
  sweep_forward_backward  the bare limit: forward + backward + the fused AdamW step over as many sequences
                          (B * G rows of max_seq_len - 1 tokens) in a tight loop, fp32 and bf16, with the
                          model-FLOP rate (3 x `forward_flops` a sequence; the AdamW step not counted)
  sweep_step              whole trainer.train_step()s, after untimed ones until a step captures no new decode
                          graph (warmup_steps, warmup_seconds: the compile too, where compiled; captures_timed
                          counts any later capture): precision auto with CUDA graphs (the defaults), fp32
                          eager, and on CUDA matmul attention, compiled or not; with prefix_sharing (auto; and on
                          CUDA compiled); median
                          step seconds, answers generated per second, and the median step's stage shares

Every timer starts and stops after torch.cuda.synchronize() on CUDA; a measurement takes at most --reps
timed calls and stops earlier once they have taken --budget seconds. A row that runs out of device memory
is recorded with status "oom" (and the sweep goes on).
"""

import argparse
import copy
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from model.gpt import autocast_dtype_for
from rl.math_trainer import MathRLTrainer
from rl import dist, run_dir
from rl.rl_ddp import get_config_class
from rl.tools import launch, results
from rl.tools.report import markdown_table

PERF_OVERRIDES = dict(init_from="scratch", rewards="digit_match:1.0")


EMITTED = []  # this process's measurements, for the result file


def emit(**row):
    EMITTED.append(row)
    print(json.dumps(row), flush=True)


def seconds_per_call(fn, reps: int = 3, warmup: int = 1, *, sync=None, budget_s: float = math.inf) -> float:
    """Median wall seconds of fn() over `reps` calls, after `warmup` untimed calls. sync (say
    torch.cuda.synchronize): called before starting and before stopping every timer, so that a timer
    counts the device work its call queued and none queued before. budget_s: no further call once the
    timed calls have taken this long together (at least one is timed)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        times.append(time.perf_counter() - t0)
        if sum(times) >= budget_s:
            break
    return statistics.median(times)


def timed(fn, reps: int, warmup: int, *, device: torch.device = None, budget_s: float = math.inf) -> float:
    """seconds_per_call with the device's synchronisation on CUDA (none on the CPU)."""
    sync = torch.cuda.synchronize if device is not None and device.type == "cuda" else None
    return seconds_per_call(fn, reps, warmup, sync=sync, budget_s=budget_s)


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
    reference policy's no-grad forward when there is a KL penalty. (PPO ratios need no pass of
    their own: the sampler's log-probs are kept from generation.)"""
    passes = 3 * config.ppo_epochs + int(config.kl_coef > 0)
    return passes * forward_flops(config, config.max_seq_len - 1) * num_sequences


def build_trainer(config_name: str, **overrides) -> MathRLTrainer:
    return MathRLTrainer.build(get_config_class(config_name)(**{**PERF_OVERRIDES, **overrides}).get_args_ready())


def fixed_update(trainer: MathRLTrainer):
    """One sampled batch and its advantages, and a function that runs the step's update on them."""
    trainer.model.eval()
    trainer.start_models()  # a KL term's frozen reference, ppo_critic's critic: what a run's first step starts
    first, batch, _ = trainer.sample(0)
    targets, _ = trainer.advantages(first, batch)
    return batch, lambda: trainer.update(batch, targets)


def measure_update(config_name: str, reps: int = 5, **overrides) -> dict:
    trainer = build_trainer(config_name, **overrides)
    batch, update = fixed_update(trainer)
    seconds = seconds_per_call(update, reps, warmup=2)
    flops, peak = update_flops(trainer.config, len(batch)), matmul_peak_flops()
    row = dict(metric="update", config=config_name, overrides=overrides, threads=torch.get_num_threads(),
               update_flops=flops, update_seconds=seconds, matmul_peak_flops=peak, update_mfu=flops / seconds / peak)
    emit(**row)
    return row


def measure_update_one_thread(config_name: str):
    """measure_update in a child process that has one thread (torch's threads are set at start-up)."""
    code = f"from rl.tools.perf import measure_update; measure_update({config_name!r})"
    proc = subprocess.run([sys.executable, "-c", code], cwd=launch.REPO, env=launch.script_env(threads=1), check=True,
                          capture_output=True, text=True)
    emit(**json.loads(proc.stdout.strip().splitlines()[-1]))


def profile_update(config_name: str, top: int = 10):
    trainer = build_trainer(config_name)
    _, update = fixed_update(trainer)
    update()  # warm-up
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        update()
    ops = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in ops)
    emit(metric="update_profile", config=config_name, threads=torch.get_num_threads(), total_seconds=total / 1e6,
         top=[dict(op=e.key, calls=e.count, self_seconds=round(e.self_cpu_time_total / 1e6, 4),
                   share=round(e.self_cpu_time_total / total, 3)) for e in ops[:top]])


def measure_steps(config_name: str, steps: int = 6):
    trainer = build_trainer(config_name)
    c = trainer.config
    trainer.train_step()  # warm-up: first-call allocations
    rows = [trainer.train_step() for _ in range(steps)]
    step_s = statistics.median(r["perf/step_seconds"] for r in rows)
    both_splits = lambda: (trainer.accuracy("test"), trainer.accuracy("validation"))  # as each evaluation does
    eval_s = seconds_per_call(both_splits, reps=1) / c.eval_interval
    total = step_s + eval_s
    shares = {k: statistics.median(r[f"perf/{k}_share"] for r in rows) * step_s / total
              for k in ("rollout", "reward", "update")}
    emit(metric="step_shares", config=config_name, **shares, evaluation=eval_s / total, step_seconds=step_s,
         threads=torch.get_num_threads())
    env, model = trainer.env, trainer.model.eval()
    prompts, _ = env.encode(*env.sample_operands(c.rl_batch_size, np.random.default_rng(0)))
    tokens, out = c.rl_batch_size * c.rl_rollout_size * env.answer_len, {}
    for use_cache in (True, False):
        seconds = seconds_per_call(lambda: model.generate(prompts, env.answer_len, num_samples=c.rl_rollout_size,
                                                          use_cache=use_cache))
        out["with_cache" if use_cache else "without_cache"] = tokens / seconds
    emit(metric="rollout_tokens_per_second", config=config_name, **out, threads=torch.get_num_threads())
    measure_bf16(model, env, prompts, c)


def measure_bf16(model, env, prompts, c, reps: int = 3):
    """Seconds of a rollout (generate with the cache) and of a forward + backward over the same
    number of sequences: fp32, bf16 weights, and bf16 autocast over fp32 weights. A bf16 rollout
    would also sample from a slightly different policy than the fp32 one the update differentiates."""
    row = {}
    seq = torch.randint(0, env.vocab_size, (len(prompts) * c.rl_rollout_size, c.max_seq_len - 1))
    for name, dtype, autocast in (("fp32", torch.float32, False), ("bf16", torch.bfloat16, False),
                                  ("bf16_autocast", torch.float32, True)):
        m = copy.deepcopy(model).to(dtype)
        context = lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)

        def rollout():
            with torch.inference_mode(), context():
                m.generate(prompts, env.answer_len, num_samples=c.rl_rollout_size)

        def fwd_bwd():
            with context():
                loss = m(seq).float().logsumexp(-1).mean()
            loss.backward()

        row[f"rollout_seconds_{name}"] = seconds_per_call(rollout, reps)
        row[f"forward_backward_seconds_{name}"] = seconds_per_call(fwd_bwd, reps)
    emit(metric="bf16", config=c.name, **row, threads=torch.get_num_threads())


def script_samples_per_second(config_name: str, nproc: int, threads: int, steps: int = 8) -> float:
    """Median answers generated per second of steps 3.. of a real run (the first steps pay one-off costs)."""
    with tempfile.TemporaryDirectory() as out:
        launch.run(["--config_name", config_name, "--no_wandb", f"--out_dir={out}", f"--rl_train_steps={steps}",
                    "--eval_interval=1000", "--save_interval=1000", "--num_eval=100",
                    *[f"--{k}={v}" for k, v in PERF_OVERRIDES.items()]], nproc=nproc, threads=threads)
        rows = run_dir.read_metrics(out)
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


def main(configs: list, compile: bool = False, rerun: bool = False):
    """Every measurement of each config, saved to results/perf/<config>-<threads>threads.json (read
    back, not measured again, when it exists)."""
    for name in configs:
        threads = torch.get_num_threads()
        path = results.path("perf", f"{name}-{threads}threads{'-compile' if compile else ''}")
        if os.path.exists(path) and not rerun:
            with open(path) as f:
                print(table(json.load(f)))
            continue
        EMITTED.clear()
        measure_update(name)
        measure_update_one_thread(name)
        profile_update(name)
        measure_steps(name)
        measure_scaling(name)
        if compile:
            measure_compile(name)
        command = f"python -m rl.tools.benchmark --perf --configs {name}" + (" --compile" if compile else "")
        rec = {"tool": "perf", "command": command, "key": {"config": name, "threads": threads, "compile": compile},
               **results.machine(), "rows": list(EMITTED)}
        results.save(rec, path)
        print(table(rec))


def table(rec: dict) -> str:
    """docs/results.md's speed table from one perf record."""
    row = {r["metric"] + ("_1" if r["metric"] == "update" and r["threads"] == 1 else ""): r for r in rec["rows"]}
    up, one, prof, shares = row["update"], row.get("update_1", {}), row["update_profile"], row["step_shares"]
    tok, bf, sps = row["rollout_tokens_per_second"], row["bf16"], row["samples_per_second"]
    gflops = lambda r: f"{r['matmul_peak_flops'] / 1e9:.0f} GFLOP/s" if r else "-"
    top = ", ".join(f"{op['op']} {100 * op['share']:.1f}%" for op in prof["top"][:2])
    lines = [["matmul peak", gflops(up), gflops(one)],
             ["update (forward + backward + AdamW, fixed batch): model FLOPs / s / peak (MFU)",
              f"{up['update_mfu']:.3f}", f"{one['update_mfu']:.3f}" if one else "-"],
             ["where the update's time goes (torch.profiler, self time)", top, ""],
             ["one step's shares, one sampling round", f"sampling {shares['rollout']:.2f}, update "
              f"{shares['update']:.2f}, evaluation {shares['evaluation']:.2f} (amortised)", ""],
             ["sampled tokens / s, with / without the KV cache",
              f"{tok['with_cache']:,.0f} / {tok['without_cache']:,.0f}", ""],
             [f"bf16 weights: sampling / forward + backward, s (fp32: {bf['rollout_seconds_fp32']:.3f} / "
              f"{bf['forward_backward_seconds_fp32']:.3f})",
              f"{bf['rollout_seconds_bf16']:.3f} / {bf['forward_backward_seconds_bf16']:.3f}", ""],
             ["bf16 autocast, fp32 weights: sampling / forward + backward, s",
              f"{bf['rollout_seconds_bf16_autocast']:.3f} / {bf['forward_backward_seconds_bf16_autocast']:.3f}", ""],
             [f"answers / s through rl/rl_ddp.py: 1 process x 1 thread / 1 x {sps['threads_all']} / "
              f"{sps['processes']} x 1 (ratio to the first)",
              f"{sps['one_process_one_thread']:.1f} / {sps['one_process_all_threads']:.1f} / "
              f"{sps['processes_one_thread_each']:.1f} ({sps['ratio_processes_over_one']:.2f}x)", ""]]
    return markdown_table(["measurement", f"{up['threads']} threads", "1 thread"], lines)


# ---- the device sweep (python -m rl.tools.perf --device cuda) --------------------------------------------------

SWEEP_SIZES = (64, 512, 4096, 8192)  # prompts a step; each gets the config's rl_rollout_size answers
SWEEP_PRECISIONS = ("fp32", "bf16")
MAX_WARMUP_STEPS = 8  # a whole-step measurement's untimed steps at most (sweep_steps)
NO_CUDA = "error: --device cuda but CUDA is not available here; use --device cpu"


class Sweep:
    """One config on one device: how each of its measurements is timed and where its trainers run."""

    def __init__(self, config_name: str, device: torch.device, reps: int = 5, budget_s: float = 30.0):
        self.config_name, self.device, self.reps, self.budget_s = config_name, device, reps, budget_s
        self.cuda = device.type == "cuda"

    def timed(self, fn, warmup: int = 2) -> float:
        return timed(fn, self.reps, warmup, device=self.device, budget_s=self.budget_s)

    def trainer(self, prompts: int, **overrides) -> MathRLTrainer:
        """build_trainer's trainer (random weights, digit_match) at `prompts` prompts a step, one micro-batch,
        on this device."""
        config = get_config_class(self.config_name)(**{**PERF_OVERRIDES, "rl_batch_size": prompts, "rl_ga_steps": 1,
                                                        "device": self.device.type, **overrides})
        return MathRLTrainer.build(config.get_args_ready(), dist.DistInfo(device=self.device))

    def runtime(self, model, precision: str, graphs: bool = False, matmul: bool = False, compile: bool = False):
        """fp32 (TF32 off on CUDA: 'fp32' means fp32) or bf16 autocast, CUDA-graphed decoding or not, attention
        in plain matmuls or not (model/gpt.py matmul_attention), full passes compiled or not."""
        model.configure_runtime(autocast_dtype=autocast_dtype_for(precision, self.device.type), cuda_graphs=graphs,
                                matmul_attention=matmul, compile=compile)

    def row(self, metric: str, prompts: int, measure, **labels) -> dict:
        """Emit the row of one measurement: its labels and what measure() returns, or status 'oom' when the
        device ran out of memory (the sweep goes on, the memory freed)."""
        row = dict(metric=metric, config=self.config_name, device=self.device.type, prompts=prompts, **labels)
        try:
            row.update(measure(), status="ok")
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
            # (cuBLAS's failed allocations, and one inside a graph capture, come as RuntimeErrors)
            oom = isinstance(e, torch.cuda.OutOfMemoryError) or any(m in str(e) for m in ("out of memory",
                                                                                            "ALLOC_FAILED"))
            # any other failure of one row is recorded too: one kernel's failure at one size must not lose the rest
            row.update(status="oom" if oom else "error", error=str(e).strip().splitlines()[0])
        self.free()
        emit(**row)
        return row

    def free(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def sweep_sampling(s: Sweep, trainer: MathRLTrainer, precision: str, graphs: bool, matmul: bool = False,
                   prefix_sharing: bool = False, compile: bool = False) -> dict:
    """generate alone, as the rollout calls it, on B fixed prompts with G answers each; prefix_sharing: each
    prompt's cache one copy for its G rows (model/gpt.py KVCache.share_prompts, as the setting samples); compile:
    its cached passes through torch.compile (inside the graph, with graphs); first_call_seconds: the first call alone
    (the compile and the capture)."""
    env, c, model = trainer.env, trainer.config, trainer.model.eval()
    s.runtime(model, precision, graphs, matmul, compile)
    prompts, _ = env.encode(*env.sample_operands(c.rl_batch_size, np.random.default_rng(0)))
    prompts = prompts.to(s.device)
    g = torch.Generator(device=s.device).manual_seed(0)
    run = lambda: model.generate(prompts, env.answer_len, temperature=c.rl_temperature, end_token=env.end_token,
                                 pad_token=env.pad_token, generator=g, num_samples=c.rl_rollout_size,
                                 with_stats=True, with_nonfinite=True, share_prompts=prefix_sharing)
    first = timed(run, 1, 0, device=s.device)  # (captures the graph; compiles first, when compiled)
    seconds = s.timed(run, warmup=1)  # (the first call was the first of the two warm-ups)
    answers = c.rl_batch_size * c.rl_rollout_size
    return dict(seconds=seconds, first_call_seconds=first, answers=answers,
                tokens_per_second=answers * env.answer_len / seconds, answers_per_second=answers / seconds)


def sweep_update(s: Sweep, trainer: MathRLTrainer, precision: str, matmul: bool = False, compile: bool = False,
                 rl_graphs: bool = False, prefix_sharing: bool = False) -> dict:
    """The step's update alone (forward + backward + optimizer step) on one fixed sampled batch; rl_graphs: its
    optimizer steps replayed from CUDA graphs (rl_cuda_graphs; the first calls capture them); prefix_sharing: each
    prompt read once for its answers in a micro-batch (the setting of that name)."""
    s.runtime(trainer.model, precision, matmul=matmul, compile=compile)
    trainer.updater.graphed = rl_graphs
    trainer.updater.prompt_len = trainer.env.prompt_len if prefix_sharing else 0
    batch, update = fixed_update(trainer)
    first = timed(update, 1, 0, device=s.device)  # what a run pays once: compiling, when compiled
    seconds = s.timed(update)
    trainer.updater.prompt_len = 0
    return dict(seconds=seconds, first_call_seconds=first, answers_trained=len(batch),
                answers_per_second=len(batch) / seconds,
                model_flops_per_second=update_flops(trainer.config, len(batch)) / seconds)


def sweep_forward_backward(s: Sweep, trainer: MathRLTrainer, precision: str) -> dict:
    """The bare limit: forward + backward + the fused AdamW step over N = B * G random sequences of
    T = max_seq_len - 1 tokens (next-token cross-entropy), on a copy of the policy."""
    c = trainer.config
    N, T = c.rl_batch_size * c.rl_rollout_size, c.max_seq_len - 1
    model = copy.deepcopy(trainer.model).eval()
    s.runtime(model, precision)
    optimizer = model.configure_optimizer(lr=c.learning_rate, weight_decay=c.weight_decay,
                                          betas=(c.adam_beta1, c.adam_beta2))
    seq = torch.randint(0, c.vocab_size, (N, T + 1), device=s.device)

    def step():
        logits = model(seq[:, :-1])
        torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), seq[:, 1:].flatten()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = s.timed(step)
    return dict(seconds=seconds, sequences=N, tokens_per_sequence=T, sequences_per_second=N / seconds,
                model_flops_per_second=3 * forward_flops(c, T) * N / seconds,
                optimizer="AdamW step included" + (" (fused)" if optimizer.defaults.get("fused") else ""))


def sweep_steps(s: Sweep, prompts: int, precision: str, graphs: bool, matmul: bool = False,
                compile: bool = False, rl_graphs: bool = False, prefix_sharing: bool = False) -> dict:
    """Whole RL steps of a fresh trainer: warm-up steps until one captures no decode graph, then up to reps
    (within the budget). The shares are those of the median step (by seconds), so that they sum to 1."""
    trainer = s.trainer(prompts, precision=precision, cuda_graphs=graphs, matmul_attention=matmul, compile=compile,
                        rl_cuda_graphs=rl_graphs, prefix_sharing=prefix_sharing)
    # Dynamic sampling's refill rounds come in sizes that round up to new powers of two for the first few
    # steps, and each new size's decode is captured as a graph once (an eager run and the capture): a cost
    # a run pays once, which a timed step must not (on an H200 it put 0.19-0.23 s steps beside 0.12 s ones).
    # (So are the update's graphs under rl_cuda_graphs: its first optimizer steps run eagerly, then each padded size
    # is captured once.)
    warmup, t0 = 0, time.perf_counter()
    while warmup < MAX_WARMUP_STEPS:
        captures = graph_captures(trainer)
        trainer.train_step()  # (the first also makes first-call allocations, and compiles when asked)
        warmup += 1
        if graph_captures(trainer) == captures and not warming_up(trainer):
            break
    captures = graph_captures(trainer)
    warmup_seconds = dist.clock(s.device) - t0  # (the compile too, when compiled; dist.clock syncs a CUDA device)
    steps, spent = [], 0.0
    while len(steps) < max(s.reps, 1) and spent < s.budget_s:
        steps.append(trainer.train_step())
        spent += steps[-1]["perf/step_seconds"]
    median = sorted(steps, key=lambda r: r["perf/step_seconds"])[(len(steps) - 1) // 2]
    shares = {f"{k}_share": median[f"perf/{k}_share"] for k in ("rollout", "reward", "update", "other")}
    return dict(steps=len(steps), warmup_steps=warmup, warmup_seconds=warmup_seconds,
                captures_timed=graph_captures(trainer) - captures,
                step_seconds=median["perf/step_seconds"],
                answers_per_second=statistics.median(r["perf/samples_per_second"] for r in steps),
                answers_generated=median["train/answers_generated"], **shares)


def graph_captures(trainer: MathRLTrainer) -> int:
    """CUDA graphs the trainer has captured so far: its decodes', and its optimizer steps' (rl_cuda_graphs), where each
    new shape first runs eagerly, then is captured (both counted: neither is a step's steady cost)."""
    graphs = trainer.updater.graphs
    return trainer.model.graph_captures + (graphs.one_offs() if graphs is not None else 0)


def warming_up(trainer: MathRLTrainer) -> bool:
    """Whether the graphed update has yet to capture its first graph: its first WARMUP optimizer steps run eagerly
    and capture nothing, and the next captures (rl/graphs.py)."""
    graphs = trainer.updater.graphs
    return trainer.updater.graphed and (graphs is None or graphs.warming_up() or not graphs.graphs)


def sweep_size(s: Sweep, prompts: int):
    """Every row of one batch size."""
    trainer = s.trainer(prompts)
    for graphs in (False, True) if s.cuda else (False,):
        for precision in SWEEP_PRECISIONS:
            s.row("sweep_sampling", prompts, lambda: sweep_sampling(s, trainer, precision, graphs),
                  precision=precision, graphs=graphs)
    for precision in SWEEP_PRECISIONS:
        s.row("sweep_update", prompts, lambda: sweep_update(s, trainer, precision), precision=precision)
    for precision in SWEEP_PRECISIONS:
        s.row("sweep_forward_backward", prompts, lambda: sweep_forward_backward(s, trainer, precision),
              precision=precision)
    # attention in plain matmuls (model/gpt.py matmul_attention), in the fastest setting of each
    graphs = s.cuda
    s.row("sweep_sampling", prompts, lambda: sweep_sampling(s, trainer, "bf16", graphs, matmul=True),
          precision="bf16", graphs=graphs, matmul_attention=True)
    s.row("sweep_update", prompts, lambda: sweep_update(s, trainer, "bf16", matmul=True), precision="bf16",
          matmul_attention=True)
    if s.cuda:
        s.row("sweep_update", prompts, lambda: sweep_update(s, trainer, "bf16", matmul=True, compile=True),
              precision="bf16", matmul_attention=True, compile=True)
        # (last: a table's cell takes the first row with its labels) each optimizer step replayed from a graph
        s.row("sweep_update", prompts, lambda: sweep_update(s, trainer, "bf16", matmul=True, rl_graphs=True),
              precision="bf16", matmul_attention=True, rl_cuda_graphs=True)
    # each prompt read once for its answers (prefix_sharing), in the device's fastest eager setting: bf16 and matmul
    # attention on CUDA, fp32 on the CPU
    fast = dict(precision="bf16", matmul_attention=True) if s.cuda else dict(precision="fp32")
    s.row("sweep_sampling", prompts, lambda: sweep_sampling(s, trainer, fast["precision"], graphs, matmul=s.cuda,
                                                            prefix_sharing=True), **fast, graphs=graphs,
          prefix_sharing=True)
    s.row("sweep_update", prompts, lambda: sweep_update(s, trainer, fast["precision"], matmul=s.cuda,
                                                        prefix_sharing=True), **fast, prefix_sharing=True)
    if s.cuda:  # the decode's cached passes compiled (inside its graph), with and without prefix sharing
        for sharing in (False, True):
            s.row("sweep_sampling", prompts, lambda: sweep_sampling(s, trainer, "bf16", True, matmul=True,
                                                                    prefix_sharing=sharing, compile=True),
                  precision="bf16", graphs=True, matmul_attention=True, prefix_sharing=sharing, compile=True)
    if s.cuda:  # and the grouped pass compiled
        s.row("sweep_update", prompts, lambda: sweep_update(s, trainer, "bf16", matmul=True, compile=True,
                                                            prefix_sharing=True), **fast, compile=True,
              prefix_sharing=True)
    s.runtime(trainer.model, "auto")
    del trainer
    s.free()
    # the defaults (auto: bf16 autocast and TF32 on CUDA, fp32 on the CPU; graphs on CUDA only), then fp32 eager
    for precision, graphs in (("auto", s.cuda), ("fp32", False)):
        s.row("sweep_step", prompts, lambda: sweep_steps(s, prompts, precision, graphs),
              precision=precision, graphs=graphs)
    s.row("sweep_step", prompts, lambda: sweep_steps(s, prompts, "auto", s.cuda, matmul=True), precision="auto",
          graphs=s.cuda, matmul_attention=True)
    if s.cuda:  # torch.compile of every full pass (CUDA only: compiling took 20 s for a test model on 2 CPU cores)
        s.row("sweep_step", prompts, lambda: sweep_steps(s, prompts, "auto", True, matmul=True, compile=True),
              precision="auto", graphs=True, matmul_attention=True, compile=True)
        s.row("sweep_step", prompts, lambda: sweep_steps(s, prompts, "auto", True, matmul=True, rl_graphs=True),
              precision="auto", graphs=True, matmul_attention=True, rl_cuda_graphs=True)
    s.row("sweep_step", prompts, lambda: sweep_steps(s, prompts, "auto", s.cuda, matmul=s.cuda, prefix_sharing=True),
          precision="auto", graphs=s.cuda, **({"matmul_attention": True} if s.cuda else {}), prefix_sharing=True)
    if s.cuda:
        s.row("sweep_step", prompts, lambda: sweep_steps(s, prompts, "auto", True, matmul=True, compile=True,
                                                         prefix_sharing=True),
              precision="auto", graphs=True, matmul_attention=True, compile=True, prefix_sharing=True)


def sweep(config_name: str, device: torch.device, sizes, *, reps: int = 5, budget_s: float = 30.0) -> list:
    """Every row of every size for one config, emitted as they come; returns them."""
    EMITTED.clear()
    s = Sweep(config_name, device, reps, budget_s)
    for prompts in sizes:
        sweep_size(s, prompts)
    return list(EMITTED)


def sweep_table(rows: list) -> str:
    """One line a batch size: what the sweep's rows say, 'oom' where the device ran out of memory."""
    def cell(metric, prompts, key, fmt, **labels):
        r = next((r for r in rows if r["metric"] == metric and r["prompts"] == prompts
                  and all(r.get(k) == v for k, v in labels.items())), None)
        return "-" if r is None else r["status"] if r["status"] != "ok" else fmt.format(r[key])

    def shares(prompts):
        r = next((r for r in rows if r["metric"] == "sweep_step" and r["prompts"] == prompts
                  and r["precision"] == "auto"), None)
        if r is None or r["status"] != "ok":
            return "-" if r is None else r["status"]
        return " / ".join(f"{r[k + '_share']:.2f}" for k in ("rollout", "reward", "update", "other"))

    lines = []
    for prompts in sorted({r["prompts"] for r in rows}):
        tok = lambda precision, graphs: cell("sweep_sampling", prompts, "tokens_per_second", "{:,.0f}",
                                             precision=precision, graphs=graphs, matmul_attention=None,
                                             prefix_sharing=None)
        sec = lambda metric, precision: cell(metric, prompts, "seconds", "{:.4f}", precision=precision,
                                             matmul_attention=None, compile=None, rl_cuda_graphs=None,
                                             prefix_sharing=None)
        matmul = lambda metric, key, fmt: cell(metric, prompts, key, fmt, matmul_attention=True, compile=None,
                                               rl_cuda_graphs=None, prefix_sharing=None)
        compiled = lambda metric, key, fmt: cell(metric, prompts, key, fmt, compile=True, prefix_sharing=None)
        graphed = lambda metric, key, fmt: cell(metric, prompts, key, fmt, rl_cuda_graphs=True)
        shared = lambda metric, key, fmt: cell(metric, prompts, key, fmt, prefix_sharing=True, compile=None)
        both = lambda metric, key, fmt: cell(metric, prompts, key, fmt, prefix_sharing=True, compile=True)
        lines.append([prompts, tok("fp32", False), tok("bf16", True),
                      matmul("sweep_sampling", "tokens_per_second", "{:,.0f}"),
                      shared("sweep_sampling", "tokens_per_second", "{:,.0f}"),
                      cell("sweep_sampling", prompts, "tokens_per_second", "{:,.0f}", compile=True,
                           prefix_sharing=False),
                      both("sweep_sampling", "tokens_per_second", "{:,.0f}"), sec("sweep_update", "fp32"),
                      sec("sweep_update", "bf16"), matmul("sweep_update", "seconds", "{:.4f}"),
                      compiled("sweep_update", "seconds", "{:.4f}"), graphed("sweep_update", "seconds", "{:.4f}"),
                      shared("sweep_update", "seconds", "{:.4f}"), both("sweep_update", "seconds", "{:.4f}"),
                      f"{sec('sweep_forward_backward', 'fp32')} / {sec('sweep_forward_backward', 'bf16')}",
                      cell("sweep_step", prompts, "answers_per_second", "{:,.0f}", precision="auto",
                           prefix_sharing=None),
                      matmul("sweep_step", "answers_per_second", "{:,.0f}"),
                      compiled("sweep_step", "answers_per_second", "{:,.0f}"),
                      graphed("sweep_step", "answers_per_second", "{:,.0f}"),
                      shared("sweep_step", "answers_per_second", "{:,.0f}"),
                      both("sweep_step", "answers_per_second", "{:,.0f}"), shares(prompts)])
    headers = ["prompts", "sampling tok/s eager fp32", "sampling tok/s graphs bf16", "the same, matmul attention",
               "or prompts shared (prefix sharing)", "matmul attention, compiled decode",
               "prefix sharing, compiled decode", "update s fp32", "update s bf16", "the same, matmul attention",
               "and compiled", "or graphed (rl_cuda_graphs)", "or prefix sharing", "prefix sharing, compiled",
               "bare fwd+bwd+AdamW s fp32 / bf16",
               "step answers/s (auto)", "the same, matmul attention", "and compiled", "or graphed",
               "or prefix sharing", "prefix sharing, compiled", "step shares rollout / reward / update / other (auto)"]
    return markdown_table(headers, lines)


def parse_sweep_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rl.tools.perf", description="The device sweep (module docstring).")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--configs", nargs="+", default=["AdderRLConfig"])
    parser.add_argument("--sizes", default=",".join(map(str, SWEEP_SIZES)),
                        help="prompts a step, comma-separated (answers: each times the config's rl_rollout_size)")
    parser.add_argument("--reps", type=int, default=5, help="timed calls (or steps) a measurement, at most")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of timed calls a measurement, at most")
    parser.add_argument("--out", default=None, help="the record's path (default results/gpu/<GPU>/perf-<config>.json)")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--sizes takes comma-separated integers, got {args.sizes!r}")
    if not args.sizes or min(args.sizes) < 1 or args.reps < 1:
        parser.error("--sizes needs positive sizes and --reps at least 1")
    if args.out and len(args.configs) > 1:
        parser.error("--out names one file: give one config, or leave --out out (one file a config)")
    return args


def sweep_main(argv=None) -> int:
    """The sweep's command line: one record a config, saved with results.save, and its table printed."""
    args = parse_sweep_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device()) if args.device == "cuda" else torch.device("cpu")
    for name in args.configs:
        rows = sweep(name, device, args.sizes, reps=args.reps, budget_s=args.budget)
        command = " ".join(["python -m rl.tools.perf --device", args.device, "--configs", name, "--sizes",
                            ",".join(map(str, args.sizes)), "--reps", str(args.reps), "--budget", f"{args.budget:g}"]
                           + (["--out", args.out] if args.out else []))
        rec = {"tool": "perf-sweep", "command": command, "device": str(device), **results.machine(), "rows": rows}
        path = args.out or results.path(results.gpu_folder(), f"perf-{name}")
        results.save(rec, path)
        print(f"\n{name} on {device} (saved to {path}):\n{sweep_table(rows)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(sweep_main())
