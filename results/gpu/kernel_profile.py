"""Device check 3 of issue 33: where the time of sampling and of the update goes at 4,096 prompts x 8 answers
(AdderRLConfig, random weights, bf16 autocast), from torch.profiler's CUDA kernel times. Prints two tables.
Device check 4: `python results/gpu/kernel_profile.py 4096 matmul` profiles attention in plain matmuls."""
import sys

import torch

from rl.tools.perf import Sweep, fixed_update

s = Sweep("AdderRLConfig", torch.device("cuda" if torch.cuda.is_available() else "cpu"))
trainer = s.trainer(int(sys.argv[1]) if len(sys.argv) > 1 else 4096)
model, env, c = trainer.model.eval(), trainer.env, trainer.config
matmul = sys.argv[2:] == ["matmul"]
for graphs in (False,):
    s.runtime(model, "bf16", graphs, matmul=matmul)
    prompts = env.encode(*env.sample_operands(c.rl_batch_size, __import__("numpy").random.default_rng(0)))[0].to(s.device)
    run = lambda: model.generate(prompts, env.answer_len, temperature=1.0, end_token=env.end_token,
                                 pad_token=env.pad_token, num_samples=8, with_stats=True, with_nonfinite=True)
    run(); torch.cuda.synchronize() if s.cuda else None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as p:
        run(); torch.cuda.synchronize() if s.cuda else None
    print("== sampling, eager bf16, 4096 x 8 ==")
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60))
s.runtime(model, "bf16", False, matmul=matmul)
_, update = fixed_update(trainer)
update(); torch.cuda.synchronize() if s.cuda else None
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as p:
    update(); torch.cuda.synchronize() if s.cuda else None
print("== update, bf16, 4096 x 8 ==")
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60))
