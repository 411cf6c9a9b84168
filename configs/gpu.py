"""The GPU presets: AdderGPUConfig, MultiplierGPUConfig and Multiplier3GPUConfig, each a CPU preset with the
settings `python -m rl.tools.gpu` chose for one GPU on validation (seed 0, an H100) and then ran on three seeds.

    python rl/rl_ddp.py --config_name AdderGPUConfig        # on a machine with CUDA

A CPU preset's step count was sized for a CPU's seconds: on a GPU its 64-prompt steps are launch-bound, and it
misses 0.99 or spends its time past it. A GPU preset lets validation say when RL is done (rl_target_accuracy,
rl_train_steps its bound), warms up further (a supervised step costs about what an RL step does there) and
evaluates often (a graph-replayed evaluation costs milliseconds). The README's "On a GPU" rows are the runs in
results/gpu/ with exactly a preset's settings (rl/tools/readme.py gpu_runs), so a better choice measured there is
one edit here, and tests/test_config.py fails until such runs exist. Each runs on CUDA: without it a run is
refused at start, and --device=cpu runs it on the CPU anyway (slowly: its evaluations and steps are sized for a
GPU).
"""

from dataclasses import dataclass, fields

from configs.adder import AdderRLConfig
from configs.multiplier import Multiplier3RLConfig, MultiplierRLConfig


@dataclass
class OnOneGPU:
    """What every GPU preset sets alike (not a config of its own: a part of each, before its CPU preset)."""
    device: str = "cuda"
    """sized for a GPU: refused at start where CUDA is not available (--device=cpu runs it there anyway)"""
    rl_ga_steps: int = 1
    """a step's 64 x 8 answers in one micro-batch: on a GPU a step pays for its launches, not its rows"""
    matmul_attention: bool = True
    """flash attention's tiles are mostly padding at a dozen answer tokens: on the H100 (seed 0, validation) the
    adder reached 0.99 in 15.9 s with it against 22.1 s without, the multiplier in 18.6 s against 19.7 s"""


@dataclass
class AdderGPUConfig(OnOneGPU, AdderRLConfig):
    """AdderRLConfig on one GPU: on the H200, test 0.991 (0.991-0.992) over seeds 0, 1, 1337, first >= 0.99 at
    14.9 s (7.0-16.4) on the run's clock, warm start included (README "On a GPU")."""
    eval_interval: int = 2
    """a graph-replayed evaluation costs milliseconds: RL stops within 2 steps of validation holding its target"""
    eval_batch_size: int = 1000
    """each split's 1,000 problems decoded in one batch"""
    rl_train_steps: int = 600
    """the bound, not the plan: rl_target_accuracy ends RL first (62-190 steps on the H200's three seeds)"""
    rl_target_accuracy: float = 0.995
    """RL stops once validation holds 0.995 at two evaluations in a row; on the H200 it fired on validation's
    noise, and the three seeds ended at 0.991-0.992 on test"""
    sft_target_accuracy: float = 0.9
    """a supervised step costs about what an RL step does on a GPU, so the warm start goes further: on the H100
    (seed 0, validation) 0.99 at 15.3 s, against 15.9 s from the CPU preset's 0.5"""
    sft_batch_size: int = 512
    """the launch-bound warm start takes fewer steps of more problems (with sft_learning_rate=2e-3)"""
    sft_learning_rate: float = 2e-3
    """the rate for sft_batch_size=512"""
    sft_max_steps: int = 1500
    """the warm start's bound: to 0.9 on validation the H200's seeds took 198-472 steps"""


@dataclass
class MultiplierGPUConfig(OnOneGPU, MultiplierRLConfig):
    """MultiplierRLConfig on one GPU: on the H200, test 0.996 (0.995-0.999) over seeds 0, 1, 1337, first >= 0.99
    at 9.3 s (8.3-16.2) on the run's clock, warm start included (README "On a GPU")."""
    eval_interval: int = 5
    """an evaluation decodes all 1,539 held-out pairs in one batch a split: every 5 steps"""
    eval_batch_size: int = 2000
    """more than either held-out split has: each split decoded in one batch"""
    rl_train_steps: int = 400
    """the bound, not the plan: rl_target_accuracy ends RL first"""
    rl_target_accuracy: float = 0.995
    """RL stops once validation holds 0.995 at two evaluations in a row"""
    sft_target_accuracy: float = 0.95
    """a supervised step costs about what an RL step does on a GPU, so the warm start goes further: on the H100
    (seed 0, validation) 0.99 at 9.4 s, against 18.6 s from the CPU preset's 0.8"""
    sft_max_steps: int = 1500
    """the warm start's bound, far past the 0.95 it stops at"""


@dataclass
class Multiplier3GPUConfig(OnOneGPU, Multiplier3RLConfig):
    """Multiplier3RLConfig on one GPU: on the H200, test 0.989 (0.987-0.992) over seeds 0, 1, 1337, first >= 0.98
    at 16.4 s (15.2-19.7) on the run's clock, warm start included (README "On a GPU")."""
    eval_interval: int = 5
    """an evaluation decodes 2,000 held-out answers of 31 tokens: every 5 steps"""
    eval_batch_size: int = 1000
    """each split's 1,000 problems decoded in one batch"""
    rl_train_steps: int = 400
    """the bound, not the plan: rl_target_accuracy ends RL first"""
    rl_target_accuracy: float = 0.99
    """RL stops once validation holds 0.99 at two evaluations in a row"""
    sft_target_accuracy: float = 0.95
    """on the H100 (seed 0) validation ended at 0.992 against 0.990 from the CPU preset's 0.9, the choice then (by
    time, 0.98 at 27.7 s against 25.1 s, would have kept 0.9: only this setting ran on three seeds)"""


def cpu_preset(cls: type) -> type:
    """The CPU preset a GPU preset is made from (its base after OnOneGPU)."""
    return cls.__bases__[-1]


def gpu_fields(cls: type) -> set:
    """The settings a GPU preset gives other values than its CPU preset."""
    cpu = cpu_preset(cls)
    return {f.name for f in fields(cls) if getattr(cls, f.name) != getattr(cpu, f.name)}


GPU_PRESETS = (AdderGPUConfig, MultiplierGPUConfig, Multiplier3GPUConfig)


def gpu_preset_for(config_name: str):
    """The GPU preset made from the CPU preset `config_name` (None: it has none)."""
    return next((cls for cls in GPU_PRESETS if cpu_preset(cls).__name__ == config_name), None)
