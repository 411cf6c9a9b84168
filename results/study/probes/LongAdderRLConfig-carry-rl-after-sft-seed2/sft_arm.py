"""The supervised arm of carry seed 2's lengths run, made again and kept: rl/tools/lengths.py supervised_arm (1-20
digit sums, half the steps padded to 40, the supervised streams of seed + 1, AdamW at 1e-3, 10 warmup steps, a
cosine to a tenth) from the padded warm start, for the given seconds (the lengths run's: 937). It writes
OUT/warm_start_padded.pt: the warm start's file (same fingerprint) with these weights, so an RL run in OUT starts
from them, and OUT/sft_arm.json (steps, seconds). STREAM (default 2, the arm's) seeds its problem and offset
streams (STREAM + 1): another value continues an arm on problems it has not seen. The environment's SEED (default
2) is the run's seed, for another seed's warm start.

    cd <repo> && python results/study/probes/LongAdderRLConfig-carry-rl-after-sft-seed2/sft_arm.py BASE OUT SECONDS \
        [STREAM]
"""
import json
import os
import shutil
import sys

import torch

from model.gpt import GPT, GPTConfig
from rl.long_env import environments
from rl.rl_ddp import config_from_args
from rl.snapshot import load_snapshot
from rl.tools.lengths import supervised_arm

base, out, seconds, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(os.environ.get("SEED", 2))
stream = int(sys.argv[4]) if len(sys.argv) > 4 else seed
torch.set_num_threads(2)
config = config_from_args(["--config_name", "LongAdderRLConfig", f"--seed={seed}", "--sft_pad_ndigits=40",
                           "--rl_pad_ndigits=40", "--pad_share=0.5", "--carry_column=true"])
env = environments(config.task_args(), [20])["rl"]
snap = load_snapshot(f"{base}/warm_start_padded.pt")
model = GPT(GPTConfig(**config.model_args()))
model.load_state_dict(snap["model"])
done = supervised_arm(model, config, env, seconds, stream)
shutil.copy(f"{base}/warm_start.pt", f"{out}/warm_start.pt")
torch.save({**snap, "model": model.state_dict()}, f"{out}/warm_start_padded.pt")
json.dump(done, open(f"{out}/sft_arm.json", "w"))
print(done)
