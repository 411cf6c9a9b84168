"""The supervised warm start: it chooses on the validation split only, a cached one gives exactly what
training it gives, a stopped one continues to the same weights, and its cache key holds what
changes it.  Run: python -m pytest tests/test_warm_start.py"""

import numpy as np
import pytest
import torch

from helpers import TINY_ARGS, args_with, assert_same_state, load, make_config, make_trainer, run_main
from rl import warm_start
from rl.dist import DistInfo
from rl.errors import ConfigError
from rl.evaluate import EvalResult
from rl.math_env import SPLITS
from rl.warm_start import fingerprint, init_policy

SFT = dict(init_from="sft", sft_max_steps=12, sft_batch_size=32, sft_eval_interval=4, sft_save_interval=5,
           sft_target_accuracy=1.0, sft_num_eval=20)


def test_the_warm_start_never_evaluates_a_test_problem(tmp_path, monkeypatch):
    seen = []
    real = warm_start.evaluate

    def spy(model, env, a, b, info, **kw):
        seen.append((env.split_of(a, b), kw["split"]))
        return real(model, env, a, b, info, **kw)
    monkeypatch.setattr(warm_start, "evaluate", spy)
    trainer = make_trainer(out_dir=str(tmp_path), **SFT)
    init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
    assert len(seen) == 3  # steps 4, 8 and 12
    for splits, name in seen:
        assert name == "validation" and (splits == SPLITS.index("validation")).all() and len(splits) == 20


def test_the_stopping_rule_checks_every_step_from_half_the_target(tmp_path, monkeypatch):
    """Checks every sft_eval_interval steps while below half the target, then every step, and stops at
    the first check that reaches the target."""
    script, steps = iter([0.1, 0.3, 0.35, 0.45, 0.6, 0.9]), []
    monkeypatch.setattr(warm_start, "evaluate", lambda *a, **kw: steps.append(len(steps)) or
                        EvalResult(next(script), 0.0, None, 20, "validation"))
    config = dict(SFT, sft_max_steps=50, sft_eval_interval=4, sft_target_accuracy=0.5)
    trainer = make_trainer(out_dir=str(tmp_path), **config)
    calls = []
    real_step = warm_start.supervised_step
    monkeypatch.setattr(warm_start, "supervised_step", lambda *a, **kw: calls.append(a[-1]) or real_step(*a, **kw))
    init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
    # checks after steps 4 (0.1), 8 (0.3 >= 0.25: every step from here), 9 (0.35), 10 (0.45), 11 (0.6): stop
    assert len(steps) == 5 and calls == list(range(11))


@pytest.mark.slow
def test_a_cached_warm_start_gives_exactly_what_training_it_gives(tmp_path):
    """The same command twice: the first trains the warm start, the second reuses it from out_dir.
    After RL steps every tensor of the two runs is equal."""
    args = [*args_with(TINY_ARGS, init_from="sft"), "--no_wandb", "--sft_max_steps=8", "--sft_eval_interval=4",
            "--sft_num_eval=20", "--rl_train_steps=4", "--save_interval=4", "--resume=never", f"--out_dir={tmp_path}"]
    first = run_main(args)
    trained = load(tmp_path / "rl_snapshot_4.pt")
    second = run_main(args)
    assert "Warm start: supervised training" in first.stdout and "Warm start: reusing" in second.stdout
    assert_same_state(trained, load(tmp_path / "rl_snapshot_4.pt"))


def test_sft_seed_makes_the_warm_start_that_seed_makes(tmp_path):
    """--sft_seed=5 under seed 7 trains exactly the warm start --seed=5 trains (initial weights, problems,
    dropout), so each one's cache serves the other (one fingerprint); -1, the default, is the run's own seed."""
    def made(name, **settings):
        trainer = make_trainer(out_dir=str(tmp_path / name), **SFT, dropout=0.1, **settings)
        init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
        return load(tmp_path / name / "warm_start.pt")
    by_seed, by_sft_seed, own = made("seed5", seed=5), made("sft5", seed=7, sft_seed=5), made("seed7", seed=7)
    assert by_seed["fingerprint"] == by_sft_seed["fingerprint"] != own["fingerprint"]
    assert by_sft_seed["fingerprint"]["seed"] == 5 and own["fingerprint"]["seed"] == 7
    for name in by_seed["model"]:
        assert torch.equal(by_seed["model"][name], by_sft_seed["model"][name]), name
    assert not torch.equal(own["model"]["wte.weight"], by_sft_seed["model"]["wte.weight"])


def test_a_stopped_warm_start_continues_to_the_same_weights(tmp_path):
    steps_taken = []

    def train(out_dir, stop_after=None):
        trainer = make_trainer(out_dir=str(out_dir), **SFT)
        steps_taken.clear()

        def should_stop():  # asked once after every supervised step
            steps_taken.append(1)
            return stop_after is not None and len(steps_taken) >= stop_after
        return init_policy(trainer.config, trainer.env, trainer.model, DistInfo(), should_stop)

    assert train(tmp_path / "straight")["warm_start_steps"] == 12
    assert train(tmp_path / "stopped", stop_after=7) is None  # stopped after its 7th step
    assert load(tmp_path / "stopped" / "warm_start_progress.pt")["step"] == 7
    assert train(tmp_path / "stopped")["warm_start_steps"] == 12  # the same command continues...
    assert len(steps_taken) == 5  # ...with the 5 steps that were missing
    assert not (tmp_path / "stopped" / "warm_start_progress.pt").exists()
    straight = load(tmp_path / "straight" / "warm_start.pt")["model"]
    continued = load(tmp_path / "stopped" / "warm_start.pt")["model"]
    for name in straight:
        assert torch.equal(straight[name], continued[name]), name


def test_a_warm_start_stopped_after_any_step_continues_to_the_same_step_and_weights(tmp_path, monkeypatch):
    """A scripted validation accuracy (a function of the step) makes the uninterrupted warm start check
    at steps 4 and 8 (below half the target), then every step, and stop at step 10 (the target). A
    warm start stopped after each of the steps 1-10 in turn, step 8 (a check due) and step 10 (the
    target reached) among them, and continued, must stop at step 10 with the same weights."""
    accuracy = {8: 0.3, 9: 0.4, 10: 0.6}  # 0.1 elsewhere
    done, checks = {"steps": 0}, []
    real_step = warm_start.supervised_step

    def counting_step(*args, **kwargs):
        done["steps"] = args[-1] + 1
        return real_step(*args, **kwargs)
    monkeypatch.setattr(warm_start, "supervised_step", counting_step)
    monkeypatch.setattr(warm_start, "evaluate", lambda *a, **kw: checks.append(done["steps"]) or
                        EvalResult(accuracy.get(done["steps"], 0.1), 0.0, None, 20, "validation"))
    config = dict(SFT, sft_target_accuracy=0.5, sft_max_steps=20, sft_save_interval=100)

    def train(out_dir, stop_after=None):
        trainer = make_trainer(out_dir=str(out_dir), **config)
        return init_policy(trainer.config, trainer.env, trainer.model, DistInfo(),
                           lambda: stop_after is not None and done["steps"] == stop_after)

    assert train(tmp_path / "straight")["warm_start_steps"] == 10
    assert checks == [4, 8, 9, 10]
    straight = load(tmp_path / "straight" / "warm_start.pt")["model"]
    for k in range(1, 11):
        out = tmp_path / f"stopped{k}"
        outcome = train(out, stop_after=k)
        if k < 10:
            assert outcome is None and load(out / "warm_start_progress.pt")["step"] == k
            outcome = train(out)  # the same command continues
        assert outcome["warm_start_steps"] == 10, f"stopped after step {k}"
        continued = load(out / "warm_start.pt")["model"]
        for name in straight:
            assert torch.equal(straight[name], continued[name]), f"stopped after step {k}: {name}"


def test_the_warm_start_learning_rate_warms_up_linearly_over_sft_warmup_steps(tmp_path, monkeypatch):
    """Step s (0-based) trains at sft_learning_rate * min(1, (s + 1) / sft_warmup_steps)."""
    lrs = []
    real_step = warm_start.supervised_step
    monkeypatch.setattr(warm_start, "supervised_step", lambda policy, env, optimizer, *a, **kw: lrs.append(
        optimizer.param_groups[0]["lr"]) or real_step(policy, env, optimizer, *a, **kw))
    trainer = make_trainer(out_dir=str(tmp_path), **dict(SFT, sft_max_steps=6, sft_warmup_steps=4,
                                                          sft_learning_rate=1e-3))
    init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])


def test_the_warm_start_leaves_no_gradients_behind(tmp_path):
    trainer = make_trainer(out_dir=str(tmp_path), **SFT)
    init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
    assert all(p.grad is None for p in trainer.model.parameters())


@pytest.mark.parametrize("change", [dict(validation_fraction=0.1), dict(show_work=True, task="multiplier"),
                                    dict(sft_num_eval=30), dict(weight_decay=0.2), dict(seed=7), dict(n_layer=2),
                                    dict(sft_target_accuracy=0.5), dict(test_fraction=0.2),
                                    dict(sft_worked_examples=64), dict(sft_patience=8)])
def test_the_cache_key_holds_what_changes_the_warm_start(change):
    base = fingerprint(make_config(**SFT), world_size=1)
    assert fingerprint(make_config(**{**SFT, **change}), world_size=1) != base
    assert fingerprint(make_config(**SFT), world_size=2) != base  # each rank draws its share of a batch
    # ...and not what leaves it unchanged
    assert fingerprint(make_config(**SFT, learning_rate=5e-4, rl_algorithm="grpo"), world_size=1) == base
    assert np.isscalar(base["version"])


def test_patience_stops_the_warm_start_when_validation_stops_improving(tmp_path, monkeypatch):
    """With sft_patience, checks stay every sft_eval_interval steps (no target to stop just past), the
    warm start stops at the first check sft_patience or more steps after the best one, and the best
    check's weights are what it leaves."""
    script, weights = iter([0.1, 0.3, 0.6, 0.5, 0.6, 0.55, 0.9]), []

    def scripted(model, *a, **kw):
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
        return EvalResult(next(script), 0.0, None, 20, "validation")
    monkeypatch.setattr(warm_start, "evaluate", scripted)
    trainer = make_trainer(out_dir=str(tmp_path), **dict(SFT, sft_max_steps=50, sft_eval_interval=2, sft_patience=5))
    result = warm_start.train_warm_start(trainer.config, trainer.env, trainer.model, DistInfo())
    # checks at steps 2, 4, 6 (0.6, the best), 8 (2 since), 10 (0.6 is not better: 4 since), 12 (6 >= 5): stop
    assert result[:2] == (12, 0.6) and len(weights) == 6
    final = trainer.model.state_dict()
    assert all(torch.equal(v, weights[2][k]) for k, v in final.items())  # step 6's weights, not step 12's
    assert not all(torch.equal(v, weights[-1][k]) for k, v in final.items())


def test_patience_that_runs_out_before_any_improvement_goes_back_to_the_first_check(tmp_path, monkeypatch):
    """Validation at 0 at every check: the first check is the best (was: no weights to go back to, a
    TypeError), so the warm start stops sft_patience steps after it, with its weights."""
    weights = []

    def scripted(model, *a, **kw):
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
        return EvalResult(0.0, 0.0, None, 20, "validation")
    monkeypatch.setattr(warm_start, "evaluate", scripted)
    trainer = make_trainer(out_dir=str(tmp_path), **dict(SFT, sft_max_steps=50, sft_eval_interval=2, sft_patience=5))
    result = warm_start.train_warm_start(trainer.config, trainer.env, trainer.model, DistInfo())
    assert result[:2] == (8, 0.0) and len(weights) == 4  # checks at 2 (the best), 4, 6, 8 (6 >= 5 since): stop
    assert all(torch.equal(v, weights[0][k]) for k, v in trainer.model.state_dict().items())


def test_a_scarce_warm_start_sees_only_its_fixed_pool_of_worked_examples(monkeypatch):
    config = make_config(**SFT, sft_worked_examples=64)
    trainer = make_trainer(**SFT, sft_worked_examples=64)
    pool = set(zip(*[x.tolist() for x in warm_start.worked_examples(trainer.env, 64)]))
    assert len(pool) == 64 and pool < set(zip(*[x.tolist() for x in warm_start.worked_examples(trainer.env, 256)]))
    a, b = warm_start.training_pairs(config, trainer.env, 1000, np.random.default_rng(0))
    assert set(zip(a.tolist(), b.tolist())) == pool  # 1000 draws of 64 pairs: every one, and nothing else
    assert (trainer.env.split_of(a, b) == SPLITS.index("train")).all()
    seen = []
    monkeypatch.setattr(warm_start, "teacher_forced_step", lambda policy, env, opt, a, b, *r, **kw: seen.extend(
        zip(a.tolist(), b.tolist())))
    for step in range(3):
        warm_start.supervised_step(trainer.model, trainer.env, None, config, DistInfo(), step)
    assert set(seen) <= pool and len(seen) == 3 * SFT["sft_batch_size"]
    with pytest.raises(warm_start.ConfigError, match=r"^sft_worked_examples=1000000 but the train split has only "
                       r"\d+ pairs; set it to at most \d+ \(0 for all\)$"):  # refused before start
        make_config(**SFT, sft_worked_examples=10 ** 6)


def test_the_warm_starts_rate_is_constant_or_a_cosine_to_its_min_ratio():
    """sft_min_lr_ratio=1 (every short-number preset): the old min(1, (s + 1) / warmup), constant after warmup;
    0.1: a cosine from the peak at the end of warmup to a tenth of it at sft_max_steps, hand-computed."""
    def rates(**overrides):
        c = make_config(init_from="sft", sft_learning_rate=1e-3, sft_warmup_steps=2, sft_max_steps=10, **overrides)
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=c.sft_learning_rate)
        scheduler, out = warm_start.warm_start_schedule(optimizer, c, 2, c.sft_max_steps), []
        for _ in range(11):
            out.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        return out
    assert rates() == [5e-4] + [1e-3] * 10
    # after warmup: 0.1 + 0.9 * (1 + cos(pi * (s - 2) / 8)) / 2 of the peak
    expected = [5e-4, 1e-3] + [1e-3 * (0.1 + 0.45 * (1 + np.cos(np.pi * (s - 2) / 8))) for s in range(2, 11)]
    assert rates(sft_min_lr_ratio=0.1) == pytest.approx(expected, rel=1e-12)
    assert rates(sft_min_lr_ratio=0.1)[6] == pytest.approx(5.5e-4) and rates(sft_min_lr_ratio=0.1)[10] == pytest.approx(1e-4)


def test_a_decaying_warm_start_is_a_different_cache():
    assert "sft_min_lr_ratio" not in fingerprint(make_config(init_from="sft"), 1)  # the presets' caches stay valid
    assert fingerprint(make_config(init_from="sft", sft_min_lr_ratio=0.1), 1)["sft_min_lr_ratio"] == 0.1


# ---- the warm start's steps on a GPU (sft_cuda_graphs; the CUDA side is tested in tests/test_precision.py) ----
def test_graphed_steps_apply_only_on_one_cuda_device_without_dropout_at_one_width():
    from rl.long_env import LongAdditionEnvironment
    from rl.warm_start import graphs_apply
    config, env = make_config(**SFT, sft_cuda_graphs=True), make_trainer().env
    cuda = DistInfo(device=torch.device("cuda"))  # (a device name: nothing runs on it)
    assert graphs_apply(config, env, cuda)
    assert not graphs_apply(make_config(**SFT), env, cuda)  # not asked
    assert not graphs_apply(config, env, DistInfo())  # the CPU
    assert not graphs_apply(config, env, DistInfo(world_size=2, device=torch.device("cuda")))  # DDP's all-reduce
    assert not graphs_apply(make_config(**SFT, sft_cuda_graphs=True, dropout=0.1), env, cuda)  # one step's draws
    assert not graphs_apply(config, LongAdditionEnvironment((1, 5)), cuda)  # a width drawn a step
    with pytest.raises(ConfigError, match=r"^sft_cuda_graphs=True has no effect here: it belongs to the warm start's "
                                          r"steps \(init_from=sft, sft_max_steps > 0\); set that"):
        make_config(init_from="scratch", sft_cuda_graphs=True)


def test_the_warm_start_takes_every_step_through_its_graphed_step_where_graphs_apply(tmp_path, monkeypatch):
    """Where graphs_apply says so, train_warm_start makes one GraphedStep of its AdamW and every step replays it
    (here a stand-in that takes the eager step: nothing is captured off CUDA); elsewhere none is made."""
    made, calls = [], []

    class StandIn:
        def __init__(self, optimizer, grad_clip):
            made.append((optimizer, grad_clip))

        def __call__(self, policy, batch, prompt_len):
            calls.append(prompt_len)
            made[0][0].zero_grad(set_to_none=True)
            return warm_start.backward_and_step(policy, batch, prompt_len, made[0][0], made[0][1])

    monkeypatch.setattr(warm_start, "GraphedStep", StandIn)
    for applies in (False, True):
        monkeypatch.setattr(warm_start, "graphs_apply", lambda c, env, info: applies)
        trainer = make_trainer(out_dir=str(tmp_path / str(applies)), **dict(SFT, sft_max_steps=5))
        init_policy(trainer.config, trainer.env, trainer.model, DistInfo())
        assert len(made) == int(applies) and len(calls) == 5 * int(applies)
    assert made[0][1] == trainer.config.grad_clip and calls == [trainer.env.prompt_len] * 5


def test_a_step_with_a_graphed_step_replays_it_and_takes_no_eager_step():
    """teacher_forced_step hands the batch of (a, b) to the GraphedStep it is given, and steps nothing itself."""
    trainer = make_trainer()
    model, env = trainer.model, trainer.env
    optimizer = model.configure_optimizer(lr=1e-2, weight_decay=0.0, betas=(0.9, 0.99))
    seen = []
    graphed = lambda policy, batch, prompt_len: seen.append((policy, batch, prompt_len)) or torch.tensor(0.5)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    a, b = env.sample_operands(7, np.random.default_rng(0))
    loss = warm_start.teacher_forced_step(model, env, optimizer, a, b, "cpu", grad_clip=1.0, graphed=graphed)
    assert loss.item() == 0.5 and len(seen) == 1
    policy, (sequences, answers, pos), prompt_len = seen[0]
    prompts, expected = env.encode(a, b)
    assert policy is model and prompt_len == env.prompt_len and pos is None
    assert torch.equal(sequences, torch.cat([prompts, expected], dim=1)) and torch.equal(answers, expected)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_progress_saves_the_optimizer_as_any_device_loads_it():
    """A GraphedStep's AdamW holds its rates in tensors and is capturable; the progress file holds numbers and
    capturable off, which a plain AdamW loads and steps with."""
    model = make_trainer().model
    adamw = lambda: model.configure_optimizer(lr=3e-3, weight_decay=0.01, betas=(0.9, 0.99))
    graphed = adamw()
    warm_start.GraphedStep(graphed, grad_clip=1.0)  # (its set-up only: nothing is captured off CUDA)
    assert all(g["capturable"] and torch.is_tensor(g["lr"]) for g in graphed.param_groups)
    state = warm_start.portable(graphed.state_dict())
    # (float32 on the device: the rate comes back to 1e-8 of itself; the schedule rewrites it at the next step)
    assert [(type(g["lr"]), g["lr"], g["capturable"]) for g in state["param_groups"]] == \
        [(float, pytest.approx(3e-3, rel=1e-7), False)] * 2
    plain = adamw()
    plain.load_state_dict(state)
    model(torch.zeros(2, 5, dtype=torch.long)).sum().backward()
    plain.step()  # (a capturable or tensor-rate group would refuse a CPU step here)
    assert [g["lr"] for g in plain.param_groups] == [pytest.approx(3e-3, rel=1e-7)] * 2


def test_a_continued_warm_starts_graphed_step_keeps_adamws_step_counts_on_the_device():
    """A continued warm start loads its AdamW from the progress file (capturable off: the step counts stay on the
    host), then makes its GraphedStep, whose capturable AdamW takes them only on the parameters' device: here the
    meta device stands for CUDA (nothing is computed)."""
    model = torch.nn.Linear(3, 2)
    saved = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 3)).sum().backward()
    saved.step()
    state = warm_start.portable(saved.state_dict())
    on_meta = torch.nn.Linear(3, 2, device="meta")
    loaded = torch.optim.AdamW(on_meta.parameters(), lr=1e-3)
    loaded.load_state_dict(state)
    assert {loaded.state[p]["step"].device.type for p in on_meta.parameters()} == {"cpu"}  # what AdamW does
    warm_start.GraphedStep(loaded, grad_clip=1.0)
    assert all(loaded.state[p]["step"].device.type == "meta" for p in on_meta.parameters())
    assert all(g["lr"].device.type == "meta" and g["capturable"] for g in loaded.param_groups)


def test_a_graphed_warm_start_step_runs_eagerly_off_cuda_as_the_plain_step():
    """GraphedStep off CUDA (every step eager, rl/graphs.py): the plain step's losses, and its weights to the float32
    rounding of the rate it holds in a tensor, the schedule followed; what the CUDA test then adds is the capture."""
    import copy
    from torch.optim.lr_scheduler import LambdaLR
    trainer = make_trainer()
    env, plain = trainer.env, trainer.model.train()
    graphed_model = copy.deepcopy(plain)
    optimizers = [m.configure_optimizer(lr=1e-3, weight_decay=0.01, betas=(0.9, 0.99)) for m in (plain, graphed_model)]
    schedules = [LambdaLR(o, lambda k: min(1.0, (k + 1) / 4)) for o in optimizers]
    graphed, rng = warm_start.GraphedStep(optimizers[1], grad_clip=1.0), np.random.default_rng(0)
    for step in range(6):
        a, b = env.sample_operands(32, rng)
        expected = warm_start.teacher_forced_step(plain, env, optimizers[0], a, b, "cpu", grad_clip=1.0)
        loss = warm_start.teacher_forced_step(graphed_model, env, optimizers[1], a, b, "cpu", grad_clip=1.0,
                                              graphed=graphed)
        assert loss.item() == expected.item(), step
        for schedule in schedules:
            schedule.step()
    assert graphed.calls == 6 and not graphed.graphs
    assert optimizers[1].param_groups[0]["lr"].item() == pytest.approx(1e-3)  # the schedule's rate reached the step
    for (name, p), q in zip(plain.named_parameters(), graphed_model.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=1e-7), name
    assert not torch.equal(plain.wte.weight, make_trainer().model.wte.weight)  # it trained


def test_dropout_is_reseeded_only_where_there_is_dropout(monkeypatch):
    calls = []
    monkeypatch.setattr(warm_start.seeding, "seed_dropout", lambda *a: calls.append(a))
    for dropout in (0.0, 0.1):
        trainer = make_trainer(**SFT, dropout=dropout)
        optimizer = trainer.model.configure_optimizer(lr=1e-3, weight_decay=0.0, betas=(0.9, 0.99))
        warm_start.supervised_step(trainer.model, trainer.env, optimizer, trainer.config, DistInfo(), 4)
    assert len(calls) == 1 and calls[0][-1] == 4  # the run with dropout, at its step
