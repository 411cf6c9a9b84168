#!/bin/bash
# Prepared for the next device check of issue 33 (not yet run): the CUDA tests (compile, the graphed warm-start
# step and a run with it are new since the last check), then the presets' GPU settings with --sft_cuda_graphs=true
# on seeds 1337, 0 and 1 with Python's bytecode cached (as results/gpu/session6.sh caches it), then the sweep.
#   bash results/gpu/session7.sh          # about 8 minutes on an H200
export PYTHONUNBUFFERED=1 PYTHONPATH=.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
G=$(python3 -c "from rl.tools.results import gpu_folder; print(gpu_folder())")
save() { tar czf $OUT/results.tgz results/$G $OUT/*.log $OUT/*.jsonl 2>/dev/null; }
timeout 150 python3 -m pytest -q tests/test_precision.py > $OUT/pytest.log 2>&1; tail -3 $OUT/pytest.log
# the tests above filled most of the bytecode cache; one short run fills the rest (as session6.sh)
timeout 60 python3 rl/rl_ddp.py --config_name AdderRLConfig --debug --no_wandb --out_dir=/tmp/fill > $OUT/fill.log 2>&1
B="python3 -m rl.tools.benchmark --results $G --seeds 1337 0 1"
timeout 90 $B --configs AdderRLConfig --set rl_ga_steps=1 eval_interval=2 eval_batch_size=1000 rl_train_steps=600 \
  rl_target_accuracy=0.995 matmul_attention=true sft_target_accuracy=0.9 sft_batch_size=512 sft_learning_rate=2e-3 \
  sft_max_steps=1500 sft_cuda_graphs=true > $OUT/presets-adder.log 2>&1; tail -2 $OUT/presets-adder.log | cut -c1-300; save
timeout 90 $B --configs MultiplierRLConfig --set rl_ga_steps=1 eval_interval=5 eval_batch_size=2000 \
  rl_train_steps=400 rl_target_accuracy=0.995 matmul_attention=true sft_target_accuracy=0.95 sft_max_steps=1500 \
  sft_cuda_graphs=true > $OUT/presets-multiplier.log 2>&1; tail -2 $OUT/presets-multiplier.log | cut -c1-300; save
timeout 120 $B --configs Multiplier3RLConfig --set rl_ga_steps=1 eval_interval=5 eval_batch_size=1000 \
  rl_train_steps=400 rl_target_accuracy=0.99 matmul_attention=true sft_target_accuracy=0.95 sft_cuda_graphs=true \
  > $OUT/presets-multiplier3.log 2>&1; tail -2 $OUT/presets-multiplier3.log | cut -c1-300; save
# the sweep at 4,096 prompts again: now with the compile's seconds (first_call_seconds, warmup_seconds)
timeout 150 python3 -m rl.tools.perf --device cuda --sizes 4096 --reps 5 --budget 2 \
  --out results/$G/perf-AdderRLConfig-compile-time.json > $OUT/perf.jsonl 2>&1; tail -4 $OUT/perf.jsonl | cut -c1-300
save; ls -la $OUT
