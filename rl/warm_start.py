"""Where RL starts from: a supervised warm start (cached), random weights, or a file.

A randomly initialised policy practically never writes an exactly right answer, so an
exact-match reward would be zero for every sample and REINFORCE would learn nothing. The warm
start trains the policy with teacher forcing on *training-split* problems (cross-entropy on the
answer tokens only) and stops as soon as greedy accuracy on held-out problems reaches
`sft_target_accuracy`, leaving RL real work to do. It is saved as out_dir/warm_start.pt together
with the settings that made it, and reused by later runs with the same settings.

A long warm start (2-digit multiplication takes an hour on a CPU) saves its progress every
`sft_save_interval` steps and when stopped to out_dir/warm_start_progress.pt; the same command
continues from there. Its problems and dropout are functions of the step (rl/seeding.py), so a
continued warm start equals an uninterrupted one.
"""

import os
import time

import torch
import torch.nn.functional as F
from tqdm import tqdm

from configs.base import BaseRLConfig, ConfigError
from rl import dist, seeding
from rl.evaluate import evaluate
from rl.math_env import MathEnvironment
from rl.snapshot import check_compatible, load_snapshot, save_atomic

FINGERPRINT_KEYS = ("task", "ndigit", "reverse_answer", "use_format", "test_fraction", "seed", "sft_max_steps",
                    "sft_batch_size", "sft_learning_rate", "sft_warmup_steps", "sft_target_accuracy",
                    "sft_eval_interval", "sft_num_eval", "weight_decay", "adam_beta1", "adam_beta2", "grad_clip")


def fingerprint(config: BaseRLConfig) -> dict:
    """The settings that determine the warm start; a cached one is reused only if they all match."""
    return {**{k: getattr(config, k) for k in FINGERPRINT_KEYS}, **config.model_args()}


def init_policy(config: BaseRLConfig, env: MathEnvironment, policy, info: dist.DistInfo, eval_a, eval_b, print0,
                should_stop=lambda: False):
    """Load or train the weights RL starts from into `policy` (possibly DDP-wrapped); returns what
    to log about it, or None if `should_stop()` interrupted the warm start (nothing is saved then)."""
    model = dist.unwrap(policy)
    if config.init_from == "scratch":
        print0("Init: random weights (init_from=scratch); expect near-zero exact-match reward")
        return {"init_from": "scratch"}
    if config.init_from != "sft":
        snap = load_snapshot(config.init_from)
        check_compatible(snap, config.init_from, config.model_args(), config.task_args())
        model.load_state_dict(snap["model"])
        print0(f"Init: weights from {config.init_from}")
        return {"init_from": config.init_from}

    path = os.path.join(config.out_dir, "warm_start.pt")
    if os.path.isfile(path):
        snap = load_snapshot(path)
        if snap.get("fingerprint") == fingerprint(config):
            model.load_state_dict(snap["model"])
            print0(f"Warm start: reusing {path} ({snap['steps']} supervised steps, "
                   f"{snap['seconds']:.0f}s when made, stopping-rule accuracy {snap['accuracy']:.3f})")
            return {"init_from": "sft", "warm_start_cached": True, "warm_start_steps": snap["steps"],
                    "warm_start_seconds": snap["seconds"]}
        print0(f"Warm start: {path} was made with other settings; training a new one")

    outcome = train_warm_start(config, env, policy, info, eval_a[: config.sft_num_eval], eval_b[: config.sft_num_eval],
                               print0, should_stop)
    if outcome is None:
        return None
    steps, accuracy, seconds = outcome
    if info.is_main:
        save_atomic({"kind": "warm_start", "model": model.state_dict(), "model_args": config.model_args(),
                     "task": config.task_args(), "fingerprint": fingerprint(config), "steps": steps,
                     "accuracy": accuracy, "seconds": seconds}, path)
        if os.path.exists(progress_path(config)):
            os.remove(progress_path(config))
    dist.barrier()
    return {"init_from": "sft", "warm_start_cached": False, "warm_start_steps": steps, "warm_start_seconds": seconds}


def progress_path(config: BaseRLConfig) -> str:
    return os.path.join(config.out_dir, "warm_start_progress.pt")


def load_progress(config: BaseRLConfig, print0):
    """The saved progress of this very warm start (same fingerprint), or None."""
    path = progress_path(config)
    if not os.path.isfile(path):
        return None
    try:
        progress = load_snapshot(path)
    except ConfigError as e:
        print0(f"Warm start: ignoring {path}: {e}")
        return None
    if progress.get("fingerprint") != fingerprint(config):
        print0(f"Warm start: {path} was made with other settings; starting the warm start afresh")
        return None
    return progress


def train_warm_start(config: BaseRLConfig, env: MathEnvironment, policy, info: dist.DistInfo, eval_a, eval_b, print0,
                     should_stop=lambda: False):
    """Teacher-forced training on the train split until the held-out check reaches the target.
    Returns (steps taken, last checked accuracy, seconds), or None if should_stop() said so (the
    progress is saved then, and continued by the next call with the same settings)."""
    model = dist.unwrap(policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.sft_learning_rate, weight_decay=config.weight_decay,
                                  betas=(config.adam_beta1, config.adam_beta2),
                                  fused=next(model.parameters()).device.type in ("cpu", "cuda"))
    warmup = max(config.sft_warmup_steps, 1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
    local_batch = config.sft_batch_size // info.world_size
    P = env.prompt_len
    accuracy, step, seconds_before = 0.0, 0, 0.0
    progress = load_progress(config, print0)
    if progress is not None:
        model.load_state_dict(progress["model"])
        optimizer.load_state_dict(progress["optimizer"])
        scheduler.load_state_dict(progress["scheduler"])
        accuracy, step, seconds_before = progress["accuracy"], progress["step"], progress["seconds"]
        print0(f"Warm start: continuing from step {step} ({progress_path(config)})")
    t0 = time.time() - seconds_before

    def save_progress():
        if info.is_main:
            save_atomic({"kind": "warm_start_progress", "model": model.state_dict(), "model_args": config.model_args(),
                         "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                         "fingerprint": fingerprint(config), "step": step, "accuracy": accuracy,
                         "seconds": time.time() - t0}, progress_path(config))
        dist.barrier()

    print0(f"Warm start: supervised training on the train split until held-out accuracy >= "
           f"{config.sft_target_accuracy} (checked on {len(eval_a)} problems every {config.sft_eval_interval} "
           f"steps, at most {config.sft_max_steps} steps)")
    bar = tqdm(total=config.sft_max_steps, initial=step, desc="warm start", disable=not info.show_progress,
               dynamic_ncols=True)
    model.train()
    while step < config.sft_max_steps:
        seeding.seed_dropout(config.seed, info.rank, step)
        a, b = env.sample_operands(local_batch, seeding.numpy_rng(config.seed, info.rank, step, seeding.SFT_PROBLEMS))
        prompts, answers = env.encode(a, b)
        seq = torch.cat([prompts, answers], dim=1).to(info.device)
        logits = policy(seq[:, :-1])[:, P - 1:]  # the positions that predict the answer tokens
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), seq[:, P:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        step += 1
        bar.update(1)
        if should_stop():
            bar.close()
            save_progress()
            return None
        if step % config.sft_save_interval == 0:
            save_progress()
        if step % config.sft_eval_interval == 0 or step == config.sft_max_steps:
            accuracy = evaluate(model, env, eval_a, eval_b, info, config.eval_batch_size, 0).accuracy
            bar.set_postfix(loss=f"{loss.item():.3f}", heldout_acc=f"{accuracy:.3f}")
            if not info.show_progress and step % (5 * config.sft_eval_interval) == 0:  # a log file's progress
                print0(f"Warm start step {step}/{config.sft_max_steps} | Loss: {loss.item():.3f} | Held-out: {accuracy:.3f}")
            if accuracy >= config.sft_target_accuracy:
                break
    bar.close()
    seconds = time.time() - t0
    if accuracy < config.sft_target_accuracy:
        print0(f"Warm start: reached only {accuracy:.3f} < sft_target_accuracy={config.sft_target_accuracy} "
               f"after {step} steps; RL starts from there (raise sft_max_steps for more)")
    else:
        print0(f"Warm start: held-out accuracy {accuracy:.3f} after {step} steps ({seconds:.0f}s)")
    return step, accuracy, seconds
