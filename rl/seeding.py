"""Random streams derived from (seed, rank, step, purpose).

Each step's draws on each rank come from generators seeded afresh by `stream_seed`, so a run
resumed at step s draws exactly what an uninterrupted run draws at step s (nothing replays, no
RNG state has to travel in a snapshot), and every rank gets its own problems and samples.
Model initialisation uses the plain `seed`, identical on every rank.
"""

import numpy as np
import torch

# purposes: a stream per kind of draw, so adding draws to one never shifts another
PROBLEMS, SAMPLING, DROPOUT, SFT_PROBLEMS, SHUFFLE, SELECTION = 1, 2, 3, 4, 5, 6
POSITIONS = 7  # the random offsets of coupled position ids (rl/long_env.py); none drawn for today's tasks
WIDTHS, SFT_WIDTHS = 8, 9  # the width an RL / warm-start step writes its problems at (rl/long_env.py); likewise


def stream_seed(seed: int, rank: int, step: int, purpose: int) -> int:
    state = np.random.SeedSequence([seed, rank, step, purpose]).generate_state(1, dtype=np.uint64)[0]
    return int(state >> np.uint64(1))  # 63 bits: torch's manual_seed takes a signed 64-bit seed


def numpy_rng(seed: int, rank: int, step: int, purpose: int) -> np.random.Generator:
    return np.random.default_rng(stream_seed(seed, rank, step, purpose))


def torch_generator(seed: int, rank: int, step: int, purpose: int, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(stream_seed(seed, rank, step, purpose))


def seed_dropout(seed: int, rank: int, step: int):
    """Dropout draws from torch's global RNG; reseed it per step so resume reproduces it too."""
    torch.manual_seed(stream_seed(seed, rank, step, DROPOUT))


def set_step_width(env, seed: int, step: int, purpose: int = WIDTHS, weights=None):
    """Give env the width of this step's problems, the same on every rank, when it draws one (the task of many
    lengths, rl/long_env.py); nothing for today's tasks, which have one width. weights: a distribution over the
    widths lo..hi (a length curriculum's, rl/problem_sampler.py), else the task's own."""
    if hasattr(env, "draw_width"):
        rng = numpy_rng(seed, 0, step, purpose)
        width = env.draw_width(rng, weights)
        env.set_width(width, env.draw_written(width, rng))  # (written wider than the numbers only with padding)

