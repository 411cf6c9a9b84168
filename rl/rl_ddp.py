"""Train a tiny GPT on arithmetic with RL: the entry point, for one process or many.

    python rl/rl_ddp.py --config_name AdderRLConfig                      # one process
    torchrun --standalone --nproc_per_node=2 rl/rl_ddp.py --config_name AdderRLConfig
    python rl/rl_ddp.py --config_name AdderRLConfig --debug --no_wandb   # under a minute
    python rl/rl_ddp.py --config_name MultiplierRLConfig --learning_rate=3e-4 --resume=never
    python rl/rl_ddp.py --help                                           # every field, with its reason

The story, top to bottom: parse and validate everything (before any collective, identically on
every rank: configs/cli.py), join the process group, build the model and trainer, warm start or
resume, then the RL loop (step, log, evaluate, snapshot), the final evaluation, cleanup.
"""

import os
import sys
import time

if __package__ in (None, ""):  # run as a script (python rl/rl_ddp.py): make the repo root importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Under torchrun, from this process's first moment: a worker ends itself once its launcher is gone. The imports
# below take seconds, and a launcher killed during them would otherwise leave this worker training on, unwatched.
from rl.run_control import watch_launcher  # noqa: E402  (no torch in it)

watch_launcher()

from tqdm import tqdm  # noqa: E402

# The one door to the configs for the rest of rl/: the measuring tools (rl/tools/) take a config class by name
# (get_config_class) or a resolved config from command-line arguments (config_from_args) here.
from configs import get_config_class
from configs.base import BaseRLConfig
from configs.cli import CommandLine, build_config, parse_command_line, print_help
from configs.gpu import GPU_PRESETS, cpu_preset, gpu_fields, gpu_preset_for
from rl import dist
from rl.dist import print0
from rl.errors import ConfigError, MetricsError, SnapshotWriteError, TrainingError
from rl.logger import make_logger
from rl.math_trainer import MathRLTrainer
from rl.run_control import GracefulStop, RunLock, check_writable
from rl.run_dir import (config_path, metrics_path, progress_path, read_config, read_metrics, remove_snapshots,
                        remove_temporaries, set_aside, summary_path, truncate_metrics, write_json)
from rl.snapshot import Resume, check_init_from, find_resume, save_on_main, save_step
from rl.warm_start import check_cache, init_policy


def config_from_args(argv: list) -> BaseRLConfig:
    """The config a command line of this script resolves to (--config_name, --debug, --KEY=VALUE), validated
    as a run validates it before it starts."""
    return build_config(parse_command_line(argv))


def check_start(argv: list, world_size: int = 1) -> BaseRLConfig:
    """What a run of this command line checks before it starts, for `world_size` processes: the config, the
    batch split across the processes, the device and backend (ConfigError: one line)."""
    cli = parse_command_line(argv)
    config = build_config(cli)
    config.validate_world_size(world_size)
    pick_device(config, cli, 0)
    return config


def pick_device(config: BaseRLConfig, cli: CommandLine, local_rank: int):
    """(torch.device, backend) this run uses, or ConfigError (one line): a GPU preset where CUDA is not
    available names the CPU preset it was made from."""
    try:
        return dist.pick_device_and_backend(config.device, config.backend, local_rank)
    except ValueError as e:
        preset = type(config)  # (device='cuda' fails only where CUDA is not available)
        if preset in GPU_PRESETS and config.device == "cuda" and "device" not in cli.overrides:
            raise ConfigError(f"{config.name} is sized for a GPU and CUDA is not available here; run "
                              f"{cpu_preset(preset).__name__} on the CPU, or pass --device=cpu to run {config.name} "
                              f"here anyway") from None
        raise ConfigError(str(e)) from None  # one line and exit code 2, like all bad input


def evaluate_and_report(trainer: MathRLTrainer, metrics: dict, prefix: str):
    """Evaluate on the test split (what is reported, with a few mistakes printed) and on the
    validation split (what choices look at); add both to `metrics`; return the test result."""
    # on every rank: each scores its share of the set and the counts are all-reduced (rl/evaluate.py)
    result, validation = trainer.accuracy("test"), trainer.accuracy("validation")
    metrics.update({**result.metrics("eval"), **validation.metrics("val")})
    print0(f"{prefix}{result.summary()}; validation {validation.accuracy:.4f}")
    for line in result.mistakes:
        print0(f"  {line}")
    return result


def console_line(metrics: dict, config: BaseRLConfig) -> str:
    line = (f"Step {metrics['train/step']}/{config.rl_train_steps} | Loss: {metrics['train/policy_loss']:.3f} | "
            f"Acc: {metrics['train/accuracy']:.3f} | Reward: {metrics['train/avg_reward']:.3f} | "
            f"LR: {metrics['train/lr']:.2e}")
    return line + (f" | Eval: {metrics['eval/accuracy']:.4f}" if "eval/accuracy" in metrics else "")


def prepare_folder(config: BaseRLConfig, resume: Resume, never: bool):
    """Rank 0, once every check has passed: make out_dir hold only the history this run continues
    (rl/run_dir.py's invariants 3-5). The one place that moves or deletes run files."""
    out = config.out_dir
    for name in remove_temporaries(out):
        print0(f"Removed {name}, a temporary file a stopped run left (never read)")
    if resume.snap is not None:
        # Another future than the one continued here: snapshots after it, or another folder's history, or
        # lines logged under settings that now change. Set aside whole, so nothing is lost or resumed by mistake.
        if resume.later or resume.elsewhere or (resume.changes and last_logged_step(out) > resume.step):
            folder = set_aside(out, resume.step, resume.later)
            print0(f"Set aside {len(resume.later)} snapshot(s), the summary and a copy of the metrics in {folder}: "
                   f"they belong to another continuation than this one from step {resume.step}")
        truncate_metrics(out, -1 if resume.elsewhere else resume.step, warn=print0)  # the later lines are redone
        return
    if never:  # the user asked to start over: the old snapshots, metrics and summary go (the warm start stays)
        if remove_snapshots(out):
            print0(f"Starting over: removed the old snapshots from {out}")
        truncate_metrics(out, warn=print0)
        if os.path.exists(summary_path(out)):
            os.remove(summary_path(out))
        return
    # No snapshot yet. Lines of this same config (a run stopped before its first snapshot) are redone
    # exactly; another run's lines are kept aside, since nobody asked to delete them.
    if last_logged_step(out) >= 0 and not same_config(out, config):
        folder = set_aside(out, 0, [])
        print0(f"Set aside the metrics and summary of another run, found with no snapshot, in {folder}")
    truncate_metrics(out, warn=print0)


def last_logged_step(out_dir: str) -> int:
    rows = read_metrics(out_dir, warn=lambda line: None)  # (the truncation that follows says it)
    return rows[-1]["step"] if rows else -1


def same_config(out_dir: str, config: BaseRLConfig) -> bool:
    try:
        saved = read_config(out_dir)
    except (OSError, ValueError):
        return False
    saved.pop("changed_on_resume", None)
    return saved == {"config_name": config.name, **config.to_dict()}


def where_rl_starts(trainer: MathRLTrainer, resume: Resume, never: bool, stop: GracefulStop):
    """Load the snapshot to continue from, or start over from the warm start (trained, or cached in
    out_dir); returns what to log about it, or None if a stop signal interrupted the warm start."""
    config, info = trainer.config, trainer.info
    save_on_main(lambda: prepare_folder(config, resume, never), config.out_dir, "nothing in it was lost", info)
    if resume.snap is not None:  # every rank read the same file itself (find_resume ran on each): nothing to broadcast
        trainer.load_state_dict(resume.snap)  # the schedule follows this config from there (rl/update.py)
        print0(f"Resumed from {resume.path} at step {trainer.step}/{config.rl_train_steps}")
        if resume.changes:
            print0("Changed from this step on (recorded in config.json): " + ", ".join(
                f"{k} {old!r} -> {new!r}" for k, (old, new) in resume.changes.items()))
        return {}
    # asked after each warm-start step and agreed over ranks, so every rank leaves after the same step
    return init_policy(config, trainer.sft_env, trainer.policy, info,
                       should_stop=lambda: dist.any_rank(stop.requested, info.device))


def how_it_runs(trainer: MathRLTrainer) -> str:
    """The start line's word on how the model computes: its precision and what replays graphs or compiles."""
    c, cuda = trainer.config, trainer.info.device.type == "cuda"
    return ("bf16 autocast" if trainer.model.autocast_dtype else "fp32") + (
        ", CUDA graphs" if c.cuda_graphs and cuda else "") + (
        ", graphed RL steps" if trainer.updater.graphed else "") + (", torch.compile" if c.compile else "")


def gpu_hint(config_name: str, overrides=()) -> str:
    """What a run of a CPU preset on a GPU says about the GPU preset made from it ("": it has none, or the command
    line already sets one of the settings that preset changes: whoever wrote it chose them)."""
    gpu = gpu_preset_for(config_name)
    if gpu is None or set(overrides) & (gpu_fields(gpu) - {"device"}):
        return ""
    return (f"{config_name}'s steps are sized for a CPU; on a GPU, {gpu.__name__} has its settings chosen there "
            f"(configs/gpu.py, README \"On a GPU\")")


def bf16_note(device_type: str, bf16: bool, cpu_has_bf16) -> str:
    """What a bf16 run on a CPU without bf16 instructions (cpu_has_bf16 False: rl/dist.py) says at its start ("": any
    other run). It runs, as asked: its numbers are right, only slow."""
    if device_type != "cpu" or not bf16 or cpu_has_bf16 is not False:
        return ""
    return (f"note: this CPU lists no bf16 instructions ({', '.join(dist.BF16_FLAGS)}), so torch emulates bf16 "
            "matmuls: on a 2-core AMD EPYC the adder's update took 26x fp32's seconds, its sampling 4.4x "
            "(results/study/cpu-bf16/); --precision=auto runs fp32 on the CPU")


def start_notes(trainer: MathRLTrainer, cli: CommandLine) -> list:
    """The lines after the start line that say how this run could go faster: a CPU preset on a GPU, bf16 emulated."""
    device = trainer.info.device.type
    notes = [gpu_hint(trainer.config.name, cli.overrides) if device == "cuda" else "",
             bf16_note(device, trainer.model.autocast_dtype is not None, dist.cpu_has_bf16())]
    return [note for note in notes if note]


def train(config: BaseRLConfig, cli: CommandLine, info: dist.DistInfo, resume: Resume, stop: GracefulStop) -> int:
    # ---- model and trainer, then where RL starts: the snapshot to continue, or the warm start (or its cache)
    t_start = time.time()
    trainer = MathRLTrainer.build(config, info)
    t_built = time.time()  # (on a GPU this includes the device's start-up)
    print0(str(config))
    print0(f"{config.name}: {trainer.model.num_params() / 1e6:.2f}M parameters, {info.world_size} process(es) on "
           f"{info.device.type} ({how_it_runs(trainer)}), {dist.num_threads()} thread(s) each, "
           f"out_dir={config.out_dir}")
    for note in start_notes(trainer, cli):
        print0(note)

    snap = resume.snap  # its wandb run id lets a restarted run log on to the same wandb run
    init_info = where_rl_starts(trainer, resume, cli.resume_mode == "never", stop)
    if init_info is None:  # no RL state to snapshot yet: the warm start saved its own progress
        print0(f"Stopped by {stop.name} during the warm start; its progress is saved in "
               f"{progress_path(config.out_dir)}; run the same command to continue")
        return 0
    logger = make_logger(config, info.is_main, not cli.no_wandb, snap.get("wandb_run_id") if snap else None)
    save, log = writers(trainer, resume, logger)
    # a resumed run logged its step 0 already, and has no start accuracy in its summary
    start = evaluate_start(trainer, log, t_start, t_built, init_info) if trainer.step == 0 else None

    # ---- the RL loop: a step, its metrics, an evaluation every eval_interval steps and a snapshot
    # every save_interval; a stop signal on any rank ends every rank after the same step, saved
    totals = dict(first_step=trainer.step, train_seconds=0.0, answers=0.0, t_rl=time.time())
    bar = tqdm(total=config.rl_train_steps, initial=trainer.step, desc="RL", disable=not info.show_progress,
               dynamic_ncols=True)
    result = None  # the last evaluation, reused at the end when the last step made one
    while trainer.step < config.rl_train_steps and not trainer.target_held():  # from a snapshot's step on a resume
        metrics, step = trainer.train_step(), trainer.step  # sample, score, advantages, update: rl/math_trainer.py
        totals["train_seconds"] += metrics["perf/step_seconds"]  # steps only: evaluation and saving excluded
        totals["answers"] += metrics["train/answers_generated"]  # refills included: what sampling cost
        due = step % config.eval_interval == 0 or step == config.rl_train_steps  # the last step's: the summary's
        result = evaluate_and_report(trainer, metrics, f"Step {step}: ") if due else None
        if result is not None and trainer.observe_validation(metrics["val/accuracy"]):  # on validation only
            print0(f"RL stops at step {step}/{config.rl_train_steps}: {target_line(config)}")
        last = step == config.rl_train_steps or trainer.target_held()
        metrics["perf/run_seconds"] = time.time() - t_start  # the clock the benchmark's time-to-accuracy reads
        log(metrics, step)  # rank 0 only; the other ranks' logger drops it
        bar.update(1)
        if step % config.log_interval == 0 or result is not None:
            print0(console_line(metrics, config))
        saved = step % config.save_interval == 0 or last  # a finished run's final weights are on disk
        path = save() if saved else None  # every rank joins: a full disk on rank 0 stops them all
        if not last and dist.any_rank(stop.requested, info.device):  # any rank's signal stops all, here
            path = path or save()  # a stop is never more than this step away from its snapshot
            bar.close()
            print0(f"Stopped by {stop.name or 'a signal on another rank'} after step {step}/{config.rl_train_steps}; "
                   f"snapshot {path}; run the same command to continue")
            logger.finish()
            return 0
    bar.close()

    # ---- final evaluation, and what this invocation did (for rl/tools/benchmark.py and for people)
    result = result or evaluate_and_report(trainer, {}, "Final: ")  # None only if no step ran (resumed at the end)
    print0(f"Final held-out accuracy: {result.accuracy:.4f} ({result.num_problems} problems, greedy)")
    write_summary(trainer, result, start, {**totals, "t_start": t_start}, init_info)
    logger.finish()
    return 0


def evaluate_start(trainer: MathRLTrainer, log, t_start: float, t_built: float, init_info: dict):
    """The evaluation RL starts from, logged as step 0 with where the run's clock went until then."""
    t0, metrics = time.time(), {}
    start = evaluate_and_report(trainer, metrics, "RL starts from ")
    now = time.time()
    warm = init_info.get("warm_start_spent",  # (the padded phase's record says; a copy: none)
                         0.0 if init_info.get("warm_start_cached") else init_info.get("warm_start_seconds", 0.0))
    spent = {"perf/build_seconds": t_built - t_start, "perf/warm_start_seconds": warm,
             "perf/start_eval_seconds": now - t0, "perf/run_seconds": now - t_start}
    print0(f"RL starts {now - t_start:.1f} s into the run: model {t_built - t_start:.1f} s, warm start {warm:.1f} s, "
           f"this evaluation {now - t0:.1f} s")
    log({**metrics, **spent}, 0)
    return start


def target_line(config: BaseRLConfig) -> str:
    return (f"validation accuracy has held rl_target_accuracy={config.rl_target_accuracy} at "
            f"{config.rl_target_evals} evaluation(s) in a row")


def writers(trainer: MathRLTrainer, resume: Resume, logger):
    """save() a snapshot and log(metrics, step), after writing config.json. Each write is rank 0's, and
    every rank learns if it failed (a full disk): all stop with one line (rl/snapshot.py save_on_main)."""
    config, info, out = trainer.config, trainer.info, trainer.config.out_dir
    # every setting a resume changed, at the step it changed (rl/snapshot.py RESUMABLE): what ran, in full
    history = (resume.snap or {}).get("changed_on_resume", []) + (
        [{"step": trainer.step, **{k: list(v) for k, v in resume.changes.items()}}] if resume.changes else [])
    resolved = {"config_name": config.name, **config.to_dict(), **({"changed_on_resume": history} if history else {})}
    save_on_main(lambda: write_json(config_path(out), resolved, unless_equal=True), config_path(out),
                 "the snapshots are intact", info)  # beside the metrics, so the tools read what actually ran
    save = lambda: save_step(trainer, {"wandb_run_id": logger.run_id, "changed_on_resume": history},
                             config.keep_snapshots, info)
    log = lambda metrics, step: save_on_main(lambda: logger.log(metrics, step=step), metrics_path(out),
                                             "the snapshots are intact", info)
    return save, log


def write_summary(trainer: MathRLTrainer, result, start, totals: dict, init_info: dict):
    config = trainer.config
    # About this invocation: a resumed run counts only its own steps, seconds and answers, and max()
    # keeps one that ran no step (resumed at its end) from dividing by zero.
    summary = {"config_name": config.name, "seed": config.seed, "world_size": trainer.info.world_size,
               "start_accuracy": start.accuracy if start else None, "final_accuracy": result.accuracy,
               "final_digit_accuracy": result.digit_accuracy, "final_steps_accuracy": result.steps_accuracy,
               "num_eval": result.num_problems,
               **({"final_accuracy_by_length": {str(k): v for k, v in result.by_length.items()}}
                  if result.by_length else {}), "rl_steps_run": trainer.step - totals["first_step"],
               "rl_seconds": time.time() - totals["t_rl"], "rl_train_seconds": totals["train_seconds"],
               "rl_answers_generated": totals["answers"],
               "rl_samples_per_second": totals["answers"] / max(totals["train_seconds"], 1e-9),
               "total_seconds": time.time() - totals["t_start"], **init_info}
    path = summary_path(config.out_dir)
    save_on_main(lambda: write_json(path, summary), path, "the final snapshot is written", trainer.info)


def main(argv=None) -> int:
    # ---- config: everything validated before the first collective, the same way on every rank
    info = lock = None  # lock: released below if a check after taking it fails
    try:
        try:  # torchrun's environment only: no process group until every check has passed
            info = dist.read_env()
        except ValueError as e:
            raise ConfigError(str(e)) from None
        cli = parse_command_line(sys.argv[1:] if argv is None else argv)
        if cli.help:
            get_config_class(cli.config_name)  # on every rank: an unknown name is bad input everywhere (exit 2)
            if info.is_main:
                try:
                    print_help(cli)
                except BrokenPipeError:  # `--help | head` closed the pipe: what was wanted was read
                    sys.stdout = None  # (nothing more to flush at exit)
            return 0
        config = build_config(cli)
        config.validate_world_size(info.world_size)
        device, backend = pick_device(config, cli, info.local_rank)
        check_writable(config.out_dir)  # first: the lock below is a file in out_dir
        lock = RunLock(config.out_dir, info.rank)  # before any snapshot is read: another run may be writing them
        resume = find_resume(cli.resume_mode, config)
        check_init_from(config)
        if resume.snap is None:  # a resumed run never reads the cached warm start
            check_cache(config)
        try:  # a line damaged where no crash damages one: refused before anything is moved or deleted
            read_metrics(config.out_dir, warn=lambda line: None)  # (a torn last line is said when it is dropped)
        except MetricsError as e:
            raise ConfigError(str(e)) from None
    except ConfigError as e:
        print0(f"error: {e}", file=sys.stderr, every_rank=info is None)  # a refused environment names no rank 0
        if lock is not None:
            lock.release()
        return 2

    # ---- distributed init, then the run; errors that stop a run cleanly are one line too
    stop = GracefulStop()  # from here a signal only sets a flag, which the loop reads between steps
    info = dist.init(info, device, backend)  # the first collective: every rank got here with valid input
    try:
        code = train(config, cli, info, resume, stop)
        dist.barrier()  # every rank is done before any tears the process group down (cleanup below)
        return code
    except SnapshotWriteError as e:
        print0(f"error: {e}", file=sys.stderr)
        return 2  # a file of the run folder not written (a full disk, or weights not finite); the old one is intact
    except TrainingError as e:
        print0(f"error: {e}", file=sys.stderr)
        return 1  # the run's own failure: non-finite numbers (max_bad_steps skipped steps in a row, or an evaluation)
    finally:  # on every way out: main() also runs in-process (the tests), and the next call needs these free
        stop.restore()
        lock.release()
        dist.cleanup(info)


if __name__ == "__main__":
    code = main()
    if "TORCHELASTIC_RUN_ID" in os.environ:
        # A torchrun worker whose run is over (its files written and closed, the process group destroyed) ends
        # here, before the interpreter's teardown: there gloo's threads could still hold tensors and abort the
        # process now and then (SIGABRT, "terminate called without an active exception"), failing a run that
        # finished (about 1 two-process run in 50 on the 2-core CPU).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
