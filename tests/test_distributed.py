"""One global batch, one process or two: every optimizer step takes the same gradient, for every
algorithm. Two gloo processes each get half of the batch (whole prompt groups) and the minibatches
are laid out so the union of the ranks' minibatch k is the one process's minibatch k.
Run: python -m pytest tests/test_distributed.py"""

import torch
import torch.distributed

from helpers import assert_grads_close, capture_gradients, end_spawned_worker, make_trainer, run_ranks
from rl.algorithms import ALGORITHMS
from rl.dist import DistInfo, reduce_sums
from rl.rollout import RolloutStats

CASES = {name: dict(rl_algorithm=name) for name in ALGORITHMS}
CASES["rft"].update(ndigit=1, n_embed=64, rewards="exact_match:1.0")
CASES.update({"batch-zscore": dict(rl_algorithm="reinforce", advantage_mode="batch_zscore"),
              "kl-k1": dict(rl_algorithm="grpo", kl_coef=0.5, kl_estimator="k1"),
              "token-credit": dict(rl_algorithm="dapo", advantage_mode="token_zscore"),
              "kl-k2-entropy": dict(rl_algorithm="ppo", kl_coef=0.5, kl_estimator="k2", entropy_coef=0.1),
              # untied, the critic's trunk must hold no parameter without a gradient, or DDP's reduction fails
              "ppo_critic-untied": dict(rl_algorithm="ppo_critic", tie_weights=False),
              # each rank's micro-batches read each prompt once, through its DDP wrapper
              "dapo-prefix-sharing": dict(rl_algorithm="dapo", prefix_sharing=True),
              # and the critic's through its own DDP wrapper
              "ppo_critic-prefix-sharing": dict(rl_algorithm="ppo_critic", tie_weights=False, prefix_sharing=True)})
STEPS = 2  # the second step has a baseline and a policy that has moved away from the KL reference


def global_batches(case: str) -> dict:
    """The weights to start from, and (first round, batch) of each step, sampled by one process and cut
    to an even number of groups."""
    trainer, out = make_trainer(**CASES[case]), []
    if case == "rft":  # answers that are right, to imitate
        from test_trainer import supervised
        supervised(trainer, steps=300)
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    G = trainer.config.rl_rollout_size
    for step in range(STEPS):
        first, batch, _ = trainer.sample(step)
        groups = len(batch) // G // 2 * 2
        out.append((first, batch.select(slice(0, groups * G))))
        trainer.train_step()  # so the next step samples from a moved policy, as a real run would
    return {"weights": weights, "steps": out}


def halves(rollout, rank: int, world: int):
    n = len(rollout) // world
    return rollout.select(slice(rank * n, (rank + 1) * n))


def interleaved_orders(trainer, num_rows: int, world: int) -> list:
    """Orders for one process such that its minibatch k is the union of the ranks' minibatch k when
    each rank takes its rows in order (see minibatch_orders)."""
    c, half = trainer.config, num_rows // world
    if c.ppo_minibatches == 1:
        return [torch.arange(num_rows)] * c.ppo_epochs
    chunks = [torch.tensor_split(torch.arange(half), c.ppo_minibatches) for _ in range(world)]
    order = torch.cat([torch.cat([r * half + chunks[r][k] for r in range(world)]) for k in range(c.ppo_minibatches)])
    return [order] * c.ppo_epochs


def run_steps(case: str, batches: list, rank: int, world: int) -> list:
    info = DistInfo(rank, rank, world, torch.device("cpu"))
    trainer = make_trainer(info=info, grad_clip=0.0, **CASES[case])
    trainer.model.load_state_dict(batches["weights"])  # where the sampler started (warmed up for rft)
    step = {"i": 0}

    def sample(_):
        first, batch = batches["steps"][step["i"]]
        step["i"] += 1
        return halves(first, rank, world), halves(batch, rank, world), RolloutStats(rounds=1,
                                                                                   answers=len(first) // world)
    trainer.sample = sample
    if world == 1:
        trainer.updater.minibatch_orders = lambda step, n: interleaved_orders(trainer, n, 2)
    else:
        trainer.updater.minibatch_orders = lambda step, n: [torch.arange(n)] * trainer.config.ppo_epochs
    grads = capture_gradients(trainer)
    for _ in range(STEPS):
        trainer.train_step()
    return grads


def worker(rank: int, store: str, out: str, batches: str):
    # a file the test wrote of its own rollouts (a forked process is sent at most 256 shared tensors)
    batches = torch.load(batches, weights_only=False)
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        torch.save({case: run_steps(case, batches[case], rank, 2) for case in CASES}, f"{out}.{rank}")
        torch.distributed.barrier()  # neither rank tears the group down while the other's last message is in flight
    finally:
        torch.distributed.destroy_process_group()
    end_spawned_worker()


def test_two_processes_take_the_one_process_gradient_for_every_algorithm(tmp_path):
    batches = {case: global_batches(case) for case in CASES}
    torch.save(batches, tmp_path / "batches.pt")
    run_ranks(worker, (str(tmp_path / "store"), str(tmp_path / "grads"), str(tmp_path / "batches.pt")))
    ranks = [torch.load(f"{tmp_path / 'grads'}.{r}", weights_only=True) for r in range(2)]
    for case in CASES:
        one = run_steps(case, batches[case], 0, 1)
        two = ranks[0][case]
        assert len(one) == len(two) == STEPS * CASES_STEPS(case), case
        for a, b in zip(two, one):
            assert_grads_close(a, b, rtol=1e-4)
        for a, b in zip(ranks[1][case], two):  # after the all-reduce every rank holds the same gradient
            assert_grads_close(a, b, rtol=0)


def CASES_STEPS(case: str) -> int:
    c = make_trainer(**CASES[case]).config
    return c.ppo_epochs * c.ppo_minibatches


# ---- the metrics' sums: one all-reduce, name to name ---------------------------------------------
def sums_worker(rank: int, store: str, out: str):
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:  # a name may be a tensor on one rank and a float on another (rank 0's gradient norm alone, say)
        values = {"a": torch.tensor(1.5) if rank == 0 else 0.25, "n": 3, "b": 2.0 if rank == 0 else torch.tensor(4.0),
                  "c": torch.tensor([0.5 + rank])}
        torch.save(reduce_sums(values, torch.device("cpu")), f"{out}.{rank}")
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()
    end_spawned_worker()


def test_reduce_sums_adds_each_name_over_ranks_whatever_each_rank_holds_it_as(tmp_path):
    run_ranks(sums_worker, (str(tmp_path / "store"), str(tmp_path / "sums")))
    for rank in range(2):
        sums = torch.load(f"{tmp_path / 'sums'}.{rank}")
        assert sums == {"a": 1.75, "n": 6.0, "b": 6.0, "c": 2.0} and list(sums) == ["a", "n", "b", "c"], sums
