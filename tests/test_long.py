"""Addition of many lengths: format, exact sums at 100 digits, the split hash, and coupled position ids.
Run: python -m pytest tests/test_long.py"""

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from model.gpt import GPT, GPTConfig
from rl.long_env import LongAdditionEnvironment, long_pair_hash, number_lengths, to_digits, to_int
from rl.math_env import SPLITS, MathEnvironment, pair_hash


def text(env, a, b):
    prompt, answer = env.encode([a], [b])
    return env.decode_text(prompt[0]), env.decode_text(answer[0])


def reference_hash(a: int, b: int) -> float:
    """The split hash on Python ints, written independently of the vectorised one: 9-digit limbs of
    min and max, folded through splitmix64 from the lowest up to the highest nonzero limb."""
    mask = 2 ** 64 - 1

    def splitmix(x):
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
        return x ^ (x >> 31)
    low, high, h = min(a, b), max(a, b), 0x5DEECE66D
    while True:
        (low, lo_limb), (high, hi_limb) = divmod(low, 10 ** 9), divmod(high, 10 ** 9)
        h = splitmix(h ^ (lo_limb << 32 | hi_limb))
        if low == 0 and high == 0:
            return (h >> 11) / 2.0 ** 53


def test_worked_example_and_its_coupled_ids():
    env = LongAdditionEnvironment((1, 3), positions="coupled", max_position_offset=10)
    assert text(env, 12, 345) == ("012+345=", "7530$")  # 357 in 4 digits, reversed
    at_zero = LongAdditionEnvironment((1, 3), positions="coupled")  # no offsets: the module docstring's example
    assert at_zero.position_ids(1).tolist() == [[4, 3, 2, 1, 4, 3, 2, 1, 2, 3, 4, 5, 0]]
    # an evaluation's offsets (rng None) are drawn from a fixed seed: the same every time, within the range
    evaluation = env.position_ids(300)
    assert torch.equal(evaluation, env.position_ids(300)) and torch.equal(evaluation[:100], env.position_ids(100))
    assert set((evaluation[:, 2] - 2).tolist()) == set(range(11))
    # the same format and vocabulary as the 3-digit adder
    fixed = MathEnvironment("adder", 3)
    assert text(env, 999, 999) == text(fixed, 999, 999) == ("999+999=", "8991$")
    assert env.itos == fixed.itos and (env.prompt_len, env.answer_len) == (fixed.prompt_len, fixed.answer_len)
    # a training offset moves every id by the same amount (the separators' too) and leaves "$" at 0
    pos = env.position_ids(500, np.random.default_rng(0))
    offsets = pos[:, 2] - 2
    base = at_zero.position_ids(1)
    assert torch.equal(pos, torch.where(base > 0, base + offsets[:, None], 0))
    assert offsets.min() == 0 and offsets.max() == 10 and env.num_position_ids == 3 + 3 + 10 == int(pos.max()) + 1
    assert LongAdditionEnvironment((1, 3)).position_ids(4) is None  # absolute: the model's own 0, 1, 2, ...


def test_known_length_answers_have_no_end_token_and_every_digit_is_scored():
    from rl import dist
    from rl.evaluate import evaluate
    from rl.math_reward import digit_match, exact_match
    env = LongAdditionEnvironment((1, 3), positions="coupled", known_length=True)
    assert text(env, 12, 345) == ("012+345=", "7530") and (env.prompt_len, env.answer_len) == (8, 4)
    assert env.position_ids(1).tolist() == [[4, 3, 2, 1, 4, 3, 2, 1, 2, 3, 4, 5]]  # the docstring's, no end column
    tokens = lambda s: torch.tensor([[env.stoi[ch] for ch in s]])
    assert env.decode_answer(tokens("7530")[0]) == 357 and env.decode_answer(tokens("753$")[0]) is None
    # the top digit counts: one wrong digit of four, where with the end token it would be one of three
    target, top_wrong = tokens("7530"), tokens("7531")
    assert exact_match(env, target, top_wrong).item() == 0.0 and digit_match(env, target, top_wrong).item() == 0.75
    env.set_width(2, 3)  # padded: the written width's W + 1 digits
    assert text(env, 12, 45) == ("012+045=", "7500") and env.answer_len == 4
    # an evaluation counts no wrong ends and the errors at each of the W + 1 digits, from greedy answers
    env.set_width(3)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=env.vocab_size, n_position=env.num_position_ids, n_layer=1, n_head=2, n_embed=16))
    a, b = env.sample_operands(50, np.random.default_rng(3))
    prompts, targets = env.encode(a, b)
    greedy = model.generate(prompts, env.answer_len, greedy=True, end_token=env.end_token, pad_token=env.pad_token,
                            pos=env.position_ids(50))
    result = evaluate(model, env, a, b, dist.DistInfo())
    assert result.end_errors == 0.0 and len(result.digit_errors) == 4
    assert result.digit_errors == (greedy != targets).float().mean(dim=0).tolist()
    assert result.accuracy == (greedy == targets).all(dim=1).float().mean().item()


@pytest.mark.parametrize("width", [1, 3, 18, 19, 25])
def test_an_int64_array_is_written_as_its_python_ints_are(width):
    """to_digits of an int64 array (how an enumerated evaluation set writes its 10^6 pairs) equals the loop over
    Python ints, at widths past an int64's 19 digits too, and refuses what does not fit with the same line."""
    top = 10 ** width - 1 if width < 19 else 2 ** 63 - 1
    values = np.random.default_rng(width).integers(0, top, size=500, dtype=np.int64)
    values[:3] = [0, 9, top]
    by_ints = to_digits([int(v) for v in values], width)
    assert np.array_equal(to_digits(values, width), by_ints) and to_digits(values, width).dtype == np.uint8
    assert [to_int(row) for row in to_digits(values, width)] == [int(v) for v in values]
    for bad in ([-1], [top + 1] if width < 19 else [-5]):
        message = f"{bad[0]} does not fit {width} non-negative digits"
        with pytest.raises(ValueError, match=message):
            to_digits(np.array([4] + bad, dtype=np.int64), width)
        with pytest.raises(ValueError, match=message):
            to_digits([4] + bad, width)


def test_the_carry_column_gives_the_top_digit_operand_digits_at_its_id():
    env = LongAdditionEnvironment((1, 3), positions="coupled", carry_column=True)
    assert text(env, 12, 345) == ("0012+0345=", "7530$") and (env.prompt_len, env.answer_len) == (10, 5)
    ids = env.position_ids(1)[0].tolist()
    assert ids == [5, 4, 3, 2, 1, 5, 4, 3, 2, 1, 2, 3, 4, 5, 0]  # the module docstring's
    assert ids[0] == ids[5] == ids[13] == 5  # the zero columns and the sum's top digit share one id
    both = LongAdditionEnvironment((1, 3), positions="coupled", carry_column=True, known_length=True)
    assert text(both, 999, 999) == ("0999+0999=", "8991") and both.position_ids(1)[0].tolist() == ids[:-1]
    assert (env.seq_len, both.seq_len) == (15, 14) and env.num_position_ids == both.num_position_ids == 6
    env.set_width(2, 3)  # padded: the written width's columns and one more
    assert text(env, 12, 45) == ("0012+0045=", "7500$")


def test_sums_are_exact_at_one_hundred_digits():
    env = LongAdditionEnvironment((1, 100))
    a, b = env.sample_operands(300, np.random.default_rng(1))
    prompts, answers = env.encode(a, b)
    assert prompts.shape == (300, 202) and answers.shape == (300, 102)
    for i in range(300):
        x, y = to_int(a[i]), to_int(b[i])
        assert env.decode_text(prompts[i]) == f"{x:0100d}+{y:0100d}="
        assert env.decode_answer(answers[i]) == x + y
    assert text(env, 10 ** 100 - 1, 1) == ("9" * 100 + "+" + "0" * 99 + "1=", "0" * 100 + "1$")  # the carry runs through
    assert env.describe_mistake(a[0], b[0], answers[0]).endswith(f"={to_int(a[0]) + to_int(b[0])}, "
                                                                 f"truth {to_int(a[0]) + to_int(b[0])}")
    with pytest.raises(ValueError, match="an operand of 4 digits does not fit the range 1-3"):
        LongAdditionEnvironment((1, 3)).encode([1000], [1])


def test_lengths_are_uniform_for_each_operand_over_steps_and_each_step_has_one_width():
    # a step draws its width, then problems whose longer operand has exactly that many digits; over steps each
    # operand's length is uniform over the range and independent of the other's, numbers uniform within a length
    env, rng = LongAdditionEnvironment((2, 21)), np.random.default_rng(2)
    widths, pairs = [], []
    for _ in range(4000):
        env.set_width(env.draw_width(rng))
        a, b = env._draw(10, rng)
        assert a.shape == (10, env.width) and (np.maximum(number_lengths(a), number_lengths(b)) == env.width).all()
        widths.append(env.width)
        pairs.append((number_lengths(a), number_lengths(b), a[:, :2], b[:, :2]))
    # P(w) = (2 (w - lo) + 1) / n^2: 1/400 for 2 digits, 39/400 for 21
    share = np.bincount(widths, minlength=22)[2:] / 4000
    assert abs(share - (2 * np.arange(20) + 1) / 400).max() < 0.012  # about 4 standard errors
    la, lb = (np.concatenate([p[i] for p in pairs]) for i in (0, 1))
    for lengths in (la, lb):
        counts = np.bincount(lengths, minlength=22)[2:]
        assert abs(counts / 40_000 - 1 / 20).max() < 0.006
    assert abs(np.corrcoef(la, lb)[0, 1]) < 0.02  # independent, as two uniform draws are
    a, b = env._draw(40_000, rng)  # (at the last width) no leading zero, whatever the length
    for x in (a, b):
        lengths = number_lengths(x)
        leading = x[np.arange(len(x)), lengths - 1]
        assert leading.min() == 1 and np.bincount(leading, minlength=10)[0] == 0
    one = LongAdditionEnvironment((1, 1))._draw(5000, np.random.default_rng(3))[0]
    assert set(one[:, 0].tolist()) == set(range(10))  # one digit: 0 to 9
    with pytest.raises(ValueError, match="width 22 outside the range 2-21"):
        env.set_width(22)


def test_a_step_writes_every_round_at_its_width_and_evaluation_keeps_its_own(tmp_path):
    from helpers import make_trainer
    trainer = make_trainer(rl_ndigits="1-6", sft_ndigits="1-3", eval_ndigits="", positions="coupled",
                           max_position_offset=4, n_position=16, problem_sampler="uniform",
                           dynamic_sampling_max_rounds=1)
    widths = []
    for _ in range(4):
        first, batch, _ = trainer.sample(trainer.step)
        widths.append(trainer.env.width)
        assert first.prompts.shape[1] == 2 * trainer.env.width + 2 and first.generated.shape[1] == trainer.env.width + 2
        trainer.train_step()
    assert len(set(widths)) > 1  # (four steps: the widths differ)
    assert trainer.eval_envs[None] is not trainer.env and trainer.eval_envs[None].width == 6


def test_a_padded_step_writes_its_short_numbers_wide_and_trains_on_them(tmp_path):
    from helpers import make_trainer
    trainer = make_trainer(rl_ndigits="1-3", sft_ndigits="1-3", eval_ndigits="", positions="coupled",
                           max_position_offset=6, n_position=16, problem_sampler="uniform", rl_pad_ndigits=9,
                           dynamic_sampling_max_rounds=1)
    padded = 0
    for _ in range(6):
        before = [p.detach().clone() for p in trainer.model.parameters()]
        first, batch, _ = trainer.sample(trainer.step)
        env = trainer.env
        assert first.prompts.shape[1] == 2 * env.width + 2 and first.generated.shape[1] == env.width + 2
        top_columns = first.prompts[:, :env.width - env.number_width]  # a's leading columns: zeros
        assert (top_columns == env.stoi["0"]).all() and int(first.pos.max()) <= 3 + 2 + 6
        padded += env.width > env.number_width
        trainer.train_step()
        assert any(not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert padded > 0


PADDED_PHASE = dict(rl_ndigits="1-3", sft_ndigits="1-3", eval_ndigits="", positions="coupled", max_position_offset=6,
                    n_position=16, problem_sampler="uniform", init_from="sft", sft_max_steps=4, sft_batch_size=16,
                    sft_eval_interval=4, sft_num_eval=10, sft_target_accuracy=1.0, sft_save_interval=3,
                    sft_pad_ndigits=9, sft_pad_steps=5)


def padded_phase_run(out_dir, monkeypatch, stop_after=None, spy=None, **change):
    """init_policy of a tiny warm start with its padded phase; returns (its record, [(step, number width, written
    width)] of each supervised step taken); `spy`, a list, gets the same entries as they are taken."""
    from helpers import make_trainer
    from rl import warm_start
    from rl.dist import DistInfo
    steps = [] if spy is None else spy
    # the module's own functions, not an earlier call's spies (which would count each step again)
    real_step, real_tf = (getattr(f, "real", f) for f in (warm_start.supervised_step, warm_start.teacher_forced_step))
    spy_step = lambda *a, **kw: steps.append([a[-1]]) or real_step(*a, **kw)
    spy_tf = lambda policy, env, *a, **kw: (steps[-1].extend([env.number_width, env.width])
                                            or real_tf(policy, env, *a, **kw))
    spy_step.real, spy_tf.real = real_step, real_tf
    monkeypatch.setattr(warm_start, "supervised_step", spy_step)
    monkeypatch.setattr(warm_start, "teacher_forced_step", spy_tf)
    trainer = make_trainer(out_dir=str(out_dir), **{**PADDED_PHASE, **change})
    record = warm_start.init_policy(trainer.config, trainer.sft_env, trainer.model, DistInfo(),
                                    lambda: stop_after is not None and len(steps) == stop_after)
    return record, steps, trainer.model


def test_the_padded_phase_continues_the_unpadded_warm_start_and_is_cached_apart(tmp_path, monkeypatch):
    """sft_pad_ndigits: the warm start trains unpadded (the very warm_start.pt a run without padding makes), then
    sft_pad_steps steps more, some written wider, on the steps' streams after its own, into warm_start_padded.pt,
    which RL starts from. A second run reuses both; another sft_pad_steps reuses the first and retrains the second."""
    from rl.warm_start import cached_start, fingerprint, padded_fingerprint
    record, steps, model = padded_phase_run(tmp_path / "padded", monkeypatch)
    assert [s[0] for s in steps] == list(range(9))
    assert all(written == width for _, width, written in steps[:4])  # the first phase: never padded
    assert any(written > width for _, width, written in steps[4:])  # the second: padded up to 9 columns
    assert all(width <= written <= 9 for _, width, written in steps[4:])
    assert (record["warm_start_steps"], record["warm_start_padded_steps"], record["warm_start_cached"]) == (9, 5, False)
    first, padded = load_file(tmp_path / "padded" / "warm_start.pt"), load_file(tmp_path / "padded" / "warm_start_padded.pt")
    plain, _, _ = padded_phase_run(tmp_path / "plain", monkeypatch, sft_pad_ndigits=0, sft_pad_steps=400)
    assert_equal_weights(first["model"], load_file(tmp_path / "plain" / "warm_start.pt")["model"])
    assert plain["warm_start_steps"] == 4 and not (tmp_path / "plain" / "warm_start_padded.pt").exists()
    assert_equal_weights(padded["model"], model.state_dict())  # RL starts from the padded phase
    assert not all(torch.equal(v, first["model"][k]) for k, v in padded["model"].items())
    again, steps, model = padded_phase_run(tmp_path / "padded", monkeypatch)
    assert steps == [] and again["warm_start_cached"] and again["warm_start_spent"] == 0.0
    assert_equal_weights(padded["model"], model.state_dict())
    # what a run continued from a snapshot records of its start (rl/tools/lengths.py): the files' own account
    padded_config = make_config_of({**PADDED_PHASE, "out_dir": str(tmp_path / "padded")})
    assert cached_start(padded_config, 1) == again and again["warm_start_seconds"] == first["seconds"] + padded["seconds"]
    assert cached_start(make_config_of({**PADDED_PHASE, "out_dir": str(tmp_path / "plain")}), 1) == {}  # no padded file
    other, steps, model = padded_phase_run(tmp_path / "padded", monkeypatch, sft_pad_steps=2)
    assert [s[0] for s in steps] == [4, 5] and other["warm_start_steps"] == 6 and not other["warm_start_cached"]
    assert other["warm_start_spent"] == pytest.approx(load_file(tmp_path / "padded" / "warm_start_padded.pt")["seconds"])
    assert_equal_weights(first["model"], load_file(tmp_path / "padded" / "warm_start.pt")["model"])  # (not retrained)
    config = make_config_of(PADDED_PHASE)
    assert first["fingerprint"] == fingerprint(config, 1) and padded["fingerprint"] == padded_fingerprint(config, 1)


def test_sft_first_pad_share_pads_a_share_of_the_first_phase_and_keys_its_cache(tmp_path, monkeypatch):
    """sft_first_pad_share: the first phase pads about that share of its steps as the padded phase pads them (up to
    sft_pad_ndigits), its check stays at the range's longest width unpadded, and its warm_start.pt is another file,
    keyed by the share and the width; unset, the key is the one made before the setting existed. Refused without
    sft_pad_ndigits."""
    from rl import warm_start
    from rl.errors import ConfigError
    checked = []
    real_evaluate = warm_start.evaluate
    monkeypatch.setattr(warm_start, "evaluate", lambda model, env, *a, **kw: checked.append(
        (env.number_width, env.width, env.pad_ndigits)) or real_evaluate(model, env, *a, **kw))
    plain, _, _ = padded_phase_run(tmp_path / "plain", monkeypatch, sft_pad_steps=1)
    assert checked == [(3, 3, 0), (3, 3, 0)]  # each phase's check: 3 digits written at 3 (rl/warm_start.py)
    checked.clear()
    share, steps, _ = padded_phase_run(tmp_path / "share", monkeypatch, sft_first_pad_share=1.0, sft_pad_steps=1)
    assert len(steps) == 5 and all(width <= written <= 9 for _, width, written in steps[:4])
    assert sum(written > width for _, width, written in steps[:4]) >= 3  # (a draw may write a step at its own width)
    assert checked == [(3, 3, 9), (3, 3, 0)]  # the first phase's: still 3 digits at 3, in the padded environment
    first = load_file(tmp_path / "share" / "warm_start.pt")
    assert not all(torch.equal(v, load_file(tmp_path / "plain" / "warm_start.pt")["model"][k])
                   for k, v in first["model"].items())
    config = make_config_of({**PADDED_PHASE, "sft_first_pad_share": 1.0})
    unset = warm_start.fingerprint(make_config_of(PADDED_PHASE), 1)
    assert first["fingerprint"] == warm_start.fingerprint(config, 1) == {
        **unset, "sft_first_pad_share": 1.0, "sft_pad_ndigits": 9}
    assert "sft_first_pad_share" not in unset and plain["warm_start_steps"] == share["warm_start_steps"] == 5
    quarter, steps, _ = padded_phase_run(tmp_path / "quarter", monkeypatch, sft_first_pad_share=0.25, sft_max_steps=40,
                                         sft_eval_interval=40, sft_pad_steps=1)
    padded = [written > width for _, width, written in steps[:40] if width < 9]
    assert 0 < sum(padded) < len(padded) / 2  # about a quarter of the steps (9 of 37 drawn here)
    with pytest.raises(ConfigError, match=re.escape(
            "sft_first_pad_share=0.5 has no effect here: it belongs to sft_pad_ndigits (rl/long_env.py); set that, "
            "or leave sft_first_pad_share unset")):
        make_config_of({**{k: v for k, v in PADDED_PHASE.items() if not k.startswith("sft_pad")},
                        "sft_first_pad_share": 0.5})


def test_sft_first_pad_from_pads_the_first_phase_only_from_the_check_that_reached_it(tmp_path, monkeypatch):
    """sft_first_pad_from: the first phase's steps are unpadded up to the first validation check at or above it, and
    padded from the next step on (whatever later checks say); never reached, the weights are the unpadded warm
    start's. A stopped first phase continues with its padding as it was. Keyed in the fingerprint only when set;
    refused without sft_first_pad_share."""
    from rl import warm_start
    from rl.errors import ConfigError
    steps_seen = []
    # checks every step, after step s (0-based) accuracy (s + 1) / 10, but 0.0 after step 5: padding stays on
    monkeypatch.setattr(warm_start, "evaluate", lambda *a, **kw: SimpleNamespace(
        accuracy=0.0 if steps_seen[-1][0] == 5 else (steps_seen[-1][0] + 1) / 10))
    change = dict(sft_first_pad_share=1.0, sft_first_pad_from=0.3, sft_max_steps=8, sft_eval_interval=1,
                  sft_pad_steps=1)
    record, steps, _ = padded_phase_run(tmp_path / "from", monkeypatch, **change, spy=steps_seen)
    assert [s[0] for s in steps[:8]] == list(range(8)) and record["warm_start_steps"] == 9
    # padded from step 0 (sft_first_pad_from=0, as the share alone pads), the steps' layouts, a function of the step
    _, always, _ = padded_phase_run(tmp_path / "always", monkeypatch, **{**change, "sft_first_pad_from": 0.0})
    assert all(written == width for _, width, written in steps[:3])  # checks 0.1, 0.2 below 0.3: unpadded
    assert any(written > width for _, width, written in always[:3])  # (which padded would have been wider)
    assert steps[3:8] == always[3:8]  # 0.3 after step 2: padded from step 3 on, the check of 0.0 after step 5 too
    assert sum(written > width for _, width, written in steps[3:8]) >= 3
    first = load_file(tmp_path / "from" / "warm_start.pt")
    unset = warm_start.fingerprint(make_config_of({**PADDED_PHASE, **change, "sft_first_pad_from": 0.0}), 1)
    assert first["fingerprint"] == {**unset, "sft_first_pad_from": 0.3} and "sft_first_pad_from" not in unset
    steps_seen.clear()
    assert padded_phase_run(tmp_path / "stopped", monkeypatch, stop_after=5, **change, spy=steps_seen)[0] is None
    assert load_file(tmp_path / "stopped" / "warm_start_progress.pt")["pad_from_step"] == 3
    padded_phase_run(tmp_path / "stopped", monkeypatch, **change, spy=steps_seen)
    assert_equal_weights(first["model"], load_file(tmp_path / "stopped" / "warm_start.pt")["model"])
    monkeypatch.undo()  # the real checks: a tiny warm start never reaches 1.0, so it is never padded
    padded_phase_run(tmp_path / "never", monkeypatch, **{**change, "sft_first_pad_from": 1.0})
    padded_phase_run(tmp_path / "plain", monkeypatch, sft_max_steps=8, sft_eval_interval=1, sft_pad_steps=1)
    assert_equal_weights(load_file(tmp_path / "plain" / "warm_start.pt")["model"],
                         load_file(tmp_path / "never" / "warm_start.pt")["model"])
    with pytest.raises(ConfigError, match=re.escape(
            "sft_first_pad_from=0.3 has no effect here: it belongs to sft_first_pad_share; set that, or leave "
            "sft_first_pad_from unset")):
        make_config_of({**PADDED_PHASE, "sft_first_pad_from": 0.3})


def test_a_stopped_padded_phase_continues_to_the_same_weights(tmp_path, monkeypatch):
    straight, _, _ = padded_phase_run(tmp_path / "straight", monkeypatch)
    assert padded_phase_run(tmp_path / "stopped", monkeypatch, stop_after=6)[0] is None  # 2 padded steps done
    assert load_file(tmp_path / "stopped" / "warm_start_progress.pt")["step"] == 2
    continued, steps, _ = padded_phase_run(tmp_path / "stopped", monkeypatch)
    assert [s[0] for s in steps] == [6, 7, 8] and continued["warm_start_steps"] == straight["warm_start_steps"] == 9
    assert not (tmp_path / "stopped" / "warm_start_progress.pt").exists()
    assert_equal_weights(load_file(tmp_path / "straight" / "warm_start_padded.pt")["model"],
                         load_file(tmp_path / "stopped" / "warm_start_padded.pt")["model"])


def load_file(path):
    from rl.snapshot import load_snapshot
    return load_snapshot(str(path))


def make_config_of(settings: dict):
    from helpers import make_config
    return make_config(**settings)


def assert_equal_weights(a: dict, b: dict):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_split_hash_extends_pair_hash_and_ignores_the_width():
    rng = np.random.default_rng(4)
    x, y = rng.integers(0, 10 ** 9, 2000), rng.integers(0, 10 ** 9, 2000)
    assert np.array_equal(long_pair_hash(to_digits(x, 9), to_digits(y, 31)), pair_hash(x, y))
    env = LongAdditionEnvironment((1, 100))
    a, b = env.sample_operands(500, rng, "test")
    u = long_pair_hash(a, b)
    assert np.array_equal(u, long_pair_hash(b, a))  # unordered
    assert np.array_equal(u, long_pair_hash(np.pad(a, ((0, 0), (0, 17))), b))  # any width
    assert np.array_equal(u, [reference_hash(to_int(p), to_int(q)) for p, q in zip(a, b)])
    # a held-out pair of the 3-digit task is held out here too
    small = MathEnvironment("adder", 3)
    p, q = small.eval_operands(200, "test")
    assert (LongAdditionEnvironment((1, 3)).split_of(p, q) == SPLITS.index("test")).all()


@pytest.mark.parametrize("ndigits", [(1, 20), (50, 100)])
def test_training_never_samples_validation_or_test_pairs(ndigits):
    env = LongAdditionEnvironment(ndigits)
    a, b = env.sample_operands(4000, np.random.default_rng(5))
    held_out = {(to_int(p), to_int(q)) for split in ("validation", "test") for p, q in zip(*env.eval_operands(300, split))}
    trained = {(to_int(p), to_int(q)) for p, q in zip(a, b)}
    assert not held_out & trained and not {(q, p) for p, q in held_out} & trained
    # the reference hash puts every sampled pair in train, and the draws into each split near their shares
    assert all(reference_hash(p, q) >= 0.15 for p, q in list(trained)[:500])
    drawn = np.bincount(env.split_of(*env._draw(20_000, np.random.default_rng(6))), minlength=3) / 20_000
    assert abs(drawn - [0.85, 0.05, 0.10]).max() < 0.01


def test_eval_sets_are_fixed_prefix_stable_and_of_their_length():
    env = LongAdditionEnvironment((30, 30))
    a, b = env.eval_operands(100, "test")
    a2, b2 = LongAdditionEnvironment((30, 30)).eval_operands(40, "test")
    assert np.array_equal(a[:40], a2) and np.array_equal(b[:40], b2)
    assert (number_lengths(a) == 30).all() and (number_lengths(b) == 30).all()
    assert (env.split_of(a, b) == SPLITS.index("test")).all()
    assert len({(p.tobytes(), q.tobytes()) for p, q in zip(a, b)}) == 100
    small = LongAdditionEnvironment((2, 2))  # 8100 pairs: every one of the split, enumerated
    a, b = small.eval_operands(10 ** 6, "validation")
    assert len(a) == int((small.split_of(*[to_digits(v.ravel(), 2) for v in np.meshgrid(range(10, 100), range(10, 100))])
                          == SPLITS.index("validation")).sum()) > 0


def test_bad_arguments_are_one_line_errors():
    with pytest.raises(ValueError, match="needs 1 <= lo <= hi, got 5-3"):
        LongAdditionEnvironment((5, 3))
    with pytest.raises(ValueError, match="unknown positions 'rope'; known: absolute, coupled"):
        LongAdditionEnvironment((1, 3), positions="rope")
    with pytest.raises(ValueError, match="max_position_offset must be 0"):
        LongAdditionEnvironment((1, 3), max_position_offset=5)


def test_a_model_reads_coupled_ids_and_its_cached_decode_equals_the_full_pass():
    env = LongAdditionEnvironment((1, 12), positions="coupled", max_position_offset=20)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=env.vocab_size, n_position=env.num_position_ids, n_layer=2, n_head=4,
                          n_embed=32)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    a, b = env.sample_operands(16, np.random.default_rng(7))
    prompts, _ = env.encode(a, b)
    pos = env.position_ids(16, np.random.default_rng(8))
    assert prompts.shape[1] + env.answer_len > env.num_position_ids  # more tokens than ids: only coupled ids fit
    out = model.generate(prompts, env.answer_len, greedy=True, pos=pos)
    assert torch.equal(out, model.generate(prompts, env.answer_len, greedy=True, pos=pos, use_cache=False))
    with torch.no_grad():
        full = model(torch.cat([prompts, out], 1), pos=pos)[:, env.prompt_len - 1:-1]
    _, logp, _ = model.generate(prompts, env.answer_len, temperature=1.0, pos=pos, with_stats=True,
                                generator=torch.Generator().manual_seed(0))
    # every step's logits: the greedy tokens are the full pass's argmax, and sampled log-probs match it too
    assert torch.equal(full.argmax(-1), out)
    sampled = model.generate(prompts, env.answer_len, temperature=1.0, pos=pos, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = torch.log_softmax(model(torch.cat([prompts, sampled], 1), pos=pos)[:, env.prompt_len - 1:-1], -1)
    assert torch.allclose(logp, ref.gather(-1, sampled[..., None])[..., 0], atol=1e-5)


def test_the_supervised_loss_and_the_log_probs_read_the_environments_ids():
    from rl.algorithms import answer_logits, policy_logprobs, token_logprobs
    from rl.warm_start import supervised_loss
    env = LongAdditionEnvironment((1, 6), positions="coupled", max_position_offset=9)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=env.vocab_size, n_position=env.num_position_ids, n_layer=1, n_head=2, n_embed=16))
    a, b = env.sample_operands(8, np.random.default_rng(9))
    loss = supervised_loss(model, env, a, b, "cpu", rng=np.random.default_rng(10))
    prompts, answers = env.encode(a, b)
    seq, pos = torch.cat([prompts, answers], 1), env.position_ids(8, np.random.default_rng(10))
    logits = model(seq[:, :-1], pos=pos[:, :-1])[:, env.prompt_len - 1:]
    assert torch.allclose(loss, torch.nn.functional.cross_entropy(logits.reshape(-1, env.vocab_size), answers.reshape(-1)))
    assert not torch.allclose(loss, supervised_loss(model, env, a, b, "cpu"))  # offsets 0: other ids, another loss
    with torch.no_grad():
        whole = token_logprobs(answer_logits(model, seq, env.prompt_len, 1.0, pos), answers)
        assert torch.allclose(policy_logprobs(model, seq, answers, env.prompt_len, 1.0, num_chunks=3, pos=pos), whole)
        assert not torch.allclose(policy_logprobs(model, seq, answers, env.prompt_len, 1.0, num_chunks=3,
                                                  pos=env.position_ids(8)), whole)  # each row's own ids are read


def long_trainer(known_length=False, carry_column=False, **overrides):
    """A trainer of the tiny settings on addition of 1-6 digits with coupled ids and offsets up to 9."""
    from helpers import make_config
    from rl import dist
    from rl.math_trainer import MathRLTrainer
    config = make_config(**{"rl_algorithm": "reinforce", "rl_ga_steps": 1, "problem_sampler": "uniform", **overrides})
    env = LongAdditionEnvironment((1, 6), positions="coupled", max_position_offset=9, known_length=known_length,
                                  carry_column=carry_column)
    torch.manual_seed(config.seed)
    return MathRLTrainer(config, env, GPT(GPTConfig(**config.model_args())), dist.DistInfo())


def test_the_rollouts_ids_reach_the_sampler_and_the_update(monkeypatch):
    """The update's log-probs at the sampling temperature equal the sampler's own (kept from generation):
    the same coupled ids, random offsets included, on both sides."""
    from rl import objectives
    trainer, seen = long_trainer(rl_temperature=2.0), {}
    real_sample, real_logprobs = trainer.sample, objectives.token_logprobs
    trainer.sample = lambda step: seen.setdefault("rollout", real_sample(step))

    def spy_logprobs(logits, tokens):  # what the update differentiates
        seen["logp"] = real_logprobs(logits, tokens).detach()
        return real_logprobs(logits, tokens)
    monkeypatch.setattr(objectives, "token_logprobs", spy_logprobs)
    trainer.train_step()
    _, batch, _ = seen["rollout"]
    offsets = batch.pos[:, 0] - trainer.env.width - 1  # each problem's offset (its first digit's id is width + 1 + offset)
    assert offsets.min() >= 0 and offsets.max() <= 9 and len(set(offsets.tolist())) > 3
    m = batch.mask(trainer.env.end_token)
    torch.testing.assert_close(seen["logp"][m], batch.logp[m], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("known_length, carry_column", [(False, False), (True, False), (True, True)])
def test_a_step_on_problems_of_many_lengths_changes_the_weights(known_length, carry_column):
    trainer = long_trainer(known_length, carry_column, rl_algorithm="grpo", rewards="exact_match:1.0,digit_match:0.1")
    before = [p.detach().clone() for p in trainer.model.parameters()]
    metrics = trainer.train_step()
    assert metrics["train/skipped_steps"] == 0 and metrics["train/batch_answers"] > 0
    assert any(not torch.equal(a, p) for a, p in zip(before, trainer.model.parameters()))


LONG = dict(rl_ndigits="1-6", positions="coupled", max_position_offset=9, problem_sampler="uniform")


@pytest.mark.parametrize("overrides, message", [
    (dict(rl_ndigits="1-x"), "rl_ndigits='1-x' is not a range of operand lengths 'lo-hi'"),
    (dict(rl_ndigits="7-3"), "rl_ndigits='7-3' is not a range"),
    (dict(sft_ndigits="0-5"), "sft_ndigits='0-5' is not a range"),
    (dict(eval_ndigits="5,x"), "eval_ndigits='5,x' is not a list of operand lengths"),
    (dict(task="multiplier"), "rl_ndigits needs task=adder with show_work=false"),
    (dict(reverse_answer=False), "rl_ndigits needs task=adder"),
    (dict(problem_sampler="prioritized"),
     "problem_sampler=prioritized cannot key problems of many lengths (rl_ndigits); use problem_sampler=uniform, "
     "lengths or replay"),
    (dict(eval_ndigits="5,100"), "need 103 position ids but n_position=64; raise n_position to 103"),
    (dict(positions="absolute", max_position_offset=0, rl_ndigits="1-20"), "need 64 position ids but n_position=63"),
    (dict(max_position_offset=60), "need 69 position ids but n_position=64"),
    (dict(positions="sideways"), "unknown positions 'sideways'"),
    (dict(positions="absolute"), "max_position_offset must be 0 (absolute positions)"),
])
def test_settings_the_task_of_many_lengths_cannot_take_are_refused_in_one_line(overrides, message):
    from helpers import make_config
    from rl.errors import ConfigError
    settings = {**LONG, **overrides}
    if "n_position=63" in message:
        settings["n_position"] = 63
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_config(**settings)


@pytest.mark.parametrize("name, value", [("eval_ndigits", "5,10"), ("sft_ndigits", "1-5"), ("positions", "coupled"),
                                         ("known_length", True), ("carry_column", True)])
def test_its_settings_are_refused_without_rl_ndigits(name, value):
    from helpers import make_config
    from rl.errors import ConfigError
    with pytest.raises(ConfigError, match=f"{name}={value!r} has no effect here: it belongs to the task of many lengths"):
        make_config(problem_sampler="uniform", **{name: value})


def test_todays_task_args_hold_no_new_key_and_the_long_tasks_hold_what_is_set():
    from helpers import make_config
    assert "rl_ndigits" not in make_config().task_args() and "positions" not in make_config().task_args()
    args = make_config(**LONG, sft_ndigits="1-3").task_args()
    assert {k: args[k] for k in ("rl_ndigits", "sft_ndigits", "positions", "max_position_offset")} == dict(
        rl_ndigits="1-6", sft_ndigits="1-3", positions="coupled", max_position_offset=9)
    assert "known_length" not in args and "known_length" not in make_config().task_args()
    envs = make_config(**LONG, sft_ndigits="1-3", eval_ndigits="2,7", known_length=True, carry_column=True
                       ).environments()
    every = [envs["sft"], envs["rl"], *envs["eval"].values()]
    assert [e.known_length for e in every] == [True] * 4 and [e.answer_len for e in every] == [4, 7, 3, 8]
    assert [e.carry_column for e in every] == [True] * 4 and [e.prompt_len for e in every] == [10, 16, 8, 18]


def test_each_length_is_evaluated_on_its_own_set_and_eval_accuracy_is_their_mean():
    from helpers import make_trainer
    from rl import dist
    from rl.evaluate import evaluate
    trainer = make_trainer(**LONG, sft_ndigits="1-3", eval_ndigits="2,4,7", num_eval=40)
    assert (trainer.sft_env.hi, trainer.env.hi) == (3, 6) and list(trainer.eval_envs) == [2, 4, 7]
    trainer.train_step()
    result, metrics = trainer.accuracy("test"), {}
    metrics.update(result.metrics("eval"))
    for L, env in trainer.eval_envs.items():
        a, b = env.eval_operands(40, "test")
        assert (number_lengths(a) == L).all() and (number_lengths(b) == L).all()
        alone = evaluate(trainer.model, env, a, b, dist.DistInfo()).accuracy
        assert metrics[f"eval/accuracy_len{L}"] == alone
    assert metrics["eval/accuracy"] == pytest.approx(sum(metrics[f"eval/accuracy_len{L}"] for L in (2, 4, 7)) / 3)
    assert result.num_problems == 120 and "val/accuracy_len7" in trainer.accuracy("validation").metrics("val")


@pytest.mark.slow
def test_the_long_adder_debug_run_goes_end_to_end_and_logs_every_length(tmp_path):
    import json
    from helpers import run_main
    out = tmp_path / "run"
    # the preset's own lengths (10, 20, 40), and 100 digits: the longest the position ids are sized for; evaluated at
    # the start and the end only (an evaluation of 100-digit sums takes 3 s on the 2-core CPU; debug adds one at step 3);
    # a warm start of 5 steps, not debug's 30 (11 s of this test on the 2-core CPU; other tests here train it)
    proc = run_main(["--config_name", "LongAdderRLConfig", "--debug", "--no_wandb", f"--out_dir={out}",
                     "--eval_ndigits=10,20,40,100", "--eval_interval=6", "--sft_max_steps=5"])
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert [r["step"] for r in rows] == list(range(7)) and "[by length: 10: " in proc.stdout
    for L in (10, 20, 40, 100):
        assert 0.0 <= rows[-1][f"eval/accuracy_len{L}"] <= 1.0 and f"val/accuracy_len{L}" in rows[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_accuracy"] == rows[-1]["eval/accuracy"] and "100" in summary["final_accuracy_by_length"]


def test_the_warm_starts_offsets_reach_every_id_rl_and_evaluation_read():
    """RL on 1-6 digits at offsets up to 9 reads ids up to 6 + 2 + 9 = 17; a warm start on 1-3 digits draws offsets
    up to 12 so that it reaches id 17 too (at 9 it would stop at 14), and so does every evaluated length."""
    from rl.long_env import environments
    task = dict(task="adder", ndigit=3, reverse_answer=True, use_format=True, show_work=False, test_fraction=0.1,
                validation_fraction=0.05, rl_ndigits="1-6", sft_ndigits="1-3", positions="coupled",
                max_position_offset=9)
    envs = environments(task, [2, 6, 10])
    assert envs["rl"].max_position_offset == 9 and envs["sft"].max_position_offset == 12
    top = lambda env: int(env.position_ids(4000, np.random.default_rng(0)).max())
    assert top(envs["sft"]) == top(envs["rl"]) == 17
    assert [top(envs["eval"][L]) for L in (2, 6, 10)] == [17, 17, 17]
    assert envs["sft"].num_position_ids == envs["rl"].num_position_ids == 18
    # absolute positions draw no offsets in any phase
    absolute = environments({**task, "positions": "absolute", "max_position_offset": 0}, [])
    assert absolute["sft"].max_position_offset == 0 and absolute["sft"].position_ids(3) is None


def test_padded_layouts_write_short_numbers_wide_and_reach_the_same_top_id():
    """rl_pad_ndigits: problems whose longer operand has w digits, written at a width from w up to pad_ndigits,
    leading columns zero; each layout's offsets reach the unpadded top id, hi + 2 + max_position_offset."""
    env = LongAdditionEnvironment((1, 3), positions="coupled", max_position_offset=4, pad_ndigits=5)
    env.set_width(3, 5)
    assert text(env, 12, 345) == ("00012+00345=", "753000$")  # 357 in 6 digits, reversed
    assert (env.prompt_len, env.answer_len, env.number_width, env.num_position_ids) == (12, 7, 3, 3 + 3 + 4)
    pos = env.position_ids(2000, np.random.default_rng(0))
    at_zero = torch.tensor([[6, 5, 4, 3, 2, 1, 6, 5, 4, 3, 2, 1, 2, 3, 4, 5, 6, 7, 0]])
    offsets = pos[:, 4] - 2  # the ones digit of a: id 2 + offset
    assert torch.equal(pos, torch.where(at_zero > 0, at_zero + offsets[:, None], 0))
    assert set(offsets.tolist()) == {0, 1, 2} and int(pos.max()) == 9  # 4 + 3 - 5 = 2: top id 7 + 2 = 3 + 2 + 4
    env.set_width(1, 1)
    assert set((env.position_ids(2000, np.random.default_rng(0))[:, 0] - 2).tolist()) == set(range(7))  # 4 + 3 - 1
    # a step's numbers have their own width; its problems are written at a width uniform over width .. pad_ndigits
    rng, written = np.random.default_rng(1), {1: [], 2: [], 3: []}
    for _ in range(3000):
        width = env.draw_width(rng)
        env.set_width(width, env.draw_written(width, rng))
        a, b = env._draw(4, rng)
        assert a.shape == (4, env.width) and (np.maximum(number_lengths(a), number_lengths(b)) == width).all()
        written[width].append(env.width)
    for width, seen in written.items():
        share = np.bincount(seen, minlength=6)[width:] / len(seen)
        assert abs(share - 1 / (6 - width)).max() < 0.05, (width, share)
    unpadded = LongAdditionEnvironment((1, 3), positions="coupled", max_position_offset=4)
    state = rng.bit_generator.state
    assert unpadded.draw_written(2, rng) == 2  # no padding: no draw either, so today's width stream is unchanged
    assert rng.bit_generator.state == state
    # pad_share: a share of steps padded, the rest at their numbers' width
    half = LongAdditionEnvironment((1, 3), positions="coupled", max_position_offset=4, pad_ndigits=5, pad_share=0.5)
    seen = np.array([half.draw_written(1, rng) for _ in range(4000)])
    assert abs((seen == 1).mean() - (0.5 + 0.5 / 5)) < 0.03  # unpadded, or padded to a width of 1 by chance
    assert set(seen.tolist()) == {1, 2, 3, 4, 5}
    with pytest.raises(ValueError, match=re.escape("pad_share must be in (0, 1], got 0.0")):
        LongAdditionEnvironment((1, 3), positions="coupled", max_position_offset=4, pad_ndigits=5, pad_share=0.0)
    with pytest.raises(ValueError, match="problems of 3 digits cannot be written at 6: from 3 to pad_ndigits=5"):
        env.set_width(3, 6)
    for bad in (dict(pad_ndigits=2), dict(pad_ndigits=8), dict(pad_ndigits=5, positions="absolute",
                                                                max_position_offset=0)):
        refusal = "pad_ndigits must be 0, or from the range's longest (3)"
        with pytest.raises(ValueError, match=re.escape(refusal)):
            LongAdditionEnvironment((1, 3), **{**dict(positions="coupled", max_position_offset=4), **bad})


def test_each_phase_pads_its_own_problems_and_evaluations_none():
    """rl_pad_ndigits pads RL's environment; the warm start's and the evaluations' are not padded, and the warm
    start's fingerprint leaves the setting out, so a cached warm start made without it is reused. sft_pad_ndigits
    pads the warm start's (its padded phase: rl/warm_start.py), and is part of that phase's fingerprint only."""
    from helpers import make_config
    from rl.warm_start import fingerprint, padded_fingerprint
    from rl import seeding
    config = make_config(**LONG, eval_ndigits="2,6", rl_pad_ndigits=12)
    envs = config.environments()
    assert envs["rl"].pad_ndigits == 12 and envs["sft"].pad_ndigits == 0
    assert all(e.pad_ndigits == 0 for e in envs["eval"].values()) and config.task_args()["rl_pad_ndigits"] == 12
    assert fingerprint(config, 1) == fingerprint(make_config(**LONG, eval_ndigits="2,6"), 1)
    rl, written = envs["rl"], set()
    for step in range(40):
        seeding.set_step_width(rl, 0, step)
        written.add(rl.width - rl.number_width)
    assert 0 in written and max(written) > 3  # padded some steps, by up to 12 - w columns
    from rl.errors import ConfigError
    refusal = "rl_pad_ndigits must be 0, or from the range's longest (6) to that plus max_position_offset (15)"
    with pytest.raises(ConfigError, match=re.escape(refusal + " with coupled positions, got 16")):
        make_config(**LONG, rl_pad_ndigits=16)
    both = make_config(**LONG, sft_ndigits="1-3", rl_pad_ndigits=12, sft_pad_ndigits=8).environments()
    assert (both["sft"].pad_ndigits, both["rl"].pad_ndigits, both["sft"].max_position_offset) == (8, 12, 12)
    assert fingerprint(make_config(**LONG, sft_pad_ndigits=8), 1) == fingerprint(make_config(**LONG), 1)
    padded = padded_fingerprint(make_config(**LONG, sft_pad_ndigits=8, init_from="sft"), 1)
    for change in (dict(sft_pad_ndigits=7), dict(sft_pad_steps=9), dict(pad_share=0.5)):
        assert padded_fingerprint(make_config(**{**LONG, "sft_pad_ndigits": 8, "init_from": "sft", **change}), 1) != padded
    with pytest.raises(ConfigError, match=re.escape("sft_pad_steps=9 has no effect here: it belongs to sft_pad_ndigits "
                                                    "(rl/long_env.py); set that, or leave sft_pad_steps unset")):
        make_config(**LONG, init_from="sft", sft_pad_steps=9)
    alone = make_config(**LONG, sft_pad_ndigits=8).environments()
    assert (alone["sft"].pad_ndigits, alone["rl"].pad_ndigits) == (8, 0)
    assert fingerprint(make_config(**LONG, rl_pad_ndigits=12, pad_share=0.5), 1) == fingerprint(make_config(**LONG), 1)
    assert make_config(**LONG, rl_pad_ndigits=12, pad_share=0.5).environments()["rl"].pad_share == 0.5
    with pytest.raises(ConfigError, match=re.escape("pad_share=0.5 has no effect here: it belongs to padding")):
        make_config(**LONG, pad_share=0.5)
    with pytest.raises(ConfigError, match=re.escape("pad_share must be in (0, 1], got 1.5")):
        make_config(**LONG, rl_pad_ndigits=12, pad_share=1.5)
    with pytest.raises(ConfigError, match=re.escape("sft_pad_ndigits must be 0, or from the range's longest (3) to "
                                                    "that plus max_position_offset (15)")):  # 1-3 digits: offsets 12
        make_config(**LONG, sft_ndigits="1-3", sft_pad_ndigits=16)
