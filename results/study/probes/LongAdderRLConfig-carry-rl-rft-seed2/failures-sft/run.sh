#!/bin/bash
cd /work/probe && . /work/venv/bin/activate
out=out/probe-replay/carry-seed2-failures-sft
PYTHONPATH=. python /work/diag/replay/failures_sft.py $out 937 1e-4 > /work/diag/replay/failures.log 2>&1
python -m rl.evaluate $out/failures_sft.pt --split validation --ndigits 20 30 40 60 --num 200 --k 1 --samples 1 --out /work/diag/replay/failures.eval.json > /work/diag/replay/failures.txt 2>&1
date >> /work/diag/replay/done.txt; echo failures >> /work/diag/replay/done.txt
