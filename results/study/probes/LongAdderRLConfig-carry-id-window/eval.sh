#!/bin/bash
# Every arm of the carry column's three seeds (docs/results.md "The carry column, three seeds"), on test, greedy,
# read with a window of 8 position ids (--attention_window 8, chosen on seed 2's validation: validation-seed2/).
# The same files as ../LongAdderRLConfig-carry-logn-attention/eval.sh, whose test/ has them read plainly (L0).
# Run from the repository root, with the lengths runs' folders under out/lengths/ and the supervised arms under
# out/probe-after-sft/.
set -e
here=results/study/probes/LongAdderRLConfig-carry-id-window
mkdir -p $here/test
for s in 0 1 2; do
  run="out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed$s"
  for arm in none rl sft; do
    case $arm in none) f=$run/warm_start_padded.pt;; rl) f=$run/rl_snapshot_100.pt;;
                 sft) f=out/probe-after-sft/seed$s/warm_start_padded.pt;; esac
    python -m rl.evaluate "$f" --split test --ndigits 5 10 15 20 30 40 60 80 100 --num 200 --k 1 --samples 1 \
        --attention_window 8 --out $here/test/seed$s-$arm-W8.eval.json > $here/test/seed$s-$arm-W8.txt
  done
done
