"""RL's optimizer steps replayed as CUDA graphs (--rl_cuda_graphs, rl/graphs.py, rl/update.py): on the CPU the
graphed path runs eagerly (padded rows, normalisers in device scalars) and must train as the eager update does;
on CUDA (skipped without one) the captured steps must train as their eager steps.
Run: python -m pytest tests/test_graphs.py"""

import copy

import pytest
import torch

from helpers import TINY_ARGS, load, make_config, make_trainer, run
from rl.dist import DistInfo
from rl.errors import ConfigError
from rl.graphs import CapturedSteps
from rl.long_env import LongAdditionEnvironment
from rl.update import UpdateBatch, graphs_apply, padded_rows

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def graphed_trainer(**overrides):
    """A trainer whose update takes the graphed path (on the CPU: eagerly, padded, as a graph would replay it)."""
    trainer = make_trainer(rl_ga_steps=1, **overrides)
    trainer.updater.graphed = True
    return trainer


def test_padded_rows_is_the_next_power_of_two_at_most_the_largest_minibatch():
    assert [padded_rows(n, 256) for n in (0, 1, 2, 3, 5, 64, 65, 200, 256)] == [1, 1, 2, 4, 8, 64, 128, 256, 256]
    assert padded_rows(200, 230) == 230  # the largest minibatch caps it
    assert padded_rows(300, 256) == 300  # never fewer rows than given


def test_a_padded_batch_holds_the_rows_then_copies_of_the_first_that_add_nothing():
    data = UpdateBatch(sequences=torch.tensor([[1, 2], [3, 4], [5, 6]]), generated=torch.tensor([[2], [4], [6]]),
                       mask=torch.tensor([[1.0], [1.0], [1.0]]), advantages=torch.tensor([0.5, -1.0, 2.0]),
                       ref_logp=torch.tensor([[-0.1], [-0.2], [-0.3]]))
    part = data.padded(torch.tensor([2, 0]), 4, pad_token=9)
    assert part.sequences.tolist() == [[5, 6], [1, 2], [5, 6], [5, 6]]
    assert part.generated.tolist() == [[6], [2], [6], [6]]
    assert torch.equal(part.ref_logp, data.ref_logp[[2, 0, 2, 2]])  # a real row's log-probs: finite terms
    assert part.mask.tolist() == [[1.0], [1.0], [0.0], [0.0]] and part.advantages.tolist() == [2.0, 0.5, 0.0, 0.0]
    assert part.old_logp is None and data.mask.tolist() == [[1.0]] * 3  # (the batch itself untouched)
    none = data.padded(torch.tensor([], dtype=torch.long), 2, pad_token=9)  # no row to copy: blank rows
    assert none.sequences.tolist() == [[9, 9], [9, 9]] and none.mask.tolist() == [[0.0], [0.0]]
    assert none.advantages.tolist() == [0.0, 0.0] and none.ref_logp.tolist() == [[0.0], [0.0]]


def test_a_masked_token_adds_exactly_0_to_the_kl_terms_gradient_however_unlikely():
    """k3 in the loss on a blank row (all-pad, an empty mask: a rank with nothing to forward) whose reference
    log-prob is far above its own: exp(ref - logp) overflows, and a gradient through the masked value would be nan
    (0 x inf), which the numerical guard would read as a broken step. Every gradient is exactly 0."""
    trainer = make_trainer(kl_coef=0.1, kl_estimator="k3")
    env, A = trainer.env, trainer.env.answer_len
    part = UpdateBatch(torch.full((1, env.prompt_len + A), env.pad_token), torch.full((1, A), env.pad_token),
                       torch.zeros(1, A), torch.zeros(1), ref_logp=torch.full((1, A), 100.0))
    out = trainer.objective.loss(trainer.model, part, dict(num_tokens=1.0, num_sequences=1.0, max_len=A))
    out["loss"].backward()
    assert out["loss"].item() == 0.0
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in trainer.model.parameters() if p.grad is not None)


@pytest.mark.parametrize("overrides", [
    dict(),  # the adder: DAPO (two minibatches, PPO ratios, skip_zero), replay
    dict(rl_algorithm="grpo"),
    dict(rl_algorithm="ppo", ppo_epochs=2, ppo_minibatches=2),
    dict(kl_coef=0.1, kl_estimator="k3", entropy_coef=0.01),  # every row forwarded, two more terms
    dict(loss_aggregation="seq-mean-token-mean"),
    dict(loss_aggregation="seq-mean-token-sum-norm"),
])
def test_the_graphed_update_trains_as_the_eager_update(overrides):
    """Blank rows add nothing to the loss or the gradient, and the normalisers read from device scalars are the
    eager numbers: four steps end at the same weights and metrics, to float rounding (the padded sums are split
    otherwise), and every optimizer step went through the graphed path."""
    eager, graphed = make_trainer(rl_ga_steps=1, **overrides), graphed_trainer(**overrides)
    for step in range(4):
        expected, got = eager.train_step(), graphed.train_step()
        assert got.keys() == expected.keys()
        for k, v in expected.items():
            if not k.startswith("perf/"):  # (timings differ between any two steps)
                assert got[k] == pytest.approx(v, rel=1e-4, abs=1e-6), (step, k)
    for (name, p), q in zip(eager.model.named_parameters(), graphed.model.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name
    assert not torch.equal(eager.model.wte.weight, make_trainer(rl_ga_steps=1, **overrides).model.wte.weight)
    # every optimizer step the eager AdamW took (none was skipped) went through the graphed path
    taken = int(eager.actor.optimizer.state[eager.model.wte.weight]["step"])
    assert graphed.updater.graphs.calls == taken > 0 and eager.updater.graphs is None


def test_captured_steps_follow_the_schedule_and_drop_their_graphs_when_a_state_is_loaded():
    """The rate a step reads is the group's latest number, the numbers reach the step as device scalars, and a
    state loaded into the optimizer (a snapshot) leaves no graph that holds the old one."""
    model = torch.nn.Linear(3, 2)
    adamw = lambda: torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    optimizer = adamw()
    steps = CapturedSteps(optimizer)
    seen = []

    def step(tensors, numbers):
        seen.append((optimizer.param_groups[0]["lr"].item(), numbers["n"].item()))
        (model(tensors[0]).sum() / numbers["n"]).backward()
        optimizer.step()
        return {}
    steps.step(step, (torch.ones(4, 3),), {"n": 4.0})
    optimizer.param_groups[0]["lr"] = 5e-4  # what a schedule writes
    steps.step(step, (torch.ones(4, 3),), {"n": 2.0})
    assert seen == [(pytest.approx(1e-3), 4.0), (pytest.approx(5e-4), 2.0)]
    assert torch.is_tensor(optimizer.param_groups[0]["lr"]) and optimizer.param_groups[0]["capturable"]
    steps.graphs["stand-in"] = "a graph holding the old state"
    steps.step(step, (torch.ones(4, 3),), {"n": 2.0})
    assert steps.graphs  # the same state: kept
    optimizer.load_state_dict(adamw().state_dict() | {"state": copy.deepcopy(optimizer.state_dict()["state"])})
    steps.step(step, (torch.ones(4, 3),), {"n": 2.0})
    assert not steps.graphs and seen[-1] == (pytest.approx(1e-3), 2.0)  # the loaded rate, read through the tensor


def test_captured_steps_run_each_new_shape_eagerly_once_then_capture_it_and_replay_it(monkeypatch):
    """The order on CUDA, CUDA's streams and graphs stood in for by ones that record it (the stand-in graph replays
    what was captured: the step on the captured inputs, into the captured outputs): WARMUP eager calls, then each
    new shape once eagerly and captured at its next call, every later call of it a replay that reads this call's
    tensors (copied into the captured ones) and numbers."""
    import contextlib
    from types import SimpleNamespace
    events, capturing = [], []

    class Graph:
        def replay(self):
            events.append("replay")
            for k, v in self.step().items():
                self.outputs[k].copy_(v)

    @contextlib.contextmanager
    def graph(g):
        events.append("capture")
        capturing.append(g)
        yield
        capturing.pop()
    stream = SimpleNamespace(wait_stream=lambda other: None)
    monkeypatch.setattr(torch.cuda, "Stream", lambda: stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    steps = CapturedSteps(torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), fused=True))
    steps.capture = True

    def step_fn(tensors, numbers):
        step = lambda: {"y": tensors[0] * numbers["n"]}
        if not capturing:
            events.append("eager")
            return step()
        capturing[-1].step, capturing[-1].outputs = step, step()
        return capturing[-1].outputs
    for rows, n in [(4, 1.0)] * 3 + [(4, 2.0), (4, 3.0), (8, 1.0), (8, 2.0), (4, 5.0), (8, 7.0)]:
        x = torch.rand(rows)
        assert torch.equal(steps.step(step_fn, (x, None), {"n": n})["y"], x * n)  # this call's, however it ran
    assert events == ["eager"] * 3 + ["capture", "replay", "replay", "eager", "capture", "replay", "replay", "replay"]
    assert len(steps.graphs) == 2 and steps.calls == 9


def test_a_graphed_runs_snapshot_resumes_exactly_and_holds_a_portable_optimizer(tmp_path):
    """The snapshot saves rates as numbers and capturable off; a graphed run resumed from it continues as the
    uninterrupted one did, bit for bit (on the CPU: the same eager arithmetic)."""
    straight = graphed_trainer()
    for _ in range(4):
        straight.train_step()
    first = graphed_trainer()
    for _ in range(2):
        first.train_step()
    snap = first.state_dict()
    assert [(type(g["lr"]), g["capturable"]) for g in snap["optimizer"]["param_groups"]] == [(float, False)] * 2
    resumed = graphed_trainer()
    resumed.load_state_dict(snap)
    for _ in range(2):
        resumed.train_step()
    for p, q in zip(straight.model.parameters(), resumed.model.parameters()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("overrides, message", [
    (dict(), "rl_cuda_graphs=True has no effect here: it needs rl_ga_steps=1 and compile=false"),
    (dict(rl_ga_steps=1, compile=True), "it needs rl_ga_steps=1 and compile=false"),
    (dict(rl_ga_steps=1, rl_algorithm="ppo_critic"), "it needs a policy-gradient objective \\(not ppo_critic or dpo"),
    (dict(rl_ga_steps=1, rl_algorithm="dpo"), "it needs a policy-gradient objective \\(not ppo_critic or dpo"),
])
def test_rl_cuda_graphs_is_refused_where_a_step_cannot_be_captured(overrides, message):
    with pytest.raises(ConfigError, match=message):
        make_config(rl_cuda_graphs=True, **overrides)


def test_rl_cuda_graphs_applies_only_on_one_cuda_device():
    config, cuda = make_config(rl_cuda_graphs=True, rl_ga_steps=1), DistInfo(device=torch.device("cuda"))
    env = make_trainer().env
    assert graphs_apply(config, env, cuda)
    assert not graphs_apply(make_config(rl_ga_steps=1), env, cuda)  # not asked
    assert not graphs_apply(config, env, DistInfo())  # the CPU
    assert not graphs_apply(config, env, DistInfo(world_size=2, device=torch.device("cuda")))  # DDP's all-reduce
    assert not graphs_apply(config, LongAdditionEnvironment((1, 5)), cuda)  # a width drawn a step
    assert not make_trainer(rl_cuda_graphs=True, rl_ga_steps=1).updater.graphed  # built on the CPU


# ---- on CUDA ----------------------------------------------------------------------------------------
@cuda
def test_captured_rl_steps_train_as_their_eager_steps():
    """The adder's update on CUDA, on one sampled batch: every optimizer step eager (the same padded rows, the same
    capturable AdamW) against steps replayed from graphs after WARMUP; the same statistics and weights to float
    rounding, and a graph captured."""
    info = DistInfo(device=torch.device("cuda", 0))
    eager, graphed = (make_trainer(rl_ga_steps=1, device="cuda", info=info) for _ in range(2))
    for trainer in (eager, graphed):
        trainer.updater.graphed = True
    eager.model.eval()
    first, batch, _ = eager.sample(0)
    targets, _ = eager.advantages(first, batch)
    eager.update(batch, targets), graphed.update(batch, targets)  # (makes each one's CapturedSteps)
    eager.updater.graphs.WARMUP = 10 ** 9  # every step eager
    for step in range(6):
        expected, got = eager.update(batch, targets), graphed.update(batch, targets)
        for k in ("policy_loss", "grad_norm", "ratio_sum", "tokens", "skipped"):
            assert got[k] == pytest.approx(expected[k], rel=1e-4, abs=1e-6), (step, k)
    assert graphed.updater.graphs.graphs and not eager.updater.graphs.graphs
    for (name, p), q in zip(eager.model.named_parameters(), graphed.model.parameters()):
        assert torch.allclose(p, q, atol=1e-5), name
    assert not torch.equal(eager.model.wte.weight, make_trainer(device="cuda", info=info).model.wte.weight)


@cuda
def test_a_run_with_graphed_rl_steps_resumes(tmp_path):
    args = [*TINY_ARGS, "--no_wandb", "--device=cuda", "--rl_cuda_graphs=true", "--rl_ga_steps=1",
            f"--out_dir={tmp_path}", "--save_interval=3"]
    assert "graphed RL steps" in run([*args, "--rl_train_steps=3"]).stdout
    run([*args, "--rl_train_steps=6"])  # resumed from step 3's snapshot, its optimizer saved portable
    assert load(tmp_path / "rl_snapshot_6.pt")["step"] == 6
