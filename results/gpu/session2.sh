#!/bin/bash
# Device check 2 of issue 33 (one H100): CUDA tests, each preset's GPU settings chosen on validation (seed 0)
# and run on seeds 1337 0 1 (rl/tools/gpu.py), the perf sweep. Every part under its own timeout; writes to $OUT.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $OUT/nvidia-smi.txt 2>&1
timeout 60 python3 -m pytest -q tests/test_precision.py > $OUT/pytest.log 2>&1; tail -2 $OUT/pytest.log
timeout 130 python3 -m rl.tools.gpu --configs AdderRLConfig > $OUT/gpu.log 2>&1
timeout 150 python3 -m rl.tools.gpu --configs MultiplierRLConfig >> $OUT/gpu.log 2>&1
timeout 80 python3 -m rl.tools.perf --device cuda --sizes 64,512,4096,8192 --reps 3 --budget 2 \
    --out results/gpu/perf-AdderRLConfig.json > $OUT/perf.log 2>&1
timeout 140 python3 -m rl.tools.gpu --configs Multiplier3RLConfig >> $OUT/gpu.log 2>&1
grep -v "^{" $OUT/gpu.log | tail -12
tar czf $OUT/results-gpu.tgz results/gpu out/gpu/*/metrics.jsonl out/gpu/*/run.log 2>/dev/null
ls -la $OUT
