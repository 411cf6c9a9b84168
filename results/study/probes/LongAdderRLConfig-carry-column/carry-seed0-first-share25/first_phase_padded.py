"""Probe: the warm start's first phase with a share of its steps padded too (FIRST_PAD_SHARE of them written at
widths up to sft_pad_ndigits, as the padded phase writes them), then the padded phase as ever. Run from the
repository root with rl_ddp.py's arguments, in a folder of its own (the cache's fingerprint does not know it):

    FIRST_PAD_SHARE=0.25 python \
        results/study/probes/LongAdderRLConfig-carry-column/carry-seed0-first-share25/first_phase_padded.py \
        --config_name LongAdderRLConfig --seed=0 --no_wandb \
        --resume=never --out_dir=OUT --sft_pad_ndigits=40 --rl_pad_ndigits=40 --pad_share=0.5 --carry_column=true \
        --rl_train_steps=0
"""
import os
import sys

sys.path.insert(0, os.getcwd())
import rl.warm_start as warm_start  # noqa: E402
from rl import rl_ddp  # noqa: E402
from rl.long_env import LongAdditionEnvironment  # noqa: E402

SHARE = float(os.environ["FIRST_PAD_SHARE"])
unpadded_first_phase = warm_start.first_phase


def first_phase(config, env, policy, info, should_stop):
    padded = LongAdditionEnvironment(
        (env.lo, env.hi), positions=env.positions, max_position_offset=env.max_position_offset,
        pad_ndigits=config.sft_pad_ndigits, pad_share=SHARE, known_length=env.known_length,
        carry_column=env.carry_column, test_fraction=env.test_fraction, validation_fraction=env.validation_fraction)
    return unpadded_first_phase(config, padded, policy, info, should_stop)


warm_start.first_phase = first_phase
sys.exit(rl_ddp.main(sys.argv[1:]))
