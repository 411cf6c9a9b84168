import sys, torch, numpy as np
from rl.evaluate import load_for_evaluation, eval_position_ids
torch.set_num_threads(2)
path=sys.argv[1]
model, envs, snap = load_for_evaluation(path, [20,30,40])
model.eval()
for L, env in envs.items():
    a,b = env.eval_operands(200, 'validation')
    prompts, targets = env.encode(a,b)
    pos = eval_position_ids(env, len(prompts), 'cpu')
    with torch.no_grad():
        x = torch.cat([prompts, targets], 1)
        logits = model(x[:, :-1], pos=pos[:, :x.shape[1]-1]) if True else None
        if isinstance(logits, tuple): logits = logits[0]
        P = prompts.shape[1]
        pred = logits[:, P-1:].argmax(-1)
        wrong = (pred != targets).float()
    per = wrong.mean(0).numpy()
    print(L, 'tf token err by answer pos:', np.round(per,3).tolist())
    print('  problems with >=1 tf error', (wrong.sum(1)>0).float().mean().item())
