"""Which answer layout a small GPT learns multiplication from: supervised training curves, one per layout.

    python -m rl.tools.formats                          # 2-digit: plain, shifted and unshifted partial products
    python -m rl.tools.formats --ndigit 3 --steps 3000 --layouts shifted unshifted

Each layout trains the config's model from scratch with teacher forcing on training pairs (batch
--batch, AdamW at --lr after a 50-step warmup, the project's warm-start loss) and every --every
steps reports greedy final-answer accuracy on the *validation* split, which is what the choice of
layout looks at, and on the training pairs, which shows memorisation (a gap between the two). The
layouts, for 12*34:

    plain       "8040$"            the product alone (show_work=false)
    shifted     "840+0630=8040$"   partial products a*b_i*10^i, running sums (the shipped layout)
    unshifted   "840+630=8040$"    the same without the shift's zeros: shorter, but each partial
                                   product's digits sit one place off from the sum's

The unshifted layout is registered here as its own operation through the same `@operation`
registry a user adds one with, when the tool runs (`register`; importing this module, as rl/tools/readme.py
does, leaves the task list as it was). Prints one JSON line per evaluation, then a Markdown table. Each
layout and seed is written to results/formats/ as it finishes, and one whose file exists is read
back instead of trained again.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

from model.gpt import GPT, GPTConfig
from rl.dist import DistInfo
from rl.evaluate import evaluate
from rl.math_env import EQUALS, MathEnvironment, operation
from rl.rl_ddp import get_config_class
from rl.tools import results
from rl.tools.report import markdown_table
from rl.warm_start import teacher_forced_step


def unshifted_multiplication(a: int, b: int, ndigit: int) -> list:
    """The school method without the shift's zeros: a * b_i in n + 1 digits, running sums in full (a, b: ints or
    int64 arrays, as long_multiplication's)."""
    n = ndigit
    parts = [a * (b // 10 ** i % 10) for i in range(n)]
    steps, total = [("", parts[0], n + 1)], parts[0]
    for i in range(1, n):
        total = total + parts[i] * 10 ** i  # (not +=: on an array that would change parts[0] in place)
        steps.append(("+", parts[i], n + 1))
        if i < n - 1:
            steps.append((EQUALS, total, n + 1 + i))
    return steps


def register():
    """The unshifted layout's task, multiplier_unshifted, in the registry (again: the same task)."""
    operation("multiplier_unshifted", "*", answer_digits=lambda n: 2 * n, steps=unshifted_multiplication,
              vectorized=True)(lambda a, b: a * b)


LAYOUTS = {"plain": dict(task="multiplier", show_work=False), "shifted": dict(task="multiplier", show_work=True),
           "unshifted": dict(task="multiplier_unshifted", show_work=True)}


def curve(layout: str, seed: int, args) -> list:
    config = get_config_class(args.config)(ndigit=args.ndigit, seed=seed, **LAYOUTS[layout]).get_args_ready()
    env = MathEnvironment(**config.task_args())
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**config.model_args()))
    optimizer = model.configure_optimizer(lr=args.lr, weight_decay=args.weight_decay,
                                          betas=(config.adam_beta1, config.adam_beta2))
    rng, info, rows, t0 = np.random.default_rng(seed), DistInfo(), [], time.time()
    val_a, val_b = env.eval_operands(args.num_eval, "validation")
    train_a, train_b = env.sample_operands(args.num_eval, np.random.default_rng(10_000 + seed))
    for step in range(1, args.steps + 1):
        for group in optimizer.param_groups:
            group["lr"] = args.lr * min(1.0, step / 50)
        teacher_forced_step(model, env, optimizer, *env.sample_operands(args.batch, rng), "cpu", grad_clip=1.0)
        if step % args.every == 0:
            val = evaluate(model, env, val_a, val_b, info, num_mistakes=0, split="validation")
            train = evaluate(model, env, train_a, train_b, info, num_mistakes=0, split="train")
            rows.append(dict(layout=layout, seed=seed, step=step, examples=step * args.batch,
                             validation=round(val.accuracy, 4), train=round(train.accuracy, 4),
                             answer_tokens=env.answer_len, seconds=round(time.time() - t0, 1)))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def run_layout(layout: str, seed: int, args) -> dict:
    """One layout and seed: its record from results/formats/ if there, else trained now and saved."""
    key = {"config": args.config, "ndigit": args.ndigit, "layout": layout, "seed": seed, "steps": args.steps,
           "every": args.every, "batch": args.batch, "lr": args.lr, "weight_decay": args.weight_decay,
           "num_eval": args.num_eval}
    name = "-".join([args.config, f"{args.ndigit}digit", layout, f"seed{seed}", f"{args.steps}steps"])
    path = results.path("formats", name)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    rows = curve(layout, seed, args)
    command = (f"python -m rl.tools.formats --config {args.config} --ndigit {args.ndigit} --layouts {layout} "
               f"--seeds {seed} --steps {args.steps} --every {args.every} --batch {args.batch} --lr {args.lr} "
               f"--weight_decay {args.weight_decay} --num_eval {args.num_eval}")
    rec = {"tool": "formats", "command": command, "key": key, **results.machine(), "curve": rows,
           "summary": {"final_validation": rows[-1]["validation"], "final_train": rows[-1]["train"],
                       "seconds": rows[-1]["seconds"], "answer_tokens": rows[-1]["answer_tokens"]}}
    results.save(rec, path)
    return rec


def table(records: list) -> str:
    """Validation accuracy (training pairs' in brackets) per layout and evaluation: median over seeds."""
    layouts = dict.fromkeys(r["key"]["layout"] for r in records)
    steps, out = sorted({p["step"] for r in records for p in r["curve"]}), []
    for layout in layouts:
        rs = [r for r in records if r["key"]["layout"] == layout]
        cells = []
        for s in steps:
            at = [p for r in rs for p in r["curve"] if p["step"] == s]
            cells.append(f"{statistics.median(p['validation'] for p in at):.3f} "
                         f"({statistics.median(p['train'] for p in at):.3f})" if at else "-")
        out.append([layout, rs[0]["summary"]["answer_tokens"], len(rs), *cells])
    return markdown_table(["layout", "answer tokens", "seeds", *[f"step {s}" for s in steps]], out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="MultiplierRLConfig")
    parser.add_argument("--ndigit", type=int, default=2)
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight_decay", type=float, default=0.1)
    parser.add_argument("--num_eval", type=int, default=1000)
    args = parser.parse_args()
    register()
    records = [run_layout(layout, seed, args) for layout in args.layouts for seed in args.seeds]
    print(f"\nvalidation accuracy (training pairs' in brackets), median of seeds {args.seeds}, {args.ndigit}-digit, "
          f"batch {args.batch}, lr {args.lr}\n\n" + table(records))


if __name__ == "__main__":
    main()
