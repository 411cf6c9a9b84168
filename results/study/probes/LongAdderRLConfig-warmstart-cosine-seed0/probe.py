"""Probe: the long adder's warm start with a cosine-decayed learning rate (1e-3 -> 1e-4 over 1,000 steps)."""
import copy, json, math, sys, time
import torch
from model.gpt import GPT, GPTConfig
from rl import seeding
from rl.dist import DistInfo
from rl.evaluate import evaluate
from rl.long_env import environments
from rl.rl_ddp import config_from_args
from rl.warm_start import supervised_step

config = config_from_args(["--config_name", "LongAdderRLConfig", "--seed=0", "--no_wandb"])
envs = environments(config.task_args(), [5, 10, 15, 20, 30, 40])
env, info = envs["sft"], DistInfo()
torch.manual_seed(0)
model = GPT(GPTConfig(**config.model_args()))
opt = model.configure_optimizer(lr=config.sft_learning_rate, weight_decay=config.weight_decay,
                                betas=(config.adam_beta1, config.adam_beta2))
total, warm, peak = 1000, 50, config.sft_learning_rate
val_env = copy.copy(env)
va, vb = val_env.eval_operands(250, "validation")
t0, log = time.time(), []
model.train()
for step in range(total):
    lr = peak * (step + 1) / warm if step < warm else peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm))))
    for g in opt.param_groups:
        g["lr"] = lr
    loss = supervised_step(model, env, opt, config, info, step)
    if (step + 1) % 50 == 0:
        acc = evaluate(model, val_env, va, vb, info, num_mistakes=0, split="validation").accuracy
        model.train()
        log.append((step + 1, round(time.time() - t0, 1), round(loss.item(), 4), acc))
        print(f"step {step + 1} lr {lr:.2e} loss {loss.item():.3f} validation(10 digits) {acc:.3f} {time.time() - t0:.0f}s", flush=True)
model.eval()
lengths = {}
for L, e in envs["eval"].items():
    a, b = e.eval_operands(200, "validation")
    lengths[L] = evaluate(model, e, a, b, info, num_mistakes=0, split="validation").accuracy
    print(f"{L} digits: validation {lengths[L]:.3f}", flush=True)
json.dump({"curve": log, "by_length": lengths, "seconds": time.time() - t0}, open(sys.argv[1], "w"), indent=1)
