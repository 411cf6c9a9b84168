#!/bin/bash
# paired: the adder's debug run from the tree before (torch.optim.AdamW) and from this one (model/gpt.py AdamW),
# alternating, a fresh out_dir each; then the import of torch._dynamo alone. The tree before, once:
#   mkdir .old_tree && git archive 709a4b0 rl model configs | tar -x -C .old_tree
cd "$(git rev-parse --show-toplevel)"
for i in 1 2 3 4 5 6; do
  for t in old new; do
    D=$([ $t = old ] && echo .old_tree || echo .)
    O=/tmp/pair-$t-$i; rm -rf $O
    s=$(date +%s.%N)
    (cd $D && python rl/rl_ddp.py --config_name AdderRLConfig --debug --no_wandb --out_dir=$O > /tmp/pair-$t-$i.log 2>&1)
    e=$(date +%s.%N)
    echo "$t $i $(echo "$e - $s" | bc) $(grep -o 'RL starts [0-9.]* s' /tmp/pair-$t-$i.log) $(grep -o 'model [0-9.]* s' /tmp/pair-$t-$i.log) $(grep 'Final' /tmp/pair-$t-$i.log)"
  done
done
for i in 1 2 3 4 5; do python -X importtime -c "import torch; import torch._dynamo" 2>&1 | grep -E "\| torch._dynamo$" ; done
