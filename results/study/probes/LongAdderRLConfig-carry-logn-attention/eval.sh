#!/bin/bash
# Every arm of the carry column's three seeds (docs/results.md "The carry column, three seeds"), on test, greedy, with
# and without log-n attention (--logn_attention 24, chosen on seed 2's validation: validation-seed2/). Run from the
# repository root, with the lengths runs' folders under out/lengths/ and the supervised arms under out/probe-after-sft/.
set -e
here=results/study/probes/LongAdderRLConfig-carry-logn-attention
for s in 0 1 2; do
  run="out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed$s"
  for arm in none rl sft; do
    case $arm in none) f=$run/warm_start_padded.pt;; rl) f=$run/rl_snapshot_100.pt;;
                 sft) f=out/probe-after-sft/seed$s/warm_start_padded.pt;; esac
    for L in 0 24; do
      python -m rl.evaluate "$f" --split test --ndigits 5 10 15 20 30 40 60 80 100 --num 200 --k 1 --samples 1 \
          --logn_attention $L --out $here/test/seed$s-$arm-L$L.eval.json > $here/test/seed$s-$arm-L$L.txt
    done
  done
done
