"""Device check 5 of issue 33: where a run's seconds go on a GPU, before anything is changed.

    PYTHONPATH=. python results/gpu/session5_probe.py startup        # each start-up stage in a fresh process
    PYTHONPATH=. python results/gpu/session5_probe.py steps 4096     # whole RL steps one by one, graphs captured

startup: the seconds of each stage a run pays before its first step, each timed alone in a new process
(import torch, CUDA's context, torch._dynamo's import, the first cuBLAS matmul in fp32 and bf16, the
repository's imports, the trainer's build). steps: a perf-sweep trainer (random weights, digit_match,
bf16 autocast, CUDA graphs, matmul attention) runs 10 steps; each line gives the step's seconds, its
stage shares, the answers it generated and how many decode graphs the model holds after it.
"""
import json
import subprocess
import sys
import time

STAGES = {
    "import torch": "pass",
    "CUDA context": "torch.empty(1, device='cuda'); torch.cuda.synchronize()",
    "import torch._dynamo": "import torch._dynamo",
    "first fp32 matmul": "a = torch.randn(256, 256, device='cuda'); (a @ a).sum().item()",
    "first bf16 matmul": ("a = torch.randn(256, 256, device='cuda')\n"
                          "with torch.autocast('cuda', dtype=torch.bfloat16): (a @ a).float().sum().item()"),
    "repository imports": "from rl.math_trainer import MathRLTrainer; from rl import evaluate, warm_start",
    "trainer build (adder)": ("from rl.math_trainer import MathRLTrainer; from rl import dist\n"
                              "from configs import get_config_class\n"
                              "c = get_config_class('AdderRLConfig')(device='cuda', init_from='scratch')"
                              ".get_args_ready()\n"
                              "MathRLTrainer.build(c, dist.DistInfo(device=torch.device('cuda')))\n"
                              "torch.cuda.synchronize()"),
}
PRELUDE = {"import torch": "import time\nt = time.perf_counter()\nimport torch\n"}


def startup():
    for name, code in STAGES.items():
        # everything before the stage runs first, untimed, so that each line is the stage's own seconds
        before = PRELUDE.get(name, "import time, torch\n")
        needs = [] if name in ("import torch", "CUDA context") else ["torch.empty(1, device='cuda')"]
        script = before + "\n".join(needs) + ("\nt = time.perf_counter()\n" if name != "import torch" else "\n") + \
            code + "\nprint(time.perf_counter() - t)"
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        seconds = float(out.stdout.split()[-1]) if out.returncode == 0 else None
        print(json.dumps({"stage": name, "seconds": seconds, "error": out.stderr[-300:] if seconds is None else None}))


def steps(prompts: int, n: int = 10):
    import torch
    from rl.tools.perf import Sweep
    s = Sweep("AdderRLConfig", torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    trainer = s.trainer(prompts, cuda_graphs=True, matmul_attention=True)
    for i in range(n):
        t = time.perf_counter()
        m = trainer.train_step()
        if s.cuda:
            torch.cuda.synchronize()
        print(json.dumps({"step": i, "wall": round(time.perf_counter() - t, 4), "step_seconds": m["perf/step_seconds"],
                          **{k: round(m[f"perf/{k}_share"], 3) for k in ("rollout", "reward", "update", "other")},
                          "answers": m["train/answers_generated"], "graphs": len(trainer.model._graphs)}))


if __name__ == "__main__":
    startup() if sys.argv[1] == "startup" else steps(int(sys.argv[2]))
