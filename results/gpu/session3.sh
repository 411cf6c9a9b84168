#!/bin/bash
# Device check 3 of issue 33 (the H200 of check 2): CUDA tests, the adder's third seed, a kernel profile of
# sampling and update at 4,096 x 8, the perf sweep again (attention in pieces past 32,768 rows). Writes to $OUT.
export PYTHONUNBUFFERED=1
timeout 60 python3 -m pytest -q tests/test_precision.py > $OUT/pytest.log 2>&1; tail -2 $OUT/pytest.log
timeout 50 python3 -m rl.tools.gpu --configs AdderRLConfig --seeds 1 > $OUT/gpu.log 2>&1; tail -3 $OUT/gpu.log
PYTHONPATH=. timeout 45 python3 results/gpu/kernel_profile.py 4096 > $OUT/kernel_profile.txt 2>&1
timeout 70 python3 -m rl.tools.perf --device cuda --sizes 64,512,4096,8192 --reps 3 --budget 2 \
    --out results/gpu/perf-AdderRLConfig.json > $OUT/perf.log 2>&1; tail -7 $OUT/perf.log
cp results/gpu/perf-AdderRLConfig.json $OUT/ 2>/dev/null
tar czf $OUT/adder-seed1.tgz results/gpu/AdderRLConfig*seed1.json out/gpu/AdderRLConfig*seed1/metrics.jsonl 2>/dev/null
