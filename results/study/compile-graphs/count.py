"""How many graphs torch.compile makes in a run with --compile=true, on the CPU (dynamo's graphs, run by its eager
backend: the count, not the speed). The adder preset's model (n_embed 256, 8 heads: a head size of 32) at 32 prompts
a step, the first sampling round's prompt count equal to the head size by chance; from scratch, three RL steps and
one validation evaluation (1,000 problems, batches of 500), with and without prefix sharing. One JSON line each.

    PYTHONPATH=<tree> python results/study/compile-graphs/count.py <label>
"""
import functools
import json
import sys

import torch

torch.compile = functools.partial(torch.compile, backend="eager")
from torch._dynamo.utils import counters  # noqa: E402

from configs import get_config_class  # noqa: E402
from rl.math_trainer import MathRLTrainer  # noqa: E402

torch.set_num_threads(2)
for share in (False, True):
    torch._dynamo.reset()
    counters.clear()
    c = get_config_class("AdderRLConfig")(init_from="scratch", rl_batch_size=32, compile=True, prefix_sharing=share,
                                          num_eval=1000, eval_batch_size=500).get_args_ready()
    trainer = MathRLTrainer.build(c)
    for _ in range(3):
        trainer.train_step()
    trainer.accuracy("validation")
    print(json.dumps(dict(tree=sys.argv[1], prefix_sharing=share, graphs=counters["stats"]["unique_graphs"],
                          recompile_limit=torch._dynamo.config.recompile_limit, torch=torch.__version__)), flush=True)
