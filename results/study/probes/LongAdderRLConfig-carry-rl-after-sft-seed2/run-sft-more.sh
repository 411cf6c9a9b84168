#!/bin/bash
while pgrep -f queue2.sh > /dev/null; do sleep 10; done
cd /work/probe && . /work/venv/bin/activate
mkdir -p out/probe-after-sft/seed2-sft-more
PYTHONPATH=. python /work/diag/aftersft/sft_arm.py out/probe-after-sft/seed2 out/probe-after-sft/seed2-sft-more 937 1002 > /work/diag/aftersft/sft-more.log 2>&1
python -m rl.evaluate out/probe-after-sft/seed2-sft-more/warm_start_padded.pt --split validation --ndigits 20 30 40 60 80 100 --num 200 --k 1 --samples 1 --out /work/diag/aftersft/sft-more.eval.json > /work/diag/aftersft/sft-more.txt 2>&1
date >> /work/diag/aftersft/done.txt; echo sft-more >> /work/diag/aftersft/done.txt
