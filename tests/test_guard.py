"""The numerical guard over the whole step, for weights that are finite but so large that the logits
overflow: sampling never raises and flags the rows that met non-finite logits (the others exactly as
they were), a step whose sampling met one takes no update and learns nothing, max_bad_steps of them
stop the run, evaluation (RL's and the warm start's) refuses to report a number, and the entry
script ends with one line. Run: python -m pytest tests/test_guard.py"""

import copy
import math

import pytest
import torch

from helpers import TINY, load, make_trainer, run_main
from model.gpt import GPT, GPTConfig
from rl.math_trainer import TrainingError
from rl.snapshot import save_atomic
from rl.warm_start import init_policy

END, PAD = 11, 12
HUGE = 1e30  # finite weights times this are still finite, but the activations overflow to inf or nan
SAMPLING_ERROR = ("non-finite logits while sampling ({n} steps in a row skipped, up to step {step}): the policy's "
                  "weights have overflowed; lower learning_rate, keep grad_clip on, or check the file init_from loaded")
EVAL_ERROR = ("non-finite logits in greedy evaluation on the {split} split ({n} of {n} problems): the policy's "
              "weights have overflowed; lower learning_rate (sft_learning_rate in the warm start), keep grad_clip "
              "on, or check the file init_from loaded")


def make_model(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**dict(vocab_size=14, n_position=16, n_layer=2, n_head=4, n_embed=32), **kw})).eval()


def blow_up(model):
    """Multiply the (tied) embedding and output head by HUGE: every weight stays finite, no logit does."""
    with torch.no_grad():
        model.wte.weight.mul_(HUGE)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def clone_state(trainer) -> dict:
    return copy.deepcopy({**trainer.actor.state_dict(("model", "optimizer", "scheduler")),
                          "baseline": trainer.baseline, "problem_sampler": trainer.problem_sampler.state_dict()})


def assert_same(a, b):
    """Nested dicts and lists of tensors and numbers, equal bit for bit."""
    if isinstance(a, dict):
        assert a.keys() == b.keys() and all(assert_same(a[k], b[k]) is None for k in a)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b) and all(assert_same(x, y) is None for x, y in zip(a, b))
    else:
        assert torch.equal(a, b) if torch.is_tensor(a) else a == b


def assert_learned_nothing(trainer, before: dict):
    """Weights, optimizer state, baseline and problem sampler exactly as in `before` (the learning
    rate may move: the schedule follows RL steps, skipped or not)."""
    now = clone_state(trainer)
    for key in ("model", "baseline", "problem_sampler"):
        assert_same(before[key], now[key])
    assert_same(before["optimizer"]["state"], now["optimizer"]["state"])


# ---- sampling ------------------------------------------------------------------------------------
def test_rows_that_meet_non_finite_logits_are_flagged_and_the_others_are_exactly_as_before():
    clean = make_model(tie_weights=False)
    broken = copy.deepcopy(clean)
    with torch.no_grad():
        broken.wte.weight[9].mul_(HUGE)  # finite; a row that reads token 9 overflows to nan, the others never see it
    prompts = torch.randint(0, 9, (32, 8))
    prompts[::3, 2] = 9
    draw = lambda model: model.generate(prompts, 5, temperature=1.0, end_token=END, pad_token=PAD, num_samples=2,
                                        generator=torch.Generator().manual_seed(0), with_stats=True,
                                        with_nonfinite=True)
    tokens, logp, entropy, bad = draw(broken)  # torch.multinomial would raise on these rows' probabilities
    clean_tokens, clean_logp, clean_entropy, clean_bad = draw(clean)
    # a row goes bad when its prompt holds a 9, or from the token after it drew one (the broken model's rows
    # are the clean model's until then)
    reads_9 = (prompts == 9).any(dim=1).repeat_interleave(2) | (clean_tokens[:, :-1] == 9).any(dim=1)
    assert torch.equal(bad, reads_9) and 0 < bad.sum() < len(bad) and not clean_bad.any()
    ok = ~bad
    assert torch.equal(tokens[ok], clean_tokens[ok]) and torch.equal(logp[ok], clean_logp[ok])
    assert torch.equal(entropy[ok], clean_entropy[ok])
    assert torch.isfinite(logp).all() and torch.isfinite(entropy).all()  # the step's metrics stay numbers
    # callers that do not ask for the flag get what they always got
    assert torch.equal(broken.generate(prompts, 5, temperature=1.0, end_token=END, pad_token=PAD, num_samples=2,
                                       generator=torch.Generator().manual_seed(0)), tokens)
    assert len(broken.generate(prompts, 5, num_samples=2, with_stats=True)) == 3


@pytest.mark.parametrize("how", [dict(greedy=True), dict(temperature=1.0), dict(temperature=0.5, top_k=3),
                                 dict(temperature=1.0, use_cache=False)])
def test_finite_but_huge_weights_flag_every_row_and_never_raise(how):
    model = make_model()
    blow_up(model)
    prompts = torch.randint(0, 10, (8, 8))
    tokens, bad = model.generate(prompts, 4, generator=torch.Generator().manual_seed(0), with_nonfinite=True, **how)
    assert bad.all() and tokens.shape == (8, 4)
    assert not make_model().generate(prompts, 4, with_nonfinite=True, **how)[1].any()


def test_finite_logits_over_a_small_temperature_are_flagged_when_they_overflow():
    model = make_model(tie_weights=False)
    with torch.no_grad():
        model.lm_head.weight.mul_(1e36)  # logits up to about 3e35: finite, but not once divided by 1e-4
    prompts = torch.randint(0, 10, (8, 8))
    draw = lambda **how: model.generate(prompts, 4, with_nonfinite=True, **how)[1]
    assert not draw(greedy=True).any() and not draw(temperature=1.0).any()
    assert draw(temperature=1e-4).all()


# ---- the trainer ---------------------------------------------------------------------------------
def test_a_step_whose_sampling_met_non_finite_logits_learns_nothing_and_max_bad_steps_stop_the_run():
    trainer = make_trainer(max_bad_steps=3)  # the tiny preset samples problems by replay: state to protect
    trainer.train_step()  # a normal step first: the baseline and the replay buffer hold something
    good = copy.deepcopy(trainer.model.state_dict())
    blow_up(trainer.model)
    for expected in (1, 2):
        before = clone_state(trainer)
        metrics = trainer.train_step()
        assert metrics["train/skipped_steps"] == expected and trainer.bad_steps_in_a_row == expected
        assert all(math.isfinite(v) for v in metrics.values())  # the metrics of a skipped step are still numbers
        assert metrics["train/grad_norm"] == 0.0 and metrics["train/policy_loss"] == 0.0  # nothing was forwarded
        assert_learned_nothing(trainer, before)
    trainer.model.load_state_dict(good)
    trainer.train_step()  # finite again: it updates and ends the run of bad steps
    assert trainer.bad_steps_in_a_row == 0 and trainer.num_skipped_steps == 2
    assert not torch.equal(good["wte.weight"], trainer.model.wte.weight)
    blow_up(trainer.model)
    trainer.train_step()
    trainer.train_step()
    with pytest.raises(TrainingError) as stop:
        trainer.train_step()
    assert str(stop.value) == SAMPLING_ERROR.format(n=3, step=7)


@pytest.mark.parametrize("overrides", [dict(rl_algorithm="ppo_critic"), dict(rl_algorithm="dpo"),
                                       dict(rl_algorithm="rft", rewards="exact_match:1.0"),
                                       dict(kl_coef=0.1, kl_estimator="k1", problem_sampler="prioritized"),
                                       dict(rl_algorithm="grpo", dynamic_sampling=True, dynamic_sampling_max_rounds=3)])
def test_a_first_step_of_broken_sampling_is_skipped_whatever_the_algorithm(overrides):
    trainer = make_trainer(**overrides)
    blow_up(trainer.model)
    before = clone_state(trainer)
    metrics = trainer.train_step()  # no crash on the way to the metrics
    assert metrics["train/skipped_steps"] == 1 and trainer.bad_steps_in_a_row == 1
    assert metrics["train/sampling_rounds"] == 1  # a round that met non-finite logits ends dynamic sampling's refills
    assert trainer.baseline is None and math.isnan(metrics["train/baseline"])  # no baseline learned from noise
    assert_learned_nothing(trainer, before)


# ---- evaluation ----------------------------------------------------------------------------------
def test_evaluation_refuses_to_report_a_number_from_non_finite_logits():
    trainer = make_trainer()
    assert trainer.accuracy("validation").num_problems == 100
    blow_up(trainer.model)
    trainer.model.train()
    with pytest.raises(TrainingError) as stop:
        trainer.accuracy("validation")
    assert str(stop.value) == EVAL_ERROR.format(split="validation", n=100)
    assert trainer.model.training  # evaluation left the model in the mode it found it in


def test_the_warm_start_stops_on_its_evaluation(tmp_path):
    """Huge weights make the first supervised step non-finite (the warm start has no skip of its own);
    its validation check then stops the run rather than reporting an accuracy of nan logits."""
    trainer = make_trainer(init_from="sft", out_dir=str(tmp_path), sft_eval_interval=1, sft_num_eval=50)
    blow_up(trainer.model)
    with pytest.raises(TrainingError) as stop:
        init_policy(trainer.config, trainer.env, trainer.policy, trainer.info)
    assert str(stop.value) == EVAL_ERROR.format(split="validation", n=50)


# ---- through the entry script --------------------------------------------------------------------
def test_a_run_from_finite_but_huge_weights_ends_with_one_line_and_exit_1(tmp_path):
    """The start evaluation comes before the first sampling, so its message is the one shown."""
    trainer = make_trainer()
    # the tied embedding and output head: one tensor under two names, so both (loading writes each)
    weights = {k: v * HUGE if k in ("wte.weight", "lm_head.weight") else v
               for k, v in trainer.model.state_dict().items()}
    path = tmp_path / "huge.pt"  # the warm start's file format (rl/warm_start.py)
    save_atomic({"kind": "warm_start", "model": weights, "model_args": trainer.config.model_args(),
                 "task": trainer.config.task_args()}, str(path))
    assert all(torch.isfinite(v).all() for v in load(path)["model"].values())
    args = [f"--{k}={v}" for k, v in {**TINY, "init_from": path}.items()]
    proc = run_main([*args, "--no_wandb", f"--out_dir={tmp_path / 'run'}"], check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: " + EVAL_ERROR.format(split="test", n=100)], proc.stderr
