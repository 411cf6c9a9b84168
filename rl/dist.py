"""Process-group plumbing shared by the entry script, the warm start and the trainer.

One code path serves `python rl/rl_ddp.py` (world size 1, no process group) and
`torchrun --nproc_per_node=N rl/rl_ddp.py` (RANK, LOCAL_RANK and WORLD_SIZE in the environment).
"""

import os
import sys
import time
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist
from tqdm import tqdm

from rl.run_control import watch_launcher


@dataclass
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def show_progress(self) -> bool:
        """Progress bars on rank 0 in a terminal; in a log file they are only noise."""
        return self.is_main and sys.stderr.isatty()


def read_env() -> DistInfo:
    """Ranks as torchrun sets them (world size 1 when run by plain python); no collective yet.
    ValueError (one line) for an environment torchrun would not make: RANK, LOCAL_RANK and
    WORLD_SIZE not integers, not all set, or out of range, or several processes with no
    MASTER_ADDR and MASTER_PORT (torch's env:// rendezvous would fail, or wait, with a traceback)."""
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE")  # torchrun sets all three, plain python none
    fix = "launch with torchrun, or unset RANK, LOCAL_RANK and WORLD_SIZE"
    given = {name: os.environ[name] for name in names if name in os.environ}
    if not given:
        return DistInfo()
    missing = [name for name in names if name not in given]
    if missing:
        raise ValueError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} set without "
                         f"{' and '.join(missing)} (torchrun sets all three); {fix}")
    values = {}
    for name, text in given.items():
        try:
            values[name] = int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r} is not an integer; {fix}") from None
    rank, local_rank, world_size = (values[name] for name in names)
    if world_size < 1:
        raise ValueError(f"WORLD_SIZE={world_size} must be at least 1; {fix}")
    for name, value in (("RANK", rank), ("LOCAL_RANK", local_rank)):
        if not 0 <= value < world_size:
            raise ValueError(f"{name}={value} is outside [0, WORLD_SIZE={world_size}); {fix}")
    if world_size > 1:
        absent = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
        if absent:
            verb = "is" if len(absent) == 1 else "are"
            raise ValueError(f"WORLD_SIZE={world_size} but {' and '.join(absent)} {verb} not set, so the processes "
                             f"cannot meet; {fix}")
        port = os.environ["MASTER_PORT"]
        if not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"MASTER_PORT={port!r} is not a port number (1 to 65535); {fix}")
    return DistInfo(rank, local_rank, world_size)


def check_device_and_backend(device: str, backend: str):
    """ValueError (one line) for a device or backend name no machine runs (checked with the config;
    pick_device_and_backend checks what this machine can run when the run starts)."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if backend not in ("auto", "gloo", "nccl"):
        raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}")


def pick_device_and_backend(device: str, backend: str, local_rank: int):
    """(torch.device, backend name) for the config's 'auto' / 'cpu' / 'cuda' and 'auto' / 'gloo' /
    'nccl'; ValueError (one line) for a combination this machine cannot run."""
    check_device_and_backend(device, backend)
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but CUDA is not available here; use --device=cpu")
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    picked = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if backend == "nccl" and not use_cuda:
        raise ValueError("backend='nccl' needs CUDA, which this run does not use; use --backend=gloo (or auto)")
    if backend == "auto":
        backend = "nccl" if use_cuda else "gloo"
    return picked, backend


def clock(device: torch.device) -> float:
    """time.perf_counter() once the device has finished its queued work: a stage timer that tells the truth
    on CUDA, where work is queued and a timer without the sync charges it to whichever stage syncs next.
    (A sync per stage, a few a step: microseconds against a step's milliseconds.)"""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def num_threads() -> int:
    return torch.get_num_threads()


BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86's two, and ARM's (its "Features" line)


def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo"):
    """Whether this CPU has bf16 instructions, by the flags Linux lists for it (x86's "flags", ARM's "Features"):
    without them torch's bf16 matmuls run emulated, many times slower than fp32's. None where nothing says
    (no such file, as on macOS, or no flags line in it)."""
    try:
        with open(cpuinfo) as f:
            line = next((l for l in f if l.split(":", 1)[0].strip() in ("flags", "Features")), None)
    except OSError:
        return None
    return None if line is None else any(flag in BF16_FLAGS for flag in line.split(":", 1)[1].split())


def init(info: DistInfo, device: torch.device, backend: str) -> DistInfo:
    """Join the process group when there is more than one process; returns info with its device."""
    watch_launcher()  # (the entry script started it before its imports; this is for main() run in process)
    info = replace(info, device=device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if info.distributed:
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
        if restart is not None and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
            # Workers share the torchrun agent's store across restarts; without a prefix per
            # attempt, a restarted rank can read the address a dead worker published and wait
            # on it until gloo times out. Keys of attempt k live under attempt_k/.
            agent_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), info.world_size,
                                        is_master=False)
            store = dist.PrefixStore(f"mathrl/attempt_{restart}", agent_store)
            dist.init_process_group(backend=backend, store=store, rank=info.rank, world_size=info.world_size)
        else:
            dist.init_process_group(backend=backend)
    return info


def in_process_group() -> bool:
    """Whether this process is one of several (torch.distributed started): else every collective is a no-op."""
    return dist.is_available() and dist.is_initialized()


def any_rank(flag: bool, device) -> bool:
    """True on every rank if `flag` is True on any rank: how ranks agree to skip or to stop."""
    if not in_process_group():
        return bool(flag)  # one process: nothing to agree on, and no trip through the device
    return all_reduce_sum(torch.tensor([float(flag)], device=device)).item() > 0


def cleanup(info: DistInfo):
    if info.distributed and dist.is_initialized():
        dist.destroy_process_group()


def reduce_sums(values: dict, device) -> dict:
    """Sum each named number over ranks in one all-reduce: {name: float or one-element tensor} -> {name: float}.
    One read from the device, whatever the number of tensors (float() of each would be a host sync each on CUDA);
    the same float64 values as float() of each. A name may be a tensor on one rank and a float on another: each
    name keeps its place in the order of `values`, the same on every rank, so the sums match name to name."""
    host = torch.tensor([0.0 if torch.is_tensor(v) else float(v) for v in values.values()], dtype=torch.float64)
    host = host.to(device, non_blocking=True)  # the floats in one copy, not one each
    column = [v.to(device, torch.float64).reshape(()) if torch.is_tensor(v) else host[i]
              for i, v in enumerate(values.values())]
    return dict(zip(values, all_reduce_sum(torch.stack(column)).tolist())) if column else {}


def print0(*args, every_rank: bool = False, **kwargs):
    """print on rank 0 only (through tqdm, so a progress bar is not torn); RANK as torchrun sets it.
    every_rank: print on any rank, for an error about the environment itself (read_env), whose RANK
    cannot be trusted to pick the one that prints."""
    try:
        rank = int(os.environ.get("RANK", 0))
    except ValueError:  # read_env refuses it; printing here must not fail first
        rank = 0
    if every_rank or rank == 0:
        tqdm.write(" ".join(str(a) for a in args), **kwargs)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over ranks (a no-op for one process); returns a new tensor."""
    t = t.clone()
    if in_process_group():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def sum_on_host(t: torch.Tensor, device) -> torch.Tensor:
    """A tensor on the host summed over ranks (through `device`, where the backend needs it), back on the host;
    one process: t itself, with no trip through the device."""
    if not in_process_group():
        return t
    return all_reduce_sum(t.to(device)).cpu()


def all_gather_rows(t: torch.Tensor) -> torch.Tensor:
    """Every rank's rows of t (n_rank, ...) concatenated in rank order, the same on every rank (t
    itself for one process). Ranks may hold different numbers of rows."""
    if not in_process_group():
        return t
    world = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.int64, device=t.device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([len(t)], dtype=torch.int64, device=t.device))
    sizes = [int(n) for n in sizes]
    padded = torch.zeros((max(sizes), *t.shape[1:]), dtype=t.dtype, device=t.device)
    padded[:len(t)] = t
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)  # all_gather needs equal shapes: pad to the longest, then trim
    return torch.cat([part[:n] for part, n in zip(parts, sizes)])


def barrier():
    if in_process_group():
        dist.barrier()


def wrap(model: torch.nn.Module, info: DistInfo) -> torch.nn.Module:
    """The model in a DistributedDataParallel wrapper when there is more than one process."""
    if not info.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP
    return DDP(model, device_ids=[info.local_rank] if info.device.type == "cuda" else None)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The plain module inside a DistributedDataParallel wrapper (or the model itself)."""
    return getattr(model, "module", model)
