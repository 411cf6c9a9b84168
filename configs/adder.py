"""AdderRLConfig: 3-digit addition, the default task."""

from dataclasses import dataclass

from configs.base import BaseRLConfig


@dataclass
class AdderRLConfig(BaseRLConfig):
    """3-digit addition with a 4-layer, 8-head, 256-wide GPT: BaseRLConfig's defaults as they are."""
