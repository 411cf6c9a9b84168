#!/bin/bash
# Validation only, seed 2's RL arm (the carry column's lengths run): the window W (columns) and whether the
# separators stay visible, chosen on the mean greedy accuracy over 20-100 digits. Run from the repository root.
here=results/study/probes/LongAdderRLConfig-carry-id-window
f="out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed2/rl_snapshot_100.pt"
for sep in 1 0; do
  for W in 1 2 3 4 6 8 16; do
    WINDOW=$W SEPARATORS=$sep PYTHONPATH=. python $here/window_eval.py "$f" --split validation --ndigits 20 40 60 80 100 \
        --num 200 --k 1 --samples 1 --out $here/validation-seed2/rl-W$W-sep$sep.eval.json \
        > $here/validation-seed2/rl-W$W-sep$sep.txt
  done
done
