#!/bin/bash
# Every arm of the carry column's three seeds (docs/results.md "The carry column, three seeds"), on test, greedy,
# read through a window of 8 position ids (W = 8, chosen on seed 2's validation: validation-seed2/):
#   W8   the window alone: python -m rl.evaluate --attention_window 8 (made by window_eval.py with SEPARATORS=0, the
#        same rule: at W = 8 on seed 2's validation the two give the same numbers)
#   W8g  the window with the non-digit tokens ("+", "=") global: python -m rl.evaluate --attention_window 8
#        --attention_globals
# The same files as ../LongAdderRLConfig-carry-logn-attention/eval.sh, whose test/ has them read plainly (L0).
# Run from the repository root; ROOT (default .) holds the lengths runs' folders under out/lengths/ and the
# supervised arms under out/probe-after-sft/. READS (default "W8 W8g") picks the readings.
set -e
here=results/study/probes/LongAdderRLConfig-carry-id-window
root=${ROOT:-.}
mkdir -p $here/test
for s in 0 1 2; do
  run="$root/out/lengths/LongAdderRLConfig-sft_pad_ndigits=40+rl_pad_ndigits=40+pad_share=0.5+carry_column=true-seed$s"
  for arm in none rl sft; do
    case $arm in none) f=$run/warm_start_padded.pt;; rl) f=$run/rl_snapshot_100.pt;;
                 sft) f=$root/out/probe-after-sft/seed$s/warm_start_padded.pt;; esac
    for read in ${READS:-W8 W8g}; do
      args=(--split test --ndigits 5 10 15 20 30 40 60 80 100 --num 200 --k 1 --samples 1
            --out $here/test/seed$s-$arm-$read.eval.json)
      flags=(--attention_window 8)
      [ $read = W8g ] && flags+=(--attention_globals)
      python -m rl.evaluate "$f" "${args[@]}" "${flags[@]}" > $here/test/seed$s-$arm-$read.txt
    done
  done
done
