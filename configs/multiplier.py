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
