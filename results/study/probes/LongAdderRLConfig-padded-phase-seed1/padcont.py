"""Probe: continue a cached warm start with supervised steps on its own lengths (1-10 digits), half the steps
written at widths up to 40 (sft_pad_ndigits=40, pad_share=0.5); validation greedy per length every 100 steps;
save the weights as a warm start file with the RL config's fingerprint. Usage: padcont.py SEED STEPS OUT.pt"""
import json, sys, time, copy
import torch
from model.gpt import GPT, GPTConfig
from rl import seeding
from rl.dist import DistInfo
from rl.evaluate import evaluate
from rl.long_env import environments
from rl.rl_ddp import config_from_args
from rl.snapshot import load_snapshot, save_atomic
from rl.update import lr_lambda
from rl.warm_start import teacher_forced_step

seed, N, dest = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
extra = sys.argv[4:]
config = config_from_args(["--config_name", "LongAdderRLConfig", f"--seed={seed}", "--sft_pad_ndigits=40",
                           "--rl_pad_ndigits=40", "--pad_share=0.5", *extra])
lengths = [5, 10, 15, 20, 30, 40]
envs = environments(config.task_args(), lengths)
env = envs["sft"]
print("sft env", env.lo, env.hi, "pad", getattr(env, "pad_ndigits", None), "share", getattr(env, "pad_share", None))
snap = load_snapshot(f"out/lengths/LongAdderRLConfig-seed{seed}/warm_start.pt")
model = GPT(GPTConfig(**config.model_args())); model.load_state_dict(snap["model"])
opt = model.configure_optimizer(lr=config.sft_learning_rate, weight_decay=config.weight_decay,
                                betas=(config.adam_beta1, config.adam_beta2))
sets = {L: e.eval_operands(200, "validation") for L, e in envs["eval"].items()}
def val():
    model.eval()
    r = {L: round(evaluate(model, envs["eval"][L], *sets[L], DistInfo(), batch_size=250, num_mistakes=0,
                           split="validation").accuracy, 3) for L in lengths}
    model.train(); return r
log = [{"step": 0, "val": val()}]; print(log[-1], flush=True)
model.train(); t0 = time.time()
for i in range(N):
    for g in opt.param_groups:
        g["lr"] = config.sft_learning_rate * lr_lambda(i, warmup_steps=10, total_steps=N, min_lr_ratio=0.1)
    seeding.set_step_width(env, seed + 2, i, seeding.SFT_WIDTHS)
    a, b = env.sample_operands(config.sft_batch_size, seeding.numpy_rng(seed + 2, 0, i, seeding.SFT_PROBLEMS))
    loss = teacher_forced_step(model, env, opt, a, b, "cpu", grad_clip=config.grad_clip,
                               rng=seeding.numpy_rng(seed + 2, 0, i, seeding.POSITIONS))
    if (i + 1) % 100 == 0 or i + 1 == N:
        log.append({"step": i + 1, "seconds": round(time.time() - t0, 1), "loss": round(loss.item(), 4), "val": val()})
        print(log[-1], flush=True)
out = dict(snap); out["model"] = model.state_dict()
out["steps"] = snap["steps"] + N; out["seconds"] = snap["seconds"] + time.time() - t0
save_atomic(out, dest)
json.dump({"seed": seed, "steps": N, "extra": extra, "log": log}, open(dest + ".json", "w"), indent=1)
