#!/bin/bash
# Device check 4 of issue 33 (an H100): the CUDA tests; the perf sweep with attention in plain matmuls (sampling,
# update and whole steps); then each preset's candidates (rl/tools/gpu.py) on seed 0, the one chosen on validation
# run on seeds 1337 and 1. Results go to results/gpu/<GPU>/ and are copied to $OUT as each stage ends.
#   bash results/gpu/session4.sh                                   # tests, sweep, adder, multiplier
#   STAGES=presets CONFIGS=Multiplier3RLConfig PER=230 bash results/gpu/session4.sh
export PYTHONUNBUFFERED=1
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
G=$(python3 -c "from rl.tools.results import gpu_folder; print(gpu_folder())")
# (a tarball: the device tool does not bring back files whose names hold "=" or "+")
save() { tar czf $OUT/results.tgz results/$G out/gpu --exclude='*.pt' 2>/dev/null; }
if [ "${STAGES:-all}" = all ]; then
  timeout 60 python3 -m pytest -q tests/test_precision.py > $OUT/pytest.log 2>&1; tail -2 $OUT/pytest.log
  timeout 120 python3 -m rl.tools.perf --device cuda --sizes 64,512,4096,8192 --reps 3 --budget 2 > $OUT/perf.log 2>&1
  tail -7 $OUT/perf.log; save
fi
for c in ${CONFIGS:-AdderRLConfig MultiplierRLConfig}; do
  timeout ${PER:-185} python3 -m rl.tools.gpu --configs $c > $OUT/gpu-$c.log 2>&1; grep chosen $OUT/gpu-$c.log; save
done
python3 -m rl.tools.gpu --table 2>/dev/null | tail -8
