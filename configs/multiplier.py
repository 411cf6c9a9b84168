"""MultiplierRLConfig: 2-digit multiplication, a deeper model and a longer warm start."""

from dataclasses import dataclass

from configs.base import BaseRLConfig


@dataclass
class MultiplierRLConfig(BaseRLConfig):
    task: str = "multiplier"
    ndigit: int = 2
    n_layer: int = 6
    """multiplication needs more depth than addition: every output digit mixes many digit products"""
    n_position: int = 128
    sft_max_steps: int = 6000
    """2-digit products take thousands of supervised steps to generalise to held-out pairs"""
    sft_target_accuracy: float = 0.8
    """RL on this task mostly sharpens training pairs (measured), so the warm start carries most of the way"""
    sft_eval_interval: int = 25
    """the warm start is long; checking less often saves time"""
    dynamic_sampling_max_rounds: int = 2
    """after this warm start nearly every training group is all correct, so more refill rounds only cost time"""
