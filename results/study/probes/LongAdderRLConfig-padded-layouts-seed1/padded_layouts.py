"""Are long sums hard because of their nonzero digits or because of the layout's length?
Greedy exact match (teacher-forced argmax of every answer token) of L-digit validation sums written at width W."""
import sys, torch, numpy as np
from rl.evaluate import load_for_evaluation, eval_position_ids
torch.set_num_threads(2)
path = sys.argv[1]
lengths = [10, 15, 20, 30, 40]
model, envs, snap = load_for_evaluation(path, lengths)
model.eval()
def acc(env_w, a, b):
    prompts, targets = env_w.encode(a, b)
    pos = eval_position_ids(env_w, len(prompts), 'cpu')
    x = torch.cat([prompts, targets], 1)
    with torch.no_grad():
        logits = model(x[:, :-1], pos=pos[:, :x.shape[1] - 1])
    if isinstance(logits, tuple): logits = logits[0]
    P = prompts.shape[1]
    wrong = logits[:, P - 1:].argmax(-1) != targets
    return 1 - (wrong.any(1)).float().mean().item(), wrong.float().mean(0)
for L in [10, 15, 20]:
    a, b = envs[L].eval_operands(200, 'validation')
    row = []
    for W in lengths:
        if W < L: continue
        r, per = acc(envs[W], a, b)
        row.append(f"W={W}: {r:.3f}")
    print(f"L={L}:", "  ".join(row), flush=True)
a, b = envs[10].eval_operands(200, 'validation')
r, per = acc(envs[15], a, b)
print("L=10 W=15 per-position error", np.round(per.numpy(), 3).tolist())
r, per = acc(envs[10], a, b)
print("L=10 W=10 per-position error", np.round(per.numpy(), 3).tolist())
