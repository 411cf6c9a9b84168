#!/bin/bash
# RL from carry-column seed 2's padded warm start at rl_temperature=$1; then validation evals (and the baseline's)
T=$1
cd /work/probe && . /work/venv/bin/activate
base="out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed2"
out="out/probe-temp/carry-seed2-rl_temperature=$T"
rm -rf "$out"; mkdir -p "$out"; cp "$base/warm_start.pt" "$base/warm_start_padded.pt" "$out/"
python rl/rl_ddp.py --config_name LongAdderRLConfig --seed=2 --no_wandb --resume=never --out_dir="$out" \
  --sft_pad_ndigits=40 --rl_pad_ndigits=40 --pad_share=0.5 --carry_column=true --rl_temperature=$T > /work/diag/temp/T$T.log 2>&1
python -m rl.evaluate "$out/rl_snapshot_100.pt" --split validation --ndigits 20 30 40 60 --num 200 --k 1 --samples 1 --out /work/diag/temp/T$T.eval.json > /work/diag/temp/T$T.txt 2>&1
if [ ! -f /work/diag/temp/base.eval.json ]; then
python -m rl.evaluate "$base/rl_snapshot_100.pt" --split validation --ndigits 20 30 40 60 --num 200 --k 1 --samples 1 --out /work/diag/temp/base.eval.json > /work/diag/temp/base.txt 2>&1
fi
date >> /work/diag/temp/done.txt; echo "T $T" >> /work/diag/temp/done.txt
