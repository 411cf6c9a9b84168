"""Shared by the tests: the real script in a subprocess (or its main() in a forked process), a trainer in-process,
gradients at each optimizer step, state comparison, and the host's reads of what the device computed (DeviceReads)."""

import atexit
import os
import shutil
import subprocess
import tempfile
import time
import traceback
import weakref
from collections import Counter
from pathlib import Path

import torch
import torch.multiprocessing as mp
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten

from configs import get_config_class
from rl.math_trainer import MathRLTrainer
from rl.run_dir import read_metrics
from rl.tools import launch

REPO = Path(launch.REPO)
# A tiny model and task so each run takes seconds; digit_match gives a random policy a reward
# signal, so updates really change the weights.
TINY = dict(n_layer=1, n_embed=32, n_head=2, ndigit=2, init_from="scratch", rewards="digit_match:1.0",
            learning_rate=1e-3, rl_batch_size=16, rl_rollout_size=4, num_eval=100, warmup_steps=2)
TINY_ARGS = [f"--{k}={v}" for k, v in TINY.items()]


def args_with(args: list, **overrides) -> list:
    """args with each --KEY=VALUE of overrides in place of any --KEY it held (an option may be given
    once: configs/cli.py refuses a repeated one)."""
    kept = [a for a in args if a.split("=", 1)[0][2:] not in overrides]
    return kept + [f"--{k}={v}" for k, v in overrides.items()]


def threads_of(torchrun: int) -> int:
    """A run's threads a process: torchrun's processes one each, one process the suite's (all the cores)."""
    return 1 if torchrun else torch.get_num_threads()


def run(args, torchrun=0, check=True, env=None, timeout=300):
    """The entry script to its end, on threads_of(torchrun) threads a process; AssertionError with its console if
    it failed."""
    threads = threads_of(torchrun)
    env = None if env is None else {**env, "OMP_NUM_THREADS": str(threads)}
    proc = launch.run(args, nproc=torchrun or 1, threads=threads, check=False, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


_forked = []


def run_main(args, env=None, check=True) -> subprocess.CompletedProcess:
    """What `python rl/rl_ddp.py ARGS` runs after its imports, main(ARGS), in a process forked from a server that
    imported them once (tests/crash_run.py): its exit code, stdout and stderr in a fraction of a second rather than
    the 2-3 s of a new interpreter. env: the process's whole environment (default: the script's, script_env());
    check: as run's."""
    code, stdout, stderr = forked_runner().run(args, env=env or script_env())
    if check and code != 0:
        raise AssertionError(f"exit {code}\n{stdout}\n{stderr}")
    return subprocess.CompletedProcess(["rl/rl_ddp.py", *args], code, stdout, stderr)


def start_main(args):
    """run_main's process started, not waited for: a multiprocessing.Process (kill() sends SIGKILL, then join())."""
    return forked_runner().start(args, env=script_env())


def forked_runner():
    """The suite's one tests/crash_run.py Runner, started with the first process it forks."""
    if not _forked:
        import crash_run
        consoles = tempfile.mkdtemp(prefix="mathrl-forked-")
        atexit.register(shutil.rmtree, consoles, True)
        _forked.append(crash_run.Runner(consoles))
    return _forked[0]


def run_ranks(fn, args: tuple, nprocs: int = 2):
    """fn(rank, *args) in nprocs processes to their end, as torch.multiprocessing.spawn runs them, but forked from
    tests/crash_run.py's server, which imported torch, the library and torch._dynamo (DDP's constructor imports it,
    1.6 s) once: each process starts in a fraction of a second, not a new interpreter's 4-5 s."""
    import crash_run
    crash_run.forkserver()
    mp.start_processes(fn, args=args, nprocs=nprocs, join=True, start_method="forkserver")


def end_spawned_worker():
    """End a torch.multiprocessing worker whose work is done (its files written, its process group destroyed), as
    rl/rl_ddp.py's torchrun workers end: before the interpreter's teardown, where gloo's threads could abort it now
    and then (SIGABRT, "terminate called without an active exception")."""
    os._exit(0)


def script_env():
    return launch.script_env(threads=1)


def start(args, torchrun=0, max_restarts=0):
    """The entry script started, not waited for; on the threads run gives it."""
    return launch.start(args, nproc=torchrun or 1, max_restarts=max_restarts, threads=threads_of(torchrun))


def wait_for(path: Path, proc=None, timeout=120):
    """Until path exists; AssertionError if proc (a Popen, or start_main's Process) ends first, or at the timeout."""
    forked = not hasattr(proc, "poll")
    t0 = time.time()
    while not path.exists():
        code = None if proc is None else proc.exitcode if forked else proc.poll()
        if code is not None:
            console = [open(f"{proc.console}.{s}").read() for s in ("out", "err")] if forked else proc.communicate()
            raise AssertionError(f"process ended (exit {code}) before {path} appeared:\n{console}")
        if time.time() - t0 > timeout:
            raise AssertionError(f"{path} did not appear within {timeout}s")
        time.sleep(0.005)


def rl_seconds(out_dir) -> float:
    """A finished run's seconds from its first logged row (RL's start) to its last, on the run's own clock."""
    clock = [row["perf/run_seconds"] for row in read_metrics(str(out_dir))]
    return clock[-1] - clock[0]


def metrics(out_dir):
    """Logged metrics without timings (those differ between any two runs)."""
    rows = read_metrics(str(out_dir))
    return [{k: v for k, v in row.items() if not k.startswith("perf/")} for row in rows]


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same_state(a: dict, b: dict):
    """Model, optimizer and scheduler tensors bit for bit (and the critic's and the reference's, when
    there are any), and the counters."""
    assert a.keys() == b.keys()
    for models in ("model", "critic", "ref_model"):
        if models in a:
            assert a[models].keys() == b[models].keys()
            for name in a[models]:
                assert torch.equal(a[models][name], b[models][name]), f"{models} tensor {name} differs"
    for optimizer in ("optimizer", "critic_optimizer"):
        if optimizer in a:
            sa, sb = a[optimizer]["state"], b[optimizer]["state"]
            assert sa.keys() == sb.keys()
            for i in sa:
                for k in sa[i]:
                    assert torch.equal(torch.as_tensor(sa[i][k]), torch.as_tensor(sb[i][k])), \
                        f"{optimizer} state {i}.{k} differs"
    for key in ("scheduler", "baseline", "step", "bad_steps_in_a_row", "num_skipped_steps", "critic_scheduler"):
        assert a.get(key) == b.get(key), key
    assert a["problem_sampler"].keys() == b["problem_sampler"].keys()
    for key, value in a["problem_sampler"].items():  # the problem selection state, tensor for tensor
        other = b["problem_sampler"][key]
        assert torch.equal(value, other) if torch.is_tensor(value) else value == other, f"problem_sampler {key} differs"


def make_config(config_name="AdderRLConfig", **overrides):
    return get_config_class(config_name)(**{**TINY, **overrides}).get_args_ready()


def make_trainer(config_name="AdderRLConfig", info=None, **overrides):
    """A trainer built the way rl_ddp.py builds one, on the tiny settings."""
    return MathRLTrainer.build(make_config(config_name, **overrides), info)


def fresh_trainer(**overrides):
    """A trainer of the same config whose weights are another seed's: whatever a resumed run needs
    must then come from the snapshot it loads."""
    trainer = make_trainer(**overrides)
    trainer.model.load_state_dict(make_trainer(**{**overrides, "seed": 999}).model.state_dict())
    return trainer


def critic_of(trainer):
    """The critic network of a ppo_critic trainer (None before its first step, and for the others)."""
    learner = getattr(trainer.objective, "critic", None)
    return learner.module if learner is not None else None


def capture_gradients(trainer, on_step=None):
    """Record every parameter's gradient at each optimizer step of `trainer` (after clipping,
    before AdamW touches the weights): returns the list the steps append to. on_step(index), if
    given, runs at the same moment, while the weights are those the gradient was taken at."""
    grads = []

    def record(optimizer, args, kwargs):
        if on_step is not None:
            on_step(len(grads))
        params = [p for learner in trainer.learners for p in learner.module.parameters()]
        grads.append([p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params])
    trainer.actor.optimizer.register_step_pre_hook(record)
    return grads


def assert_grads_close(actual: list, expected: list, rtol=1e-4):
    """Two lists of per-parameter gradients agree: for each parameter the largest difference is at
    most rtol times the largest entry of the expected gradient (a uniform scale error of 2 is 1.0)."""
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        err = (a - e).abs().max().item() / max(e.abs().max().item(), 1e-12)
        assert err <= rtol, f"parameter {i}: relative error {err:.2e}"


class DeviceReads(TorchDispatchMode):
    """Counts the host's reads of values the device computed, on any device (on CUDA each read is a host sync):
    .item(), float(), int(), bool(), .tolist(), .numpy(), .cpu(), a boolean mask's index, an op whose output size
    depends on values. A tensor is the device's when its storage was written by an op with a device input, the
    given modules' parameters and buffers being the first, or when it was moved with .to(device): what CUDA would
    hold. Host copies (.cpu()) are the host's again."""
    READ_METHODS = ("item", "__float__", "__int__", "__bool__", "__index__", "tolist", "numpy")
    SIZE_FROM_VALUES = ("nonzero", "masked_select", "unique", "_unique2", "unique_consecutive", "repeat_interleave")

    def __init__(self, *modules):
        super().__init__()
        self.storages, self.sites = {}, Counter()
        self.mark(t for m in modules for t in (*m.parameters(), *m.buffers()))

    def mark(self, tensors):
        for t in tensors:
            s = t.untyped_storage()
            self.storages[id(s)] = weakref.ref(s, lambda _, key=id(s): self.storages.pop(key, None))

    def marked(self, t) -> bool:
        s = t.untyped_storage()
        ref = self.storages.get(id(s))
        return ref is not None and ref() is s

    def read(self, what):
        frames = [f for f in traceback.extract_stack()[:-2] if "/rl/" in f.filename or "/model/" in f.filename]
        where = f" at {'/'.join(frames[-1].filename.rsplit('/', 2)[-2:])}:{frames[-1].lineno}" if frames else ""
        self.sites[what + where] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        flat = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
        from_device = any(self.marked(t) for t in flat)
        name = func.overloadpacket.__name__
        masks = args[1] if name in ("index", "index_put", "index_put_") else ()
        if any(t is not None and t.dtype == torch.bool and self.marked(t) for t in masks):
            self.read("a boolean mask's index")
        elif from_device and name in self.SIZE_FROM_VALUES and func._overloadname != "self_int":  # int repeats: known
            self.read(name)
        out = func(*args, **(kwargs or {}))
        if from_device:
            self.mark(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
        return out

    def __enter__(self):
        originals = {m: getattr(torch.Tensor, m) for m in (*self.READ_METHODS, "cpu", "to")}
        self.originals = originals

        def reader(name):
            def method(t, *args, **kwargs):
                if self.marked(t):
                    self.read(name)
                return originals[name](t, *args, **kwargs)
            return method

        def cpu(t, *args, **kwargs):  # a host copy: the host's
            if not self.marked(t):
                return originals["cpu"](t, *args, **kwargs)
            self.read("cpu")
            with _disable_current_modes():
                return t.detach().clone()

        def to(t, *args, **kwargs):  # to a device: the device's (on the CPU, the same tensor: copied, then marked)
            moved = originals["to"](t, *args, **kwargs)
            if any(isinstance(a, (torch.device, str)) for a in (*args, kwargs.get("device"))) and not self.marked(t):
                with _disable_current_modes():
                    moved = moved.clone() if moved is t else moved
                self.mark([moved])
            return moved

        for name in self.READ_METHODS:
            setattr(torch.Tensor, name, reader(name))
        torch.Tensor.cpu, torch.Tensor.to = cpu, to
        return super().__enter__()

    def __exit__(self, *exc):
        for name, method in self.originals.items():
            setattr(torch.Tensor, name, method)
        return super().__exit__(*exc)
