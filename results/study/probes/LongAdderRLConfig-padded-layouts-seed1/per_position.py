import sys, torch, numpy as np
sys.argv=[sys.argv[0], sys.argv[1]]
exec(open('results/study/probes/LongAdderRLConfig-padded-layouts-seed1/padded_layouts.py').read().split("for L in [10, 15, 20]")[0])
a, b = envs[10].eval_operands(200, 'validation')
for W in (20, 40):
    r, per = acc(envs[W], a, b)
    print(f"L=10 W={W} acc {r:.3f} per-position error", np.round(per.numpy(), 2).tolist())
a, b = envs[30].eval_operands(200, 'validation')
r, per = acc(envs[40], a, b)
print(f"L=30 W=40 acc {r:.3f} per-position error", np.round(per.numpy(), 2).tolist())
r, per = acc(envs[30], a, b)
print(f"L=30 W=30 acc {r:.3f} per-position error", np.round(per.numpy(), 2).tolist())
