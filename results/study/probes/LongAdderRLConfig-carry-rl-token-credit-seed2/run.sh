#!/bin/bash
# RL from carry-column seed 2's padded warm start with the extra args "$@" (after NAME and STEPS); then a validation eval
NAME=$1; STEPS=$2; shift 2
cd /work/probe && . /work/venv/bin/activate
base="out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed2"
out="out/probe-replay/carry-seed2-$NAME"
rm -rf "$out"; mkdir -p "$out"; cp "$base/warm_start.pt" "$base/warm_start_padded.pt" "$out/"
python rl/rl_ddp.py --config_name LongAdderRLConfig --seed=2 --no_wandb --resume=never --out_dir="$out" \
  --sft_pad_ndigits=40 --rl_pad_ndigits=40 --pad_share=0.5 --carry_column=true --rl_train_steps=$STEPS "$@" > /work/diag/replay/$NAME.log 2>&1
python -m rl.evaluate "$out/rl_snapshot_$STEPS.pt" --split validation --ndigits 20 30 40 60 --num 200 --k 1 --samples 1 --out /work/diag/replay/$NAME.eval.json > /work/diag/replay/$NAME.txt 2>&1
date >> /work/diag/replay/done.txt; echo "$NAME" >> /work/diag/replay/done.txt
