#!/bin/bash
# The same warm start (copied: same settings, so reused), RL for the preset's 100 steps, then the same evaluation
cd "${ROOT:-.}"  # the repository root
while pgrep -f "rl-200-steps-seed0/run.sh" > /dev/null; do sleep 10; done
OUT=out/probe-rl100-seed0
mkdir -p $OUT && cp out/probe-rl200-seed0/warm_start.pt $OUT/
python rl/rl_ddp.py --config_name LongAdderRLConfig --seed=0 --no_wandb --out_dir=$OUT > results/study/probes/LongAdderRLConfig-rl-200-steps-seed0/run100.log 2>&1
python -m rl.evaluate $OUT/rl_snapshot_100.pt --split validation --ndigits 5 10 15 20 30 40 60 80 100 --k 1 --samples 1 --num 200 > results/study/probes/LongAdderRLConfig-rl-200-steps-seed0/eval100-run100.log 2>&1
python -m rl.evaluate out/probe-rl200-seed0/warm_start.pt --split validation --ndigits 5 10 15 20 30 40 60 80 100 --k 1 --samples 1 --num 200 > results/study/probes/LongAdderRLConfig-rl-200-steps-seed0/eval-warm.log 2>&1
