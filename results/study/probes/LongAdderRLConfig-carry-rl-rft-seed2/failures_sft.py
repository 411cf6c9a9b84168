"""Supervised training on the problems the policy gets wrong, and on those only: the supervised arm's loop
(rl/tools/lengths.py supervised_arm: its problem, width and offset streams, its batch of 256, AdamW at 1e-3 with
10 warmup steps and a cosine to a tenth, for the given seconds), except that each step first samples one answer to
each of its 256 problems from the current policy at temperature 1 and then trains on the right answers of the
problems whose sample was wrong. The complement of rft with one sample a problem, which trains on those whose
sample was right. From carry seed 2's padded warm start; writes OUT/failures_sft.pt (the warm start's file with
these weights) and OUT/failures_sft.json (rows trained per step), for rl.evaluate. OUT holds warm_start_padded.pt.

    PYTHONPATH=. python results/study/probes/LongAdderRLConfig-carry-rl-rft-seed2/failures_sft.py OUT SECONDS [LR]
"""
import json
import sys

import numpy as np
import torch

from model.gpt import GPT, GPTConfig
from rl import seeding
from rl.long_env import environments
from rl.math_reward import exact_match
from rl.rl_ddp import config_from_args
from rl.snapshot import load_snapshot
from rl.tools.benchmark import supervised_for_seconds
from rl.warm_start import teacher_forced_step

out, seconds, seed = sys.argv[1], float(sys.argv[2]), 2
learning_rate = sys.argv[3] if len(sys.argv) > 3 else "1e-3"  # the supervised arm's (sft_learning_rate)
torch.set_num_threads(2)
config = config_from_args(["--config_name", "LongAdderRLConfig", f"--seed={seed}", "--sft_pad_ndigits=40",
                           "--rl_pad_ndigits=40", "--pad_share=0.5", "--carry_column=true",
                           f"--sft_learning_rate={learning_rate}"])
env = environments(config.task_args(), [20])["rl"]
snap = load_snapshot(f"{out}/warm_start_padded.pt")
model = GPT(GPTConfig(**config.model_args()))
model.load_state_dict(snap["model"])
rows = []


def step(i: int, optimizer):
    seeding.set_step_width(env, seed + 1, i, seeding.SFT_WIDTHS)  # the supervised arm's streams
    a, b = env.sample_operands(config.sft_batch_size, seeding.numpy_rng(seed + 1, 0, i, seeding.SFT_PROBLEMS))
    prompts, answers = env.encode(a, b)
    pos = env.position_ids(len(prompts), seeding.numpy_rng(seed + 2, 0, i, seeding.POSITIONS))
    model.eval()
    with torch.no_grad():
        generated = model.generate(prompts, env.answer_len, temperature=1.0, end_token=env.end_token,
                                   pad_token=env.pad_token, generator=torch.Generator().manual_seed(i), pos=pos)
    model.train()
    wrong = np.nonzero((exact_match(env, answers, generated) == 0).numpy())[0]
    rows.append(len(wrong))
    if len(wrong):
        teacher_forced_step(model, env, optimizer, a[wrong], b[wrong], "cpu", grad_clip=config.grad_clip,
                            rng=seeding.numpy_rng(seed + 1, 0, i, seeding.POSITIONS))


steps, spent = supervised_for_seconds(model, config, seconds, step)
model.eval()
torch.save({**snap, "model": model.state_dict()}, f"{out}/failures_sft.pt")
json.dump({"steps": steps, "seconds": round(spent, 1), "rows_per_step": rows}, open(f"{out}/failures_sft.json", "w"))
print(f"{steps} steps in {spent:.0f} s; rows trained: {sum(rows)} ({np.mean(rows):.2f} a step)")
