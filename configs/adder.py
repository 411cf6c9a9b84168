"""AdderRLConfig: 3-digit addition, the default task; LongAdderRLConfig: addition of 1 to 100 digits."""

from dataclasses import dataclass

from configs.base import BaseRLConfig


@dataclass
class AdderRLConfig(BaseRLConfig):
    """3-digit addition with a 4-layer, 8-head, 256-wide GPT: BaseRLConfig's defaults, with problem selection."""
    problem_sampler: str = "replay"
    """measured on validation (seed 0, one warm start): replay reached 0.99 at RL step 140 (291 s) and ended at
    0.997; uniform draws ended at 0.987 and never reached 0.99 in 200 steps (docs/results.md "Problem selection")"""
    dynamic_sampling_max_rounds: int = 1
    """with replay, half of each round is problems still wrong: one refill round keeps the batch full early on,
    and late steps stay cheap (2,560 answers at most, against 4,600 with two rounds and uniform draws) (>= 0)"""


@dataclass
class LongAdderRLConfig(BaseRLConfig):
    """Addition past the training lengths (issue 34): warm start on 1-10 digits, RL on 1-20, evaluation up to
    100 digits, with coupled position ids and the carry column (rl/long_env.py), read through a window of 4 ids
    (model/gpt.py). The adder's model; measured by python -m rl.tools.lengths (docs/results.md "Past the training
    lengths")."""
    rl_ndigits: str = "1-20"
    """RL trains on operands of 1 to 20 digits, twice the warm start's longest"""
    sft_ndigits: str = "1-10"
    """the warm start sees operands of at most 10 digits: what RL adds at 11-20 digits is measured apart"""
    positions: str = "coupled"
    """digit i of a, b and the sum share one id: the id of a digit's column, whatever the number's length"""
    max_position_offset: int = 105
    """offsets up to 105 train every id a 100-digit evaluation reads (1 .. 102) on short problems (>= 0)"""
    n_position: int = 128
    """RL's 20-digit problems at the largest offset need 20 + 3 + 105 = 128 ids (> 0)"""
    carry_column: bool = True
    """the sum's last carry gets a column of its own, so every answer digit reads its column's operand digits"""
    attention_window: int = 4
    """a token reads only the ids within 4 of its own: the same few columns at 100 digits as at 10. Validation, the
    RL arm at 5-100 digits: seeds 0 / 1 / 2 0.97-0.995 / 0.99-1.00 / 0.99-1.00; with 8 ids, seeds 0 / 1 0.00-0.995 /
    0.905-0.99; with neither the window nor the carry column, 0.00-0.055 from 40 digits (docs/results.md "Past the
    training lengths") (>= 0)"""
    problem_sampler: str = "uniform"
    """validation, mean over 5-40 digits, 3 seeds: uniform 0.535, the length curriculum (lengths) 0.515, ahead at 5-10
    digits, behind at 15-30 (docs/results.md); replay (seed 2, carry column) 0.90 at 40 digits against uniform's 0.945;
    prioritized cannot key 20-digit pairs"""
    sft_target_accuracy: float = 0.95
    """the warm start stops at 0.95 on 10-digit validation sums: seeds 0-2 reached it at steps 390-828 (4-9 min)"""
    sft_min_lr_ratio: float = 0.1
    """at a constant 1e-3 validation swung between 0.52 and 0.97; a cosine to 1e-4 at step 1,000 held 0.98 from
    step 850 (seed 0, validation: results/study/probes/)"""
    sft_max_steps: int = 1000
    """the warm start's bound: about 13 minutes on the 2-core CPU (> 0)"""
    rl_train_steps: int = 100
    """about 6 minutes of RL on the 2-core CPU, so a seed's three arms (rl/tools/lengths.py) fit 30 minutes (>= 0)"""
    num_eval: int = 200
    """problems per evaluated length and split (> 0)"""
    eval_ndigits: str = "10,20,40"
    """the run's own evaluations: inside the warm start's range, at RL's longest, and twice that;
    python -m rl.tools.lengths and python -m rl.evaluate --ndigits evaluate any lengths, up to 100"""
    eval_interval: int = 25
    """a run's evaluation reads 2 x 3 sets of long sums: every 25 steps keeps it under a tenth of the run (> 0)"""

    # --debug: evaluation sets of 200 long sums at three lengths, test and validation, would take most of the minute
    DEBUG_OVERRIDES = {**BaseRLConfig.DEBUG_OVERRIDES, "num_eval": 20, "sft_num_eval": 50}
