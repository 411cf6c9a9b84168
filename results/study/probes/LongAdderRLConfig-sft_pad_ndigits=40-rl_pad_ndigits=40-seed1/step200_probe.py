"""Teacher-forced errors of a warm start's saved progress on 10-digit validation sums written at widths 10, 20, 40.
Usage: PYTHONPATH=. python step200_probe.py out/lengths/<run>/warm_start_progress.pt --sft_pad_ndigits=40 ..."""
import sys, torch, numpy as np
from rl.long_env import environments
from rl.evaluate import eval_position_ids
from model.gpt import GPT, GPTConfig
from rl.snapshot import load_snapshot
torch.set_num_threads(1)
snap = load_snapshot(sys.argv[1])
print(snap.keys(), snap.get("step"))
cfg = snap.get("model_args")
from rl.rl_ddp import config_from_args
config = config_from_args(["--config_name", "LongAdderRLConfig", *sys.argv[2:]])
model = GPT(GPTConfig(**config.model_args())); model.load_state_dict(snap["model"]); model.eval()
envs = environments(config.task_args(), [10, 20, 40])
sft = envs["sft"]
for W in (10, 20, 40):
    e = envs["eval"][10]
    a, b = e.eval_operands(100, 'validation')
    ew = envs["eval"][W]
    prompts, targets = ew.encode(a, b)
    pos = eval_position_ids(ew, len(prompts), 'cpu')
    x = torch.cat([prompts, targets], 1)
    with torch.no_grad():
        logits = model(x[:, :-1], pos=pos[:, :x.shape[1] - 1])
    wrong = logits[:, prompts.shape[1] - 1:].argmax(-1) != targets
    print(W, "acc", 1 - wrong.any(1).float().mean().item(), "err by pos", np.round(wrong.float().mean(0).numpy(), 2).tolist())
