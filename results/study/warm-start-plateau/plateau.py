"""The warm start step by step, as rl/warm_start.py trains it (its own supervised_step, AdamW and schedule, the
model and environments of MathRLTrainer.build): the training loss of every step and validation accuracy every 25
steps (every 5 once the loss is under 0.5), until the validation target; it gives up at step 250 if the loss is
still above 0.9 (still on the plateau). Prints one JSON object; progress on stderr.

    PYTHONPATH=. python results/study/warm-start-plateau/plateau.py --config_name AdderRLConfig --seed=0 \
        --sft_target_accuracy=0.9 --sft_batch_size=512 --sft_learning_rate=2e-3 --sft_max_steps=450 [@qk_scale=4]

Any option of rl/rl_ddp.py; and two changes to the initial weights, written @name=value: @qk_scale=S multiplies
the query and key rows of every block's c_attn by S (what --qk_init_scale=S does, which came after these runs),
@wpe_std=S draws the position embeddings again at std S."""
import json, sys, time, math
import torch
from configs.cli import parse_command_line, build_config
from rl.math_trainer import MathRLTrainer
from rl import dist
from rl.warm_start import supervised_step, warm_start_schedule
from rl.evaluate import evaluate

argv = sys.argv[1:]
hooks = [a for a in argv if a.startswith("@")]
argv = [a for a in argv if not a.startswith("@")]
c = build_config(parse_command_line(argv))
info = dist.DistInfo()
trainer = MathRLTrainer.build(c, info)  # the run's own model (seeded) and environments
model, env = trainer.model, trainer.sft_env
for h in hooks:
    k, v = h[1:].split("=")
    v = float(v)
    if k == "wpe_std":
        torch.nn.init.normal_(model.wpe.weight, std=v)
    elif k == "qk_scale":  # multiply the q and k rows of c_attn
        for blk in model.blocks:
            n = c.n_embed
            with torch.no_grad():
                blk.attn.c_attn.weight[: 2 * n] *= v
    else:
        raise SystemExit(f"unknown hook {k}")
opt = model.configure_optimizer(lr=c.sft_learning_rate, weight_decay=c.weight_decay, betas=(c.adam_beta1, c.adam_beta2))
sched = warm_start_schedule(opt, c, max(c.sft_warmup_steps, 1), c.sft_max_steps)
va, vb = env.eval_operands(c.sft_num_eval, "validation")
losses, vals, t0 = [], [], time.time()
model.train()
for step in range(c.sft_max_steps):
    loss = supervised_step(model, env, opt, c, info, step)
    sched.step()
    losses.append(round(loss.item(), 4))
    s = step + 1
    if s % 25 == 0 or (losses[-1] < 0.5 and s % 5 == 0):
        acc = evaluate(model, env, va, vb, info, batch_size=c.eval_batch_size, num_mistakes=0, split="validation").accuracy
        model.train()
        vals.append((s, acc))
        if s % 25 == 0:
            print(f"step {s} loss {sum(losses[-5:])/5:.3f} val {acc:.3f} {time.time()-t0:.0f}s", file=sys.stderr, flush=True)
        if acc >= c.sft_target_accuracy:
            break
    if s == 250 and sum(losses[-10:]) / 10 > 0.9:
        print('aborted: still on the plateau at step 250', file=sys.stderr)
        break
def first(pred):
    return next((i + 1 for i in range(len(losses)) if pred(i)), None)
mean10 = lambda i: sum(losses[max(0, i - 9): i + 1]) / len(losses[max(0, i - 9): i + 1])
out = {"args": sys.argv[1:], "steps": len(losses), "loss_below_1.2": first(lambda i: i >= 9 and mean10(i) < 1.2),
       "loss_below_0.5": first(lambda i: i >= 9 and mean10(i) < 0.5),
       "val_0.5": next((s for s, a in vals if a >= 0.5), None), "val_target": next((s for s, a in vals if a >= c.sft_target_accuracy), None),
       "seconds": round(time.time() - t0, 1), "losses": losses, "vals": vals}
print(json.dumps(out))
