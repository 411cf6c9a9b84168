#!/bin/bash
# after the supervised arm: RL from its weights (100 steps), then evaluations of the arm and of RL after it
cd /work/probe && . /work/venv/bin/activate
while pgrep -f sft_arm.py > /dev/null; do sleep 10; done
out=out/probe-after-sft/seed2
python -m rl.evaluate "$out/warm_start_padded.pt" --split validation --ndigits 20 30 40 60 80 100 --num 200 --k 1 --samples 1 --out /work/diag/aftersft/sft-arm.eval.json > /work/diag/aftersft/sft-arm.txt 2>&1
python rl/rl_ddp.py --config_name LongAdderRLConfig --seed=2 --no_wandb --resume=never --out_dir="$out" \
  --sft_pad_ndigits=40 --rl_pad_ndigits=40 --pad_share=0.5 --carry_column=true --rl_train_steps=100 > /work/diag/aftersft/rl.log 2>&1
python -m rl.evaluate "$out/rl_snapshot_100.pt" --split validation --ndigits 20 30 40 60 80 100 --num 200 --k 1 --samples 1 --out /work/diag/aftersft/rl-after-sft.eval.json > /work/diag/aftersft/rl-after-sft.txt 2>&1
date >> /work/diag/aftersft/done.txt; echo rl-after-sft >> /work/diag/aftersft/done.txt
