"""Probe: the warm start's padded phase run again on the same first phase (its cached warm_start.pt), its steps
drawing other problems, offsets and dropout (step + PAD_OFFSET in every padded step's streams). Run from the
repository root with rl_ddp.py's arguments:

    PAD_OFFSET=1000003 python results/study/probes/LongAdderRLConfig-carry-column/carry-seed0-stream/padded_stream.py \
        --config_name LongAdderRLConfig --seed=0 --no_wandb --resume=never --out_dir=OUT --sft_pad_ndigits=40 \
        --rl_pad_ndigits=40 --pad_share=0.5 --carry_column=true --rl_train_steps=0
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import rl.warm_start as warm_start  # noqa: E402
from rl import rl_ddp  # noqa: E402

OFFSET = int(os.environ["PAD_OFFSET"])
first_phase_step = warm_start.supervised_step


def shifted(policy, env, optimizer, config, info, step):
    return first_phase_step(policy, env, optimizer, config, info, step + (OFFSET if env.pad_ndigits else 0))


warm_start.supervised_step = shifted
sys.exit(rl_ddp.main(sys.argv[1:]))
