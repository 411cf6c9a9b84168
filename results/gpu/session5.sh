#!/bin/bash
# Device check 5 of issue 33, part 1 (profile first): the CUDA tests at this commit; each start-up stage alone;
# whole RL steps at 4,096 prompts one by one (are decode graphs still being captured in the timed steps?); the
# adder and the multiplier with their chosen GPU settings under cProfile (seed 0), and the adder without it.
#   bash results/gpu/session5.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=.
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
timeout 150 python3 -m pytest -q tests/test_precision.py > $OUT/pytest.log 2>&1; tail -2 $OUT/pytest.log
timeout 60 python3 results/gpu/session5_probe.py startup > $OUT/startup.jsonl 2>&1; cat $OUT/startup.jsonl | cut -c1-150
timeout 60 python3 results/gpu/session5_probe.py steps 4096 > $OUT/steps-4096.jsonl 2>&1; cat $OUT/steps-4096.jsonl
ADDER="--rl_ga_steps=1 --eval_interval=2 --eval_batch_size=1000 --rl_train_steps=600 --rl_target_accuracy=0.995
 --matmul_attention=true --sft_target_accuracy=0.9 --sft_batch_size=512 --sft_learning_rate=2e-3 --sft_max_steps=1500"
MULT="--rl_ga_steps=1 --eval_interval=5 --eval_batch_size=2000 --rl_train_steps=400 --rl_target_accuracy=0.995
 --matmul_attention=true --sft_target_accuracy=0.95 --sft_max_steps=1500"
run() {  # name, config, profile (1/0), settings...
  local name=$1 config=$2 prof=$3; shift 3
  local cmd="rl/rl_ddp.py --config_name $config --seed=0 --no_wandb --out_dir=/tmp/run-$name $*"
  if [ $prof = 1 ]; then cmd="-m cProfile -o /tmp/$name.prof $cmd"; fi
  /usr/bin/time -f "%e s wall" timeout 90 python3 $cmd > $OUT/run-$name.log 2>&1
  tail -3 $OUT/run-$name.log; cp /tmp/run-$name/metrics.jsonl $OUT/metrics-$name.jsonl
  [ $prof = 1 ] && python3 -c "import pstats; p = pstats.Stats('/tmp/$name.prof'); p.sort_stats('cumulative').print_stats(70); p.sort_stats('tottime').print_stats(40)" > $OUT/profile-$name.txt 2>&1
}
run adder AdderRLConfig 0 $ADDER
run adder-prof AdderRLConfig 1 $ADDER
run multiplier-prof MultiplierRLConfig 1 $MULT
ls $OUT
