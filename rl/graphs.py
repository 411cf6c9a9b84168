"""Optimizer steps replayed as CUDA graphs: the warm start's (rl/warm_start.py `GraphedStep`, sft_cuda_graphs) and
RL's (rl/update.py, rl_cuda_graphs). A small model's eager step is bound by its kernel launches on a GPU, not by
its arithmetic: some 300-450 launches a step (a warm-start step took 17-25 ms on an H200 with its checks, RL's two
optimizer steps at 64 prompts 12.6 ms against 5.1 ms for the bare arithmetic: results/gpu/).

`CapturedSteps.step(step_fn, tensors, numbers)`: step_fn(tensors, numbers) is one whole optimizer step (forward,
backward, clipping, AdamW) that reads nothing on the host. The first WARMUP calls run it eagerly, and so does the
first call of each new set of input shapes (on a side stream on CUDA: AdamW's state and the kernels' lazy set-up
for those shapes come into being, as capture asks; as a decode graph does, model/gpt.py); the next call of those
shapes captures them, in a graph of their own, and every later one replays it: its inputs copied into the captured
ones, its outputs the captured ones (valid until the next call). `numbers` (the update's normalisers) reach the
step as 0-dim float32 device tensors, refilled before each call, so that a graph reads this call's values and not
its capture's. Off CUDA (the tests) every call runs eagerly.

The optimizer turns capturable, each learning rate a device tensor that takes whatever number the schedule (or a
loaded state) writes into the group; a state loaded into the optimizer (a snapshot) drops every graph, since
each holds AdamW's state tensors by address. `portable` saves such an optimizer as any optimizer loads it.
"""

import warnings

import torch


def portable(state: dict) -> dict:
    """An optimizer's state_dict as any optimizer of these parameters loads it, on any device: learning rates as
    numbers and capturable off (a CapturedSteps' optimizer holds its rates in device tensors)."""
    return {**state, "param_groups": [{**group, "lr": float(group["lr"]), "capturable": False}
                                      for group in state["param_groups"]]}


def can_capture(env, info) -> bool:
    """Where a whole step can be captured at all (both users ask this, then their own conditions): one CUDA device
    (DDP's all-reduce is not captured) and a task of one width (rl/long_env.py draws a width each step)."""
    return info.device.type == "cuda" and info.world_size == 1 and not hasattr(env, "draw_width")


class CapturedSteps:
    """One optimizer's steps, each replayed from a CUDA graph captured once per shape of its inputs (above)."""
    WARMUP = 3

    def __init__(self, optimizer):
        self.optimizer, self.calls, self.graphs, self.numbers = optimizer, 0, {}, {}
        self.warmed = set()  # the input shapes that have run eagerly (their lazy set-up done)
        self.first = optimizer.param_groups[0]["params"][0]
        self.device = self.first.device
        self.capture = self.device.type == "cuda"
        self.lrs = [torch.tensor(float(group["lr"]), device=self.device) for group in optimizer.param_groups]
        self.state = None  # the AdamW state tensor the graphs were captured with (the first parameter's exp_avg)
        self.follow_optimizer()

    def follow_optimizer(self):
        """The optimizer as a graph reads it, before every step: capturable, its rates in the tensors the graphs
        read (LambdaLR fills a tensor in place; a loaded state or Learner.load_state_dict writes numbers), its step
        counts on the parameters' device, and no graph left that holds AdamW state a load has replaced."""
        for group, lr in zip(self.optimizer.param_groups, self.lrs):
            group["capturable"] = True
            if group["lr"] is not lr:
                lr.fill_(group["lr"])
                group["lr"] = lr
        state = self.optimizer.state.get(self.first, {}).get("exp_avg")
        if state is not self.state:  # AdamW's state came into being, or a snapshot's replaced it
            self.graphs.clear()
            self.state = state
            # A loaded AdamW keeps its step counts on the host unless it is fused (a non-fused one, or the warm
            # start's progress loaded before its graphs), where a capturable AdamW refuses them.
            for group in self.optimizer.param_groups:
                for p in group["params"]:
                    step = self.optimizer.state.get(p, {}).get("step")
                    if torch.is_tensor(step):
                        self.optimizer.state[p]["step"] = step.to(p.device)

    def one_offs(self) -> int:
        """The one-off costs paid so far: shapes run eagerly once before their capture, and captures."""
        return len(self.warmed) + len(self.graphs)

    def warming_up(self) -> bool:
        """Whether the next call still runs eagerly whatever its shape (the first WARMUP calls)."""
        return self.calls < self.WARMUP

    def step(self, step_fn, tensors: tuple, numbers: dict = None):
        """step_fn(tensors, numbers)'s outputs after one optimizer step: eagerly, or replayed from the graph of
        these shapes. tensors: a tuple of tensors (None where absent); numbers: {name: float}."""
        self.follow_optimizer()
        self.calls += 1
        for name, value in (numbers or {}).items():  # (fill_ launches a kernel; a new tensor would copy and sync)
            self.numbers.setdefault(name, torch.zeros((), device=self.device)).fill_(value)
        numbers = {name: self.numbers[name] for name in numbers or {}}
        if not self.capture:
            self.optimizer.zero_grad(set_to_none=True)
            return step_fn(tensors, numbers)
        shapes = tuple(None if t is None else (tuple(t.shape), t.dtype) for t in tensors)
        if shapes not in self.graphs and (self.calls <= self.WARMUP or shapes not in self.warmed):
            self.warmed.add(shapes)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), warnings.catch_warnings():
                # (torch warns that a capturable optimizer runs uncaptured: these steps are meant to)
                warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
                self.optimizer.zero_grad(set_to_none=True)
                outputs = step_fn(tensors, numbers)
            torch.cuda.current_stream().wait_stream(side)
            return outputs
        if shapes not in self.graphs:
            inputs = tuple(None if t is None else t.clone() for t in tensors)
            self.optimizer.zero_grad(set_to_none=True)  # the capture's backward allocates the gradients it writes
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs = step_fn(inputs, numbers)
            self.graphs[shapes] = graph, inputs, outputs
        else:
            graph, inputs, outputs = self.graphs[shapes]
            for captured, t in zip(inputs, tensors):
                if t is not None:
                    captured.copy_(t)
        graph.replay()
        return outputs
