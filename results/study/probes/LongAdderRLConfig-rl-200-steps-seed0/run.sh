#!/bin/bash
# RL for 200 steps in place of 100 from seed 0's warm start (the preset otherwise), then its validation sums at every length
cd "${ROOT:-.}"  # the repository root
OUT=out/probe-rl200-seed0
python rl/rl_ddp.py --config_name LongAdderRLConfig --seed=0 --no_wandb --out_dir=$OUT --rl_train_steps=200 > results/study/probes/LongAdderRLConfig-rl-200-steps-seed0/run.log 2>&1
python -m rl.evaluate $OUT/rl_snapshot_200.pt --split validation --ndigits 5 10 15 20 30 40 60 80 100 --k 1 --samples 1 --num 200 > results/study/probes/LongAdderRLConfig-rl-200-steps-seed0/eval200.log 2>&1
python -m rl.evaluate $OUT/rl_snapshot_100.pt --split validation --ndigits 5 10 15 20 30 40 60 80 100 --k 1 --samples 1 --num 200 > results/study/probes/LongAdderRLConfig-rl-200-steps-seed0/eval100.log 2>&1
