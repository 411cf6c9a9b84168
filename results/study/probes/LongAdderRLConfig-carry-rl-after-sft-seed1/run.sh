#!/bin/bash
# seed 1: the supervised arm kept, RL after it, supervised training for as long again after it; validation evaluations
while pgrep -f queue4.sh > /dev/null; do sleep 10; done
cd /work/probe && . /work/venv/bin/activate
base="out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed1"
out=out/probe-after-sft/seed1; more=out/probe-after-sft/seed1-sft-more; D=/work/diag/aftersft/seed1
mkdir -p $out $more $D
ev() { python -m rl.evaluate "$1" --split validation --ndigits 20 30 40 60 80 100 --num 200 --k 1 --samples 1 --out $D/$2.eval.json > $D/$2.txt 2>&1; }
SEED=1 PYTHONPATH=. python /work/diag/aftersft/sft_arm.py "$base" $out 937 > $D/sft.log 2>&1
ev $out/warm_start_padded.pt sft-arm
python rl/rl_ddp.py --config_name LongAdderRLConfig --seed=1 --no_wandb --resume=never --out_dir="$out" \
  --sft_pad_ndigits=40 --rl_pad_ndigits=40 --pad_share=0.5 --carry_column=true --rl_train_steps=100 > $D/rl.log 2>&1
ev $out/rl_snapshot_100.pt rl-after-sft
SEED=1 PYTHONPATH=. python /work/diag/aftersft/sft_arm.py $out $more 937 1001 > $D/sft-more.log 2>&1
ev $more/warm_start_padded.pt sft-more
date >> /work/diag/aftersft/done.txt; echo seed1 >> /work/diag/aftersft/done.txt
