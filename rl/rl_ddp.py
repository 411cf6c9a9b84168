"""Train a tiny GPT on arithmetic with RL: the entry point, for one process or many.

    python rl/rl_ddp.py --config_name AdderRLConfig                      # one process
    torchrun --standalone --nproc_per_node=2 rl/rl_ddp.py --config_name AdderRLConfig
    python rl/rl_ddp.py --config_name AdderRLConfig --debug --no_wandb   # under a minute
    python rl/rl_ddp.py --config_name MultiplierRLConfig --learning_rate=3e-4 --resume=never
    python rl/rl_ddp.py --help                                           # every field, with its reason

Flags: --config_name NAME, --debug (a tiny run for checking that everything works), --no_wandb,
--resume (default: continue from the newest snapshot in out_dir; --resume=never starts over,
--resume=PATH loads that file), and --KEY=VALUE (or --KEY VALUE) for any config field.

The story, top to bottom: parse and validate everything (before any collective, identically on
every rank), join the process group, build the model, warm start or resume, then the RL loop
(step, log, evaluate, snapshot), the final evaluation, cleanup.
"""

import json
import os
import sys
import time
from dataclasses import dataclass, fields

if __package__ in (None, ""):  # run as a script (python rl/rl_ddp.py): make the repo root importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import difflib
import math

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from configs import get_config_class  # noqa: F401  (the original's API: from rl.rl_ddp import get_config_class)
from configs.base import BaseRLConfig, ConfigError, field_type
from model.gpt import GPT, GPTConfig
from rl import dist
from rl.logger import make_logger
from rl.math_env import MathEnvironment
from rl.math_trainer import MathRLTrainer, TrainingError
from rl.run_control import GracefulStop, RunLock
from rl.snapshot import (SnapshotWriteError, check_compatible, load_snapshot, newest_valid_snapshot, prune_snapshots,
                         save_atomic, snapshot_steps)
from rl.warm_start import init_policy

FLAGS = ("config_name", "debug", "no_wandb", "resume", "help")


@dataclass
class CommandLine:
    config_name: str = "AdderRLConfig"
    debug: bool = False
    no_wandb: bool = False
    resume: str = ""  # "" = not given: auto, except under --debug where it means never
    help: bool = False
    overrides: dict = None


def parse_command_line(argv: list) -> CommandLine:
    """Split argv into the flags and raw --key=value overrides (typed later, per config class)."""
    cli, overrides, i = CommandLine(), {}, 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            cli.help = True
            i += 1
            continue
        if not arg.startswith("--") or arg == "--":
            raise ConfigError(f"unexpected argument {arg!r}; options look like --key=value (see --help)")
        key, has_value, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        if key in ("debug", "no_wandb"):
            if has_value:
                raise ConfigError(f"--{key} takes no value")
            setattr(cli, key, True)
        elif key == "resume":
            cli.resume = value if has_value else "auto"
        else:
            if not has_value:  # --key value
                if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                    raise ConfigError(f"--{key} needs a value, e.g. --{key}=VALUE")
                i += 1
                value = argv[i]
            if key == "config_name":
                cli.config_name = value
            else:
                overrides[key] = value
        i += 1
    cli.overrides = overrides
    return cli


def parse_value(name: str, kind: type, text: str):
    """Typed value of one --key=value override, or ConfigError saying what was expected."""
    if kind is bool:
        low = text.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"--{name} expects true or false, got {text!r}")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"--{name} expects an integer, got {text!r}") from None
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"--{name} expects a number, got {text!r}") from None
        if not math.isfinite(value):
            raise ConfigError(f"--{name} must be a finite number, got {text!r}")
        return value
    return text


def build_config(cli: CommandLine) -> BaseRLConfig:
    """Config class defaults, then --debug presets, then explicit overrides; validated and resolved."""
    cls = get_config_class(cli.config_name)
    kinds = {f.name: field_type(f) for f in fields(cls)}
    values = dict(cls.DEBUG_OVERRIDES) if cli.debug else {}
    for key, text in cli.overrides.items():
        if key not in kinds:
            close = difflib.get_close_matches(key, list(kinds) + list(FLAGS), n=1)
            hint = f"did you mean --{close[0]}? " if close else ""
            raise ConfigError(f"unknown option --{key}; {hint}(--help lists every option)")
        values[key] = parse_value(key, kinds[key], text)
    return cls(**values).get_args_ready(debug=cli.debug)


def print_help(cli: CommandLine):
    try:
        cls = get_config_class(cli.config_name)
    except ConfigError:
        cls = BaseRLConfig
    print(__doc__.strip().split("\n\n")[1])
    print(f"\nfields of {cls.__name__} (--KEY=VALUE; default shown):")
    docs = cls.field_docs()
    for f in fields(cls):
        print(f"  --{f.name}={getattr(cls, f.name)!r}\n      {docs.get(f.name, '')}")


def find_resume(cli: CommandLine, config: BaseRLConfig, print0):
    """(snapshot dict, path) to continue from, or (None, None) to start over."""
    mode = cli.resume or ("never" if cli.debug else "auto")
    if mode == "never" and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)) > 0:
        mode = "auto"  # torchrun restarted us after a failure: continue, whatever the first start said
    if mode == "never":
        return None, None
    if mode == "auto":
        snap, path = newest_valid_snapshot(config.out_dir, print0)
        if snap is None:
            return None, None
    else:
        path = mode
        if not os.path.isfile(path):
            raise ConfigError(f"--resume={path}: no such file (use --resume=never to start over)")
        try:
            snap = load_snapshot(path)
        except ConfigError as e:
            raise ConfigError(f"--resume: {e}; pass another file or --resume=never") from None
    if snap.get("kind") != "rl_snapshot":
        raise ConfigError(f"--resume={path} is not an RL snapshot; to start RL from its weights use --init_from={path}")
    check_compatible(snap, path, config.model_args(), config.task_args())
    return snap, path


def check_writable(out_dir: str):
    try:
        os.makedirs(out_dir, exist_ok=True)
        probe = os.path.join(out_dir, f".write_probe.{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise ConfigError(f"cannot write to out_dir {out_dir!r} ({e.strerror}); pass --out_dir=<a writable folder>") from None


def start_over(out_dir: str, print0):
    """A fresh run replaces the old one's snapshots and metrics (the cached warm start stays)."""
    old = snapshot_steps(out_dir)
    for _, path in old:
        os.remove(path)
    metrics = os.path.join(out_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    if old:
        print0(f"Starting over: removed {len(old)} old snapshot(s) from {out_dir}")


def truncate_metrics(out_dir: str, step: int):
    """Drop metric lines logged after the snapshot we resume from: they are about to be redone."""
    path = os.path.join(out_dir, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            kept = [line for line in f if json.loads(line)["step"] <= step]
        with open(path, "w") as f:
            f.writelines(kept)


def eval_metrics(result) -> dict:
    return {"eval/accuracy": result.accuracy, "eval/digit_accuracy": result.digit_accuracy}


def train(config: BaseRLConfig, cli: CommandLine, info: dist.DistInfo, snap, snap_path, stop: GracefulStop, print0) -> int:
    # ---- seed, model
    torch.manual_seed(config.seed)  # identical initial weights on every rank
    env = MathEnvironment(config.task, config.ndigit, config.reverse_answer, config.use_format, config.test_fraction)
    eval_a, eval_b = env.eval_operands(config.num_eval)
    model = GPT(GPTConfig(**config.model_args())).to(info.device)
    policy = DDP(model, device_ids=[info.local_rank] if info.device.type == "cuda" else None) if info.distributed else model
    print0(str(config))
    print0(f"{config.name}: {model.num_params() / 1e6:.2f}M parameters, {info.world_size} process(es) on "
           f"{info.device.type}, {torch.get_num_threads()} thread(s) each, out_dir={config.out_dir}")
    trainer = MathRLTrainer(config, env, policy, info, eval_a, eval_b)

    # ---- warm start or resume
    t_start = time.time()
    init_info = {}
    if snap is not None:
        trainer.load_state_dict(snap)
        print0(f"Resumed from {snap_path} at step {trainer.step}/{config.rl_train_steps}")
        if info.is_main:
            truncate_metrics(config.out_dir, trainer.step)
    else:
        if info.is_main:
            start_over(config.out_dir, print0)
        init_info = init_policy(config, env, policy, info, eval_a, eval_b, print0,
                                should_stop=lambda: dist.any_rank(stop.requested, info.device))
        if init_info is None:
            print0(f"Stopped by {stop.name} during the warm start; its progress is saved in "
                   f"{os.path.join(config.out_dir, 'warm_start_progress.pt')}; run the same command to continue")
            return 0
    logger = make_logger(config, info.is_main, not cli.no_wandb, snap.get("wandb_run_id") if snap else None, print0)
    if info.is_main:
        with open(os.path.join(config.out_dir, "config.json"), "w") as f:
            json.dump({"config_name": config.name, **config.to_dict()}, f, indent=2)

    def save_snapshot():
        """Rank 0 writes; every rank learns whether that worked, so a full disk stops all of them."""
        path, failure = os.path.join(config.out_dir, f"rl_snapshot_{trainer.step}.pt"), None
        if info.is_main:
            if not trainer.weights_are_finite():
                failure = "the weights are not finite; refusing to save them"
            else:
                try:
                    save_atomic({**trainer.state_dict(), "wandb_run_id": logger.run_id}, path)
                    prune_snapshots(config.out_dir, config.keep_snapshots)
                except OSError as e:
                    failure = (f"could not write {path} ({e.strerror or e}); the previous snapshot is intact: "
                               f"free some space and run the same command to continue")
        if dist.any_rank(failure is not None, info.device):
            raise SnapshotWriteError(failure or "rank 0 could not write a snapshot")
        return path

    def report_eval(result, prefix):
        print0(f"{prefix}{result.summary()}")
        for line in result.mistakes:
            print0(f"  {line}")

    start_accuracy = None
    if trainer.step == 0:
        result = trainer.evaluate()
        start_accuracy = result.accuracy
        report_eval(result, "RL starts from ")
        logger.log(eval_metrics(result), step=0)

    # ---- the RL loop
    result, first_step, train_seconds, t_rl = None, trainer.step, 0.0, time.time()
    bar = tqdm(total=config.rl_train_steps, initial=trainer.step, desc="RL", disable=not info.show_progress,
               dynamic_ncols=True)
    while trainer.step < config.rl_train_steps:
        metrics = trainer.train_step()
        step = trainer.step
        train_seconds += metrics["perf/step_seconds"]
        result = None
        if step % config.eval_interval == 0 or step == config.rl_train_steps:
            result = trainer.evaluate()
            metrics.update(eval_metrics(result))
        logger.log(metrics, step=step)
        bar.update(1)
        bar.set_postfix(reward=f"{metrics['train/avg_reward']:.3f}")
        if step % config.log_interval == 0 or result is not None:
            line = (f"Step {step}/{config.rl_train_steps} | Loss: {metrics['train/policy_loss']:.3f} | "
                    f"Acc: {metrics['train/accuracy']:.3f} | Reward: {metrics['train/avg_reward']:.3f} | "
                    f"LR: {metrics['train/lr']:.2e}")
            print0(line + (f" | Eval: {result.accuracy:.4f}" if result is not None else ""))
        if result is not None:
            report_eval(result, f"Step {step}: ")
        saved = step % config.save_interval == 0 or step == config.rl_train_steps
        if saved:
            save_snapshot()
        if step < config.rl_train_steps and dist.any_rank(stop.requested, info.device):
            path = save_snapshot() if not saved else os.path.join(config.out_dir, f"rl_snapshot_{step}.pt")
            bar.close()
            print0(f"Stopped by {stop.name or 'a signal on another rank'} after step {step}/{config.rl_train_steps}; "
                   f"snapshot {path}; run the same command to continue")
            logger.finish()
            return 0
    bar.close()

    # ---- final evaluation
    if result is None:
        result = trainer.evaluate()
    print0(f"Final held-out accuracy: {result.accuracy:.4f} ({result.num_problems} problems, greedy)")
    if info.is_main:  # what this invocation did, for rl/benchmark.py and for people
        samples = (trainer.step - first_step) * config.rl_batch_size * config.rl_rollout_size
        summary = {"config_name": config.name, "seed": config.seed, "start_accuracy": start_accuracy,
                   "final_accuracy": result.accuracy, "final_digit_accuracy": result.digit_accuracy,
                   "num_eval": result.num_problems, "rl_steps_run": trainer.step - first_step,
                   "rl_seconds": time.time() - t_rl, "rl_samples_per_second": samples / max(train_seconds, 1e-9),
                   "total_seconds": time.time() - t_start, "world_size": info.world_size, **init_info}
        with open(os.path.join(config.out_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
    logger.finish()
    return 0


def main(argv=None) -> int:
    # ---- config: everything validated before the first collective, the same way on every rank
    info = dist.read_env()

    def print0(*args, **kwargs):
        if info.rank == 0:
            tqdm.write(" ".join(str(a) for a in args), **kwargs)

    lock = None
    try:
        cli = parse_command_line(sys.argv[1:] if argv is None else argv)
        if cli.help:
            if info.rank == 0:
                print_help(cli)
            return 0
        config = build_config(cli)
        config.validate_world_size(info.world_size)
        try:
            device = dist.pick_device(config.device, info.local_rank)
            backend = dist.pick_backend(config.backend, device)
        except RuntimeError as e:
            raise ConfigError(str(e)) from None
        check_writable(config.out_dir)
        lock = RunLock(config.out_dir, info.rank)
        snap, snap_path = find_resume(cli, config, print0)
    except ConfigError as e:
        print0(f"error: {e}", file=sys.stderr)
        if lock is not None:
            lock.release()
        return 2

    # ---- distributed init, then the run; errors that stop a run cleanly are one line too
    stop = GracefulStop()
    info = dist.init(info, device, backend)
    try:
        code = train(config, cli, info, snap, snap_path, stop, print0)
        dist.barrier()
        return code
    except SnapshotWriteError as e:
        print0(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingError as e:
        print0(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        stop.restore()
        lock.release()
        dist.cleanup(info)


if __name__ == "__main__":
    sys.exit(main())
