#!/bin/bash
# Device check 5 of issue 33, part 2. Part 1 (session5.sh) found every process compiling torch's Python source:
# the device's torch has no cached bytecode and Python may not write it there. A user's pip install compiles it
# at install time, so this part gives Python a cache of its own (PYTHONPYCACHEPREFIX), fills it with one short
# run, and then: each start-up stage again; the presets' GPU settings (chosen on validation on the H100) on
# three seeds; the perf sweep at 4,096 and 8,192 prompts, now with steady-state steps and torch.compile rows.
#   bash results/gpu/session6.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=.
echo "PYTHON env before: $(env | grep ^PYTHON | tr '\n' ' ')" > $OUT/env.txt
python3 -c "import sys, torch, os; print('dont_write_bytecode', sys.dont_write_bytecode, 'site-packages writable',
 os.access(os.path.dirname(torch.__file__), os.W_OK))" >> $OUT/env.txt 2>&1
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pycache
save() { tar czf $OUT/results.tgz results/gpu/NVIDIA-H200 $OUT/*.log $OUT/*.jsonl $OUT/*.txt 2>/dev/null; }
# fill the cache: the imports of a run, of compile, and one short run on the GPU
timeout 120 python3 -c "import torch, torch._dynamo, torch._inductor.compile_fx, rl.rl_ddp, rl.tools.benchmark" \
  >> $OUT/env.txt 2>&1
/usr/bin/time -f "%e s wall (the cache's first run)" timeout 60 python3 rl/rl_ddp.py --config_name AdderRLConfig \
  --debug --no_wandb --out_dir=/tmp/fill > $OUT/fill.log 2>&1; tail -1 $OUT/fill.log
timeout 60 python3 results/gpu/session5_probe.py startup > $OUT/startup-cached.jsonl 2>&1; cut -c1-90 $OUT/startup-cached.jsonl
B="python3 -m rl.tools.benchmark --results gpu/NVIDIA-H200 --seeds 1337 0 1"
timeout 100 $B --configs AdderRLConfig --set rl_ga_steps=1 eval_interval=2 eval_batch_size=1000 rl_train_steps=600 \
  rl_target_accuracy=0.995 matmul_attention=true sft_target_accuracy=0.9 sft_batch_size=512 sft_learning_rate=2e-3 \
  sft_max_steps=1500 > $OUT/presets-adder.log 2>&1; tail -4 $OUT/presets-adder.log | cut -c1-250; save
timeout 100 $B --configs MultiplierRLConfig --set rl_ga_steps=1 eval_interval=5 eval_batch_size=2000 \
  rl_train_steps=400 rl_target_accuracy=0.995 matmul_attention=true sft_target_accuracy=0.95 sft_max_steps=1500 \
  > $OUT/presets-multiplier.log 2>&1; tail -4 $OUT/presets-multiplier.log | cut -c1-250; save
timeout 150 $B --configs Multiplier3RLConfig --set rl_ga_steps=1 eval_interval=5 eval_batch_size=1000 \
  rl_train_steps=400 rl_target_accuracy=0.99 matmul_attention=true sft_target_accuracy=0.95 \
  > $OUT/presets-multiplier3.log 2>&1; tail -4 $OUT/presets-multiplier3.log | cut -c1-250; save
timeout ${SWEEP_S:-170} python3 -m rl.tools.perf --device cuda --sizes 4096,8192 --reps 5 --budget 2 \
  --out results/gpu/NVIDIA-H200/perf-AdderRLConfig-steady.json > $OUT/perf.jsonl 2>&1; tail -8 $OUT/perf.jsonl | cut -c1-300
save; ls -la $OUT
