#!/bin/bash
# Device check 1 of issue 33 (one H100): CUDA tests, the perf sweep, one adder run. Writes to $OUT.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/nvidia-smi.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >> $OUT/nvidia-smi.txt
timeout 100 python3 -m pytest -q -x tests/test_precision.py tests/test_model.py > $OUT/pytest.log 2>&1
tail -3 $OUT/pytest.log
timeout 150 python3 -m rl.tools.perf --device cuda --sizes 64,512,4096,8192 --reps 3 --budget 3 \
    --out $OUT/perf-AdderRLConfig.json > $OUT/perf.log 2>&1
tail -8 $OUT/perf.log
timeout 60 python3 rl/rl_ddp.py --config_name AdderRLConfig --no_wandb --out_dir /tmp/adder --seed 0 \
    --eval_interval=2 --rl_ga_steps=1 --rl_train_steps=600 --rl_target_accuracy=0.995 > $OUT/adder.log 2>&1
cp /tmp/adder/metrics.jsonl $OUT/adder-metrics.jsonl
grep -v "^Step\|claims\|it/s" $OUT/adder.log | tail -8
