"""AdderRLConfig: 3-digit addition, the default task."""

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
