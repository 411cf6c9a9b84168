"""Where RL starts from: a supervised warm start (cached), random weights, or a file.

A randomly initialised policy practically never writes an exactly right answer, so an
exact-match reward would be zero for every sample and REINFORCE would learn nothing. The warm
start trains the policy with teacher forcing on *training-split* problems (cross-entropy on the
answer tokens only, the shown work included) and stops as soon as greedy accuracy on the
*validation* split reaches `sft_target_accuracy`, leaving RL real work to do. It never looks at
the test split, which is kept for reporting. It is saved as out_dir/warm_start.pt together with
the settings that made it (`fingerprint`), and reused by later runs with the same settings: a run
that reuses it continues exactly as one that trained it.

With `sft_worked_examples` = K it sees the worked answers of only a fixed pool of K training pairs,
and with `sft_patience` it stops once validation accuracy stops improving: supervised training on
scarce worked examples for as long as it helps, which RL then continues on every training problem
from the final-answer reward alone.

On one CUDA device, `sft_cuda_graphs` replays each supervised step (forward, backward, clipping and AdamW) as
one captured CUDA graph (`GraphedStep`): a small model's step is otherwise bound by its kernel launches.

A long warm start saves its progress every `sft_save_interval` steps and when stopped to
out_dir/warm_start_progress.pt; the same command continues from there. Its problems and dropout
are functions of the step (rl/seeding.py), so a continued warm start equals an uninterrupted one.

With `sft_pad_ndigits` (the task of many lengths, rl/long_env.py) the warm start has a second phase:
once the one above is done on unpadded layouts (cached as ever in warm_start.pt; `sft_first_pad_share` pads a
share of its steps too, from the first check at `sft_first_pad_from` on), `sft_pad_steps` more
teacher-forced steps on the same lengths, some written wider with leading zeros, cached in
out_dir/warm_start_padded.pt, which RL then starts from. (Padded from random weights, the warm start did
not learn to add at all; padded after it, supervised steps on numbers of at most 10 digits carried
40-digit sums from 0.00 to 0.46: docs/results.md.) The second phase saves its progress likewise.

WarmStartSettings: the warm start's settings and their checks, one of the groups BaseRLConfig
(configs/base.py) composes. A `config` here is the resolved BaseRLConfig, read through its fields only,
so this file needs no import of the configs.
"""

import copy
import functools
import os
import time
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from tqdm import tqdm

from rl import dist, seeding
from rl.algorithms import answer_logits
from rl.dist import print0
from rl.errors import ConfigError, TrainingError
from rl.evaluate import evaluate
from rl.graphs import CapturedSteps, can_capture, portable
from rl.math_env import MathEnvironment
from rl.run_dir import padded_path, progress_path, warm_start_path
from rl.snapshot import INIT_FIX, check_compatible, load_snapshot, save_atomic, save_on_main
from rl.update import lr_lambda


@dataclass
class WarmStartSettings:
    """Where RL starts from, and the supervised warm start's settings."""
    init_from: str = "sft"
    """policy RL starts from: 'sft' (supervised warm start, cached in out_dir), 'scratch', or a file"""
    sft_max_steps: int = 1000
    """upper bound on supervised steps of the warm start (>= 0)"""
    sft_batch_size: int = 256
    """problems per supervised step (global, split across ranks) (> 0)"""
    sft_learning_rate: float = 1e-3
    """peak learning rate of the warm start (linear warmup, then constant unless sft_min_lr_ratio < 1) (> 0)"""
    sft_warmup_steps: int = 50
    """warm start steps of linear learning-rate warmup (>= 0)"""
    sft_min_lr_ratio: float = 1.0
    """after warmup the rate falls by a cosine to this fraction of the peak at sft_max_steps; 1.0 keeps it
    constant, as every short-number preset does (in [0, 1])"""
    sft_target_accuracy: float = 0.5
    """stop the warm start once validation accuracy reaches this (supervised steps climb 0.42 -> 0.58 in 10 steps
    here, far faster than RL, so a higher start saves RL steps; still at most 0.60) (in [0, 1])"""
    sft_eval_interval: int = 5
    """warm start steps between validation checks of the stopping rule (every step once past half the target) (> 0)"""
    sft_num_eval: int = 250
    """validation problems the stopping rule checks (the first of the validation set; fewer keeps it cheap) (> 0)"""
    sft_save_interval: int = 200
    """warm start steps between progress saves, so a crash or a stop loses at most this many (> 0)"""
    sft_worked_examples: int = 0
    """training pairs whose worked answers the warm start may see, a fixed draw from the train split shared by
    every seed (0: all of them); RL still trains on every training problem, from the final-answer reward only
    (docs/results.md "What RL adds") (>= 0)"""
    sft_patience: int = 0
    """stop the warm start once validation accuracy has not improved for this many steps: supervised training
    for as long as it helps (0: only sft_target_accuracy and sft_max_steps stop it) (>= 0)"""
    sft_pad_steps: int = 400
    """with sft_pad_ndigits: supervised steps on padded layouts after the warm start is done (a fresh optimizer,
    10 warmup steps, a cosine to sft_min_lr_ratio); about 9 minutes on the 2-core CPU (> 0)"""
    sft_seed: int = -1
    """the warm start's own seed, for its initial weights, problems and dropout (-1: seed): another warm start
    under the same RL draws, as `--seed=X --rl_train_steps=0` makes it (>= -1)"""
    sft_first_pad_share: float = 0.0
    """with sft_pad_ndigits: the share of the first phase's steps padded too (as the padded phase pads), so the warm
    start reads long layouts from its start (docs/results.md "Padding in the first phase"); 0 = none (in [0, 1])"""
    sft_first_pad_from: float = 0.0
    """with sft_first_pad_share: pad the first phase's steps only from the first validation check at or above this
    accuracy on, so it learns to add on its own layouts first; measured, padding that late changes little
    (docs/results.md "Padding from a check on"); 0 = from its first step (in [0, 1])"""

    def check_warm_start(self):
        if self.sft_seed < -1:
            raise ConfigError(f"sft_seed must be >= -1 (-1: the warm start uses seed), got {self.sft_seed}")
        if self.init_from not in ("sft", "scratch") and not os.path.isfile(self.init_from):
            raise ConfigError(f"init_from={self.init_from!r} is neither 'sft', 'scratch' nor an existing file")

    def check_warm_start_split(self, world_size: int):
        """The warm start's batches are global and split evenly across ranks, when it runs."""
        if self.init_from == "sft" and self.sft_max_steps and self.sft_batch_size % world_size != 0:
            raise ConfigError(f"sft_batch_size={self.sft_batch_size} is not divisible by the {world_size} processes; "
                              f"use a multiple of {world_size}")

    def check_worked_examples(self, env: MathEnvironment):
        """At most the train split's pairs, counted where the space is enumerated (a larger space's train split
        holds millions of pairs)."""
        pairs = env.split_size("train") if self.init_from == "sft" and self.sft_worked_examples else None
        if pairs is not None and self.sft_worked_examples > pairs:
            raise ConfigError(f"sft_worked_examples={self.sft_worked_examples} but the train split has only "
                              f"{pairs} pairs; set it to at most {pairs} (0 for all)")

    def warm_start_unused(self, settings: dict) -> list:
        """[(settings, whether nothing reads them here, whose they are)]: with no warm start to run (init_from
        is not sft, or sft_max_steps=0) nothing reads its settings; dropout neither: RL samples and updates in
        eval mode."""
        return [(WARM_START_FIELDS, self.init_from != "sft", "belongs to the warm start (init_from=sft)"),
                # A file's model_args carry its dropout and must match the config's (rl/snapshot.py), so
                # only a start from scratch ignores it.
                (("dropout",), self.init_from == "scratch",
                 "applies only to the warm start, init_from=sft (RL samples and updates in eval mode)"),
                (WARM_START_FIELDS[1:] + ("dropout",), self.sft_max_steps == 0,
                 "needs sft_max_steps > 0 (no warm start step runs)"),
                (("sft_pad_steps", "sft_first_pad_share"), not getattr(self, "sft_pad_ndigits", 0),
                 "belongs to sft_pad_ndigits (rl/long_env.py)"),
                (("sft_first_pad_from",), not self.sft_first_pad_share, "belongs to sft_first_pad_share"),
                (("sft_cuda_graphs",), self.init_from != "sft" or self.sft_max_steps == 0,
                 "belongs to the warm start's steps (init_from=sft, sft_max_steps > 0)")]


WARM_START_FIELDS = tuple(f.name for f in fields(WarmStartSettings) if f.name != "init_from")  # the sft_ ones

# Bump when a code change alters what a warm start with the same settings computes, so caches
# made by the old code are not reused. 2: one optimizer for both phases (no decay on LayerNorm
# gains), the validation split. 3: checks every step from half the target. 4: coupled ids of "+" and "="
# (rl/long_env.py). 5: the warm start's position offsets of the task of many lengths reach RL's ids.
# (sft_first_pad_share and sft_first_pad_from enter the fingerprint only when set: no bump.)
WARM_START_VERSION = 5
PADDED_WARMUP = 10  # the padded phase's warmup steps: the supervised arm's (rl/tools/benchmark.py)
FINGERPRINT_KEYS = ("sft_max_steps", "sft_batch_size", "sft_learning_rate", "sft_warmup_steps",
                    "sft_target_accuracy", "sft_eval_interval", "sft_num_eval", "weight_decay", "adam_beta1",
                    "adam_beta2", "grad_clip")


PAD_KEYS = ("sft_pad_ndigits", "pad_share", "sft_pad_steps")  # the padded phase's (and pad_share RL's too)


def fingerprint(config, world_size: int) -> dict:
    """Everything that determines the warm start (its first phase, unpadded); a cached one is reused only if
    it all matches. The world size is part of it: each rank draws its own share of every batch. The two
    settings of a scarce warm start, a decaying rate and a padded first phase enter only when set, so the caches
    made before they existed stay valid; other padding (RL's, or the padded phase's) not at all, so one warm start
    serves them all."""
    when_set = {k: getattr(config, k) for k in ("sft_worked_examples", "sft_patience") if getattr(config, k)}
    if config.sft_min_lr_ratio != 1.0:  # (likewise only when set)
        when_set["sft_min_lr_ratio"] = config.sft_min_lr_ratio
    if config.sft_first_pad_share:  # (and then the widths its steps are padded to)
        when_set.update(sft_first_pad_share=config.sft_first_pad_share, sft_pad_ndigits=config.sft_pad_ndigits)
    if config.sft_first_pad_from:
        when_set["sft_first_pad_from"] = config.sft_first_pad_from
    task = {k: v for k, v in config.task_args().items() if k not in ("rl_pad_ndigits", *PAD_KEYS)}
    return {"version": WARM_START_VERSION, "world_size": world_size, **task, **config.model_args(),
            "seed": warm_start_seed(config), **{k: getattr(config, k) for k in FINGERPRINT_KEYS}, **when_set}


def warm_start_seed(config) -> int:
    """The seed of everything the warm start draws: sft_seed, or seed (-1). A warm start made by --seed=X
    equals one made by --sft_seed=X under any seed, and its cache serves both (same fingerprint)."""
    return config.seed if config.sft_seed == -1 else config.sft_seed


def padded_fingerprint(config, world_size: int) -> dict:
    """What determines the padded phase: the warm start it continues, and its own settings."""
    return {**fingerprint(config, world_size), **{k: getattr(config, k) for k in PAD_KEYS}}


def start_path(config) -> str:
    """The file of the weights RL starts from with init_from=sft: the padded phase's with sft_pad_ndigits."""
    return padded_path(config.out_dir) if getattr(config, "sft_pad_ndigits", 0) else warm_start_path(config.out_dir)


@functools.lru_cache(maxsize=4)
def worked_examples(env: MathEnvironment, k: int):
    """The fixed pool: the first k pairs of the train split's fixed order (so 256 of them are among 1024's)."""
    return env.eval_operands(k, "train")


def training_pairs(config, env: MathEnvironment, n: int, rng):
    """n supervised training problems (a, b): uniform over the train split, or over its fixed pool of
    sft_worked_examples pairs when that is set (the only worked answers a scarce warm start sees)."""
    k = config.sft_worked_examples
    if not k:
        return env.sample_operands(n, rng)
    pool_a, pool_b = worked_examples(env, k)  # all k of them: get_args_ready refuses a pool the split cannot fill
    i = rng.integers(0, k, size=n)
    return pool_a[i], pool_b[i]


def supervised_loss(policy, env: MathEnvironment, a, b, device, rng=None) -> torch.Tensor:
    """Teacher-forced cross-entropy on the answer tokens of the problems (a, b) (int arrays (B,), or
    digit arrays for rl/long_env.py), at the position ids the environment gives (its random offsets
    drawn from rng; none for MathEnvironment: the model's own)."""
    return batch_loss(policy, supervised_batch(env, a, b, device, rng), env.prompt_len)


def supervised_batch(env: MathEnvironment, a, b, device, rng=None) -> tuple:
    """(sequences (B, P + A), answers (B, A), position ids (B, P + A) or None) of the problems (a, b) on device."""
    prompts, answers = env.encode(a, b)
    pos = env.position_ids(len(prompts), rng)
    return (torch.cat([prompts, answers], dim=1).to(device), answers.to(device),
            None if pos is None else pos.to(device))


def batch_loss(policy, batch: tuple, prompt_len: int) -> torch.Tensor:
    sequences, answers, pos = batch
    logits = answer_logits(policy, sequences, prompt_len, pos=pos)  # (B, A, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), answers.reshape(-1))


def init_policy(config, env: MathEnvironment, policy, info: dist.DistInfo,
                should_stop=lambda: False):
    """Load or train the weights RL starts from into `policy` (possibly DDP-wrapped); returns what
    to log about it, or None if `should_stop()` interrupted the warm start (its progress is saved)."""
    model = dist.unwrap(policy)
    if config.init_from == "scratch":
        print0("Init: random weights (init_from=scratch); expect near-zero exact-match reward")
        return {"init_from": "scratch"}
    if config.init_from != "sft":
        snap = load_snapshot(config.init_from)
        check_compatible(snap, config.init_from, config.model_args(), config.task_args(), INIT_FIX)
        model.load_state_dict(snap["model"])
        print0(f"Init: weights from {config.init_from}")
        return {"init_from": config.init_from}
    padded = getattr(config, "sft_pad_ndigits", 0)
    first_env = env.with_pad_share(config.sft_first_pad_share) if padded else env  # (share 0: unpadded)
    done = first_phase(config, first_env, policy, info, should_stop)
    if done is None or not padded:
        return done
    return padded_phase(config, env, policy, info, should_stop, done)


def first_phase(config, env: MathEnvironment, policy, info: dist.DistInfo, should_stop) -> dict:
    """The warm start as out_dir/warm_start.pt caches it: reused when its fingerprint matches, else trained."""
    model = dist.unwrap(policy)
    path = warm_start_path(config.out_dir)
    if os.path.isfile(path):
        snap = load_snapshot(path)
        if snap.get("fingerprint") == fingerprint(config, info.world_size):
            model.load_state_dict(snap["model"])
            print0(f"Warm start: reusing {path} ({snap['steps']} supervised steps, "
                   f"{snap['seconds']:.0f}s when made, validation accuracy {snap['accuracy']:.3f})")
            return first_record(snap, cached=True)
        print0(f"Warm start: {path} was made with other settings; training a new one")

    if warm_start_seed(config) != config.seed:  # its own initial weights (progress, if any, then replaces them)
        torch.manual_seed(config.sft_seed)  # as MathRLTrainer.build seeds them for --seed=sft_seed
        model.load_state_dict(type(model)(model.config).state_dict())
    outcome = train_warm_start(config, env, policy, info, should_stop)
    if outcome is None:
        return None
    steps, accuracy, seconds = outcome

    def write():  # the progress goes only once the warm start it led to is on disk
        save_atomic({"kind": "warm_start", "model": model.state_dict(), "model_args": config.model_args(),
                     "task": config.task_args(), "fingerprint": fingerprint(config, info.world_size),
                     "steps": steps, "accuracy": accuracy, "seconds": seconds}, path)
        if os.path.exists(progress_path(config.out_dir)):
            os.remove(progress_path(config.out_dir))
    save_on_main(write, path, "its last saved progress, if any, is intact", info)
    return first_record({"steps": steps, "seconds": seconds, "accuracy": accuracy}, cached=False)


def first_record(snap: dict, *, cached: bool) -> dict:
    """What a run records of its warm start (its summary): the steps, seconds and accuracy of snap, a warm start
    file or what it will hold, and whether this run reused it."""
    return {"init_from": "sft", "warm_start_cached": cached, "warm_start_steps": snap["steps"],
            "warm_start_seconds": snap["seconds"], "warm_start_validation": snap["accuracy"]}


def with_padded(first: dict, snap: dict, cached: bool) -> dict:
    """first's record (first_record) with the padded phase's steps and seconds (snap: its file, or what it will
    hold) added up; warm_start_spent is what this invocation trained (the run's own clock counts only that)."""
    return {**first, "warm_start_cached": first["warm_start_cached"] and cached,
            "warm_start_steps": first["warm_start_steps"] + snap["steps"],
            "warm_start_seconds": first["warm_start_seconds"] + snap["seconds"],
            "warm_start_validation": snap["accuracy"], "warm_start_padded_steps": snap["steps"],
            "warm_start_padded_cached": cached,
            "warm_start_spent": (0.0 if first["warm_start_cached"] else first["warm_start_seconds"])
                                + (0.0 if cached else snap["seconds"])}


def cached_start(config, world_size: int) -> dict:
    """The record a run that reuses out_dir's cached warm start gives (init_policy's), from the files alone: for a
    run continued from a snapshot, whose summary says nothing of where it began. {} when a file is missing or was
    made with other settings."""
    files = [(warm_start_path(config.out_dir), fingerprint(config, world_size))]
    if getattr(config, "sft_pad_ndigits", 0):
        files.append((padded_path(config.out_dir), padded_fingerprint(config, world_size)))
    snaps = [load_snapshot(path) if os.path.isfile(path) else {} for path, _ in files]
    if any(snap.get("fingerprint") != key for snap, (_, key) in zip(snaps, files)):
        return {}
    record = first_record(snaps[0], cached=True)
    return with_padded(record, snaps[1], True) if len(snaps) == 2 else record


def padded_phase(config, env, policy, info: dist.DistInfo, should_stop, first: dict) -> dict:
    """The warm start's second phase (sft_pad_ndigits; the module docstring): sft_pad_steps teacher-forced steps
    on the first phase's weights, env padding a share pad_share of them, cached in out_dir/warm_start_padded.pt.
    Returns first's record with the two phases' steps and seconds added up, or None if should_stop() said so."""
    c, model = config, dist.unwrap(policy)
    path, key = padded_path(c.out_dir), padded_fingerprint(c, info.world_size)
    if os.path.isfile(path):
        snap = load_snapshot(path)
        if snap.get("fingerprint") == key:
            model.load_state_dict(snap["model"])
            print0(f"Warm start: reusing {path} (padded, {snap['steps']} supervised steps, {snap['seconds']:.0f}s "
                   f"when made, validation accuracy {snap['accuracy']:.3f})")
            return with_padded(first, snap, True)
        print0(f"Warm start: {path} was made with other settings; training a new one")
    optimizer, scheduler, state, t0, save = start_phase(c, model, info, PADDED_WARMUP, c.sft_pad_steps, key=key)
    print0(f"Warm start: {c.sft_pad_steps} supervised steps more, a share {c.pad_share} of them written at widths up "
           f"to {c.sft_pad_ndigits} digits (sft_pad_ndigits)")
    bar = tqdm(total=c.sft_pad_steps, initial=state["step"], desc="warm start, padded", disable=not info.show_progress,
               dynamic_ncols=True)
    model.train()
    while state["step"] < c.sft_pad_steps:
        # its steps' problems are those of the steps after the first phase's last: none repeats one of its draws
        loss = supervised_step(policy, env, optimizer, c, info, first["warm_start_steps"] + state["step"])
        scheduler.step()
        state["step"] += 1
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if not info.show_progress and state["step"] % (25 * c.sft_eval_interval) == 0:  # a log file's progress
            print0(f"Warm start, padded: step {state['step']}/{c.sft_pad_steps} | Loss: {loss.item():.3f}")
        if state["step"] % c.sft_save_interval == 0 and state["step"] < c.sft_pad_steps:
            save()
        if state["step"] < c.sft_pad_steps and should_stop():
            bar.close()
            save()
            return None
    bar.close()
    optimizer.zero_grad(set_to_none=True)
    done = save_padded(c, model, env, info, key, steps=state["step"], seconds=time.time() - t0)
    return with_padded(first, done, False)


def save_padded(c, model, env, info: dist.DistInfo, key: dict, *, steps: int, seconds: float) -> dict:
    """The padded phase done: its validation check (as the first phase's), and its file, which then replaces
    its progress; returns its steps, seconds and accuracy."""
    val_env = env.unpadded()  # checked as the first phase checks: at the range's longest width, unpadded
    val_a, val_b = val_env.eval_operands(c.sft_num_eval, "validation")
    snap = {"steps": steps, "seconds": seconds, "accuracy": evaluate(
        model, val_env, val_a, val_b, info, batch_size=c.eval_batch_size, num_mistakes=0, split="validation").accuracy}
    print0(f"Warm start: padded, validation accuracy {snap['accuracy']:.3f} after {steps} more steps ({seconds:.0f}s)")
    path = padded_path(c.out_dir)

    def write():
        save_atomic({"kind": "warm_start", "model": model.state_dict(), "model_args": c.model_args(),
                     "task": c.task_args(), "fingerprint": key, **snap}, path)
        if os.path.exists(progress_path(c.out_dir)):
            os.remove(progress_path(c.out_dir))
    save_on_main(write, path, "its last saved progress, if any, is intact", info)
    return snap


def check_cache(config):
    """Refuse, before start, a cached warm start (out_dir/warm_start.pt, or its padded phase) that cannot be read:
    one line saying so and how to get a new one, rather than a traceback mid-run."""
    for path in (warm_start_path(config.out_dir), start_path(config)):  # (its padded phase's too)
        if config.init_from == "sft" and os.path.exists(path):
            try:
                load_snapshot(path)
            except ConfigError as e:
                raise ConfigError(f"cached warm start: {e}; delete it to train a new one") from None



def restore_progress(config, model, optimizer, scheduler, world_size: int, *, key=None) -> dict:
    """Load the saved progress of this very warm start (same fingerprint, or `key`: the padded phase's), if any,
    into the model, optimizer and scheduler; returns its step, last validation accuracy and seconds (zeros if
    none)."""
    path = progress_path(config.out_dir)
    fresh = {"step": 0, "accuracy": 0.0, "seconds": 0.0, "best": 0.0, "best_step": 0, "best_model": None,
             "pad_from_step": -1}  # (-1: not padding yet, sft_first_pad_from)
    if not os.path.isfile(path):
        return fresh
    try:
        progress = load_snapshot(path)
    except ConfigError as e:
        print0(f"Warm start: ignoring {path}: {e}")
        return fresh
    if progress.get("fingerprint") != (key or fingerprint(config, world_size)):
        print0(f"Warm start: {path} was made with other settings; starting the warm start afresh")
        return fresh
    model.load_state_dict(progress["model"])
    optimizer.load_state_dict(progress["optimizer"])
    scheduler.load_state_dict(progress["scheduler"])
    print0(f"Warm start: continuing from step {progress['step']} ({path})")
    return {k: progress.get(k, v) for k, v in fresh.items()}  # files from before patience lack best, and so on


def save_progress(config, model, optimizer, scheduler, state: dict, info: dist.DistInfo, *, key=None):
    path = progress_path(config.out_dir)
    if not all(torch.isfinite(p).all() for p in model.parameters()):  # the same weights on every rank
        raise TrainingError(f"the warm start's weights are not finite at step {state['step']}, so they are not saved "
                            f"(the previous progress is intact); lower sft_learning_rate or keep grad_clip on")
    save_on_main(lambda: save_atomic({"kind": "warm_start_progress", "model": model.state_dict(),
                                      "model_args": config.model_args(), "optimizer": portable(optimizer.state_dict()),
                                      "scheduler": scheduler.state_dict(),
                                      "fingerprint": key or fingerprint(config, info.world_size), **state}, path),
                 path, "the previous progress is intact", info)


def teacher_forced_step(policy, env: MathEnvironment, optimizer, a, b, device, *, grad_clip: float = 0.0, rng=None,
                        graphed=None):
    """One optimizer step on supervised_loss of the problems (a, b) (position offsets drawn from rng), the
    gradient's norm clipped to grad_clip (0: not clipped); returns the loss. The one supervised step of the
    project: the warm start, the benchmark's matched-compute baseline, the answer-format curves and the tests use it.
    graphed: a GraphedStep of this optimizer (the warm start's under sft_cuda_graphs), which takes the step instead."""
    batch = supervised_batch(env, a, b, device, rng)
    if graphed is not None:
        return graphed(policy, batch, env.prompt_len)
    optimizer.zero_grad(set_to_none=True)
    return backward_and_step(policy, batch, env.prompt_len, optimizer, grad_clip)


def backward_and_step(policy, batch: tuple, prompt_len: int, optimizer, grad_clip: float) -> torch.Tensor:
    """batch_loss, its backward, the gradient's norm clipped to grad_clip (0: not), and the optimizer's step:
    nothing read on the host, so that a CUDA graph can capture it (GraphedStep)."""
    loss = batch_loss(policy, batch, prompt_len)
    loss.backward()
    if grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(dist.unwrap(policy).parameters(), grad_clip)
    optimizer.step()
    return loss


class GraphedStep(CapturedSteps):
    """teacher_forced_step as one replayed CUDA graph (rl/graphs.py): the forward, backward, clipping and AdamW step of
    a batch of fixed shapes in one launch instead of some 300, which bound a small model's warm-start step on a GPU
    (17-25 ms on an H200 with its checks: results/gpu/session5/). One CUDA device, no dropout, one width."""

    def __init__(self, optimizer, grad_clip: float):
        super().__init__(optimizer)
        self.grad_clip = grad_clip

    def __call__(self, policy, batch: tuple, prompt_len: int) -> torch.Tensor:
        return self.step(lambda inputs, _: backward_and_step(policy, inputs, prompt_len, self.optimizer,
                                                             self.grad_clip), batch)


def supervised_step(policy, env: MathEnvironment, optimizer, config, info: dist.DistInfo, step: int, *, graphed=None):
    """One teacher-forced step on this rank's share of the step's training problems (graphed: teacher_forced_step's);
    returns the loss."""
    seed = warm_start_seed(config)
    if config.dropout:  # (torch.manual_seed reseeds every CUDA device too: 1.5 ms a step on an H200's host)
        seeding.seed_dropout(seed, info.rank, step)
    seeding.set_step_width(env, seed, step, seeding.SFT_WIDTHS)  # (the task of many lengths only)
    problems = seeding.numpy_rng(seed, info.rank, step, seeding.SFT_PROBLEMS)
    a, b = training_pairs(config, env, config.sft_batch_size // info.world_size, problems)
    positions = seeding.numpy_rng(seed, info.rank, step, seeding.POSITIONS)  # nothing drawn for today's tasks
    return teacher_forced_step(policy, env, optimizer, a, b, info.device, grad_clip=config.grad_clip, rng=positions,
                               graphed=graphed)


def warm_start_schedule(optimizer, c, warmup: int, total: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over `warmup` steps, then constant, or a cosine to sft_min_lr_ratio of the peak at `total`:
    RL's schedule (rl/update.py), which at a ratio of 1 is exactly min(1, (s + 1) / warmup)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_lambda(s, warmup, total, c.sft_min_lr_ratio))


def start_phase(c, model, info: dist.DistInfo, warmup: int, total: int, *, key=None):
    """A warm-start phase's AdamW at sft_learning_rate and its schedule (warm_start_schedule), with the phase's
    saved progress restored into them (`key`: the padded phase's fingerprint, as restore_progress); returns
    (optimizer, scheduler, state, t0, save), t0 counting the restored seconds and save() saving the progress."""
    optimizer = model.configure_optimizer(lr=c.sft_learning_rate, weight_decay=c.weight_decay,
                                          betas=(c.adam_beta1, c.adam_beta2))
    scheduler = warm_start_schedule(optimizer, c, warmup, total)
    state = restore_progress(c, model, optimizer, scheduler, info.world_size, key=key)
    t0 = time.time() - state["seconds"]
    save = lambda: save_progress(c, model, optimizer, scheduler, {**state, "seconds": time.time() - t0}, info, key=key)
    return optimizer, scheduler, state, t0, save


def train_warm_start(config, env: MathEnvironment, policy, info: dist.DistInfo,
                     should_stop=lambda: False):
    """Teacher-forced training on the train split until the validation check reaches the target.
    Returns (steps taken, last validation accuracy, seconds), or None if should_stop() said so (the
    progress is saved then, and continued by the next call with the same settings)."""
    c, model = config, dist.unwrap(policy)
    optimizer, scheduler, state, t0, save = start_phase(c, model, info, max(c.sft_warmup_steps, 1), c.sft_max_steps)
    graphed = GraphedStep(optimizer, c.grad_clip) if graphs_apply(c, env, info) else None
    # checked at one width, the range's longest, whatever width the training steps set (rl/long_env.py)
    val_env = copy.copy(env)
    val_a, val_b = val_env.eval_operands(c.sft_num_eval, "validation")
    pool = f"{c.sft_worked_examples} worked examples of the" if c.sft_worked_examples else "the"
    until = f"it has not improved for {c.sft_patience} steps or " if c.sft_patience else ""
    print0(f"Warm start: supervised training on {pool} train split until {until}validation accuracy >= "
           f"{c.sft_target_accuracy} (checked on {len(val_a)} validation problems every {c.sft_eval_interval} "
           f"steps{'' if c.sft_patience else ', every step from half the target'}; at most {c.sft_max_steps} steps)")
    bar = tqdm(total=c.sft_max_steps, initial=state["step"], desc="warm start", disable=not info.show_progress,
               dynamic_ncols=True)
    plain = env.unpadded() if c.sft_first_pad_from else env  # (the steps' layouts until padding begins)
    model.train()
    while state["step"] < c.sft_max_steps:
        loss = supervised_step(policy, step_env(c, env, plain, state), optimizer, c, info, state["step"],
                               graphed=graphed)
        scheduler.step()
        state["step"] += 1
        step = state["step"]
        bar.update(1)
        if step % c.sft_save_interval == 0:
            save()
        # Near the target the climb is steep (0.42 -> 0.58 in 10 adder steps): check every step from half of it,
        # so the warm start stops just past the target rather than up to an interval beyond it.
        # With patience, the target is not what stops it, so there is nothing to stop just past.
        near = not c.sft_patience and state["accuracy"] >= c.sft_target_accuracy / 2
        if step % c.sft_eval_interval == 0 or near or step == c.sft_max_steps:
            state["accuracy"] = evaluate(model, val_env, val_a, val_b, info, batch_size=c.eval_batch_size,
                                         num_mistakes=0, split="validation").accuracy
            bar.set_postfix(loss=f"{loss.item():.3f}", val_acc=f"{state['accuracy']:.3f}")
            if not info.show_progress and step % (5 * c.sft_eval_interval) == 0:  # a log file's progress
                print0(f"Warm start step {step}/{c.sft_max_steps} | Loss: {loss.item():.3f} | "
                       f"Validation: {state['accuracy']:.3f}")
            if check_done(c, model, state, step):
                break
        # Only now, after the step's check: a stop before it would skip a check that was due, and the
        # continued run (which starts at the next step) would never make it.
        if should_stop():
            bar.close()
            save()
            return None
    bar.close()
    optimizer.zero_grad(set_to_none=True)  # leave no gradients behind: RL must start as from the cached file
    return report(c, state["step"], state["accuracy"], time.time() - t0, state["best_step"])


def graphs_apply(c, env, info: dist.DistInfo) -> bool:
    """Whether the warm start's steps replay a CUDA graph (GraphedStep): asked for, without dropout (a graph would
    replay one step's draws), where a step can be captured at all (rl/graphs.py can_capture)."""
    return c.sft_cuda_graphs and not c.dropout and can_capture(env, info)


def step_env(c, env, plain, state: dict):
    """The first phase's environment for this step: `plain` (unpadded) until a validation check has reached
    sft_first_pad_from, `env` (padding a share sft_first_pad_share of steps) from then on, whatever comes after.
    Records that step in state["pad_from_step"] (saved with the progress: later checks cannot tell it)."""
    if state["pad_from_step"] < 0 and state["accuracy"] >= c.sft_first_pad_from:
        state["pad_from_step"] = state["step"]
        if c.sft_first_pad_from:
            print0(f"Warm start: validation {state['accuracy']:.3f} >= sft_first_pad_from={c.sft_first_pad_from}; "
                   f"padding a share {c.sft_first_pad_share} of the steps from step {state['step']} on")
    return env if state["pad_from_step"] >= 0 else plain


def check_done(c, model, state: dict, step: int) -> bool:
    """After a validation check: keep the best weights when patience may need them, and say whether the
    warm start is done: the target reached, or patience run out, and then the best weights are back
    (supervised training for as long as it helped, not sft_patience steps past it)."""
    # the first check counts as the best so far, whatever its accuracy (0 too), so there are weights to go back to
    if state["accuracy"] > state["best"] or (c.sft_patience and state["best_model"] is None):
        state["best"], state["best_step"] = state["accuracy"], step
        if c.sft_patience:  # a copy per improvement; saved with the progress, so a continued run has it too
            state["best_model"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if state["accuracy"] >= c.sft_target_accuracy:
        return True
    if 0 < c.sft_patience <= step - state["best_step"]:
        model.load_state_dict(state["best_model"])
        state["accuracy"] = state["best"]
        return True
    return False


def report(config, step: int, accuracy: float, seconds: float, best_step: int):
    if 0 < config.sft_patience <= step - best_step:
        print0(f"Warm start: no better validation accuracy for {step - best_step} steps (sft_patience="
               f"{config.sft_patience}): back to step {best_step}'s weights, validation {accuracy:.3f} ({step} steps, "
               f"{seconds:.0f}s)")
    elif accuracy < config.sft_target_accuracy:
        print0(f"Warm start: reached only {accuracy:.3f} < sft_target_accuracy={config.sft_target_accuracy} on "
               f"validation after {step} steps; RL starts from there (raise sft_max_steps for more)")
    else:
        print0(f"Warm start: validation accuracy {accuracy:.3f} after {step} steps ({seconds:.0f}s)")
    return step, accuracy, seconds
