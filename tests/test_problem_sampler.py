"""Problem selection (rl/problem_sampler.py) and the rollouts that use it (rl/rollout.py): each
update rule and draw distribution against a hand-computed example, the uniform sampler's draws
unchanged, no held-out pair in any state, the same state on every rank, exact resume with the
state, and the benchmark's names for sampler runs (the README's tables: tests/test_readme.py).
Run: python -m pytest tests/test_problem_sampler.py"""

import json
import math
import os

import numpy as np
import pytest
import torch
import torch.distributed

from helpers import assert_same_state, end_spawned_worker, fresh_trainer, make_trainer, run_ranks
from rl import seeding
from rl.dist import DistInfo
from rl.math_env import SPLITS, MathEnvironment
from rl.long_env import LongAdditionEnvironment
from rl.problem_sampler import (LengthSampler, PrioritizedSampler, ReplaySampler, UniformSampler, key_operands,
                                pair_keys)
from rl.rollout import refill_size

ENV = MathEnvironment("adder", 1)  # 100 ordered pairs: small enough to compute by hand
NONE = np.zeros(0, dtype=np.int64)


def train_keys(env=ENV) -> np.ndarray:
    a, b = np.divmod(np.arange(10 ** (2 * env.ndigit)), 10 ** env.ndigit)
    keep = env.split_of(a, b) == SPLITS.index("train")
    return pair_keys(env, a[keep], b[keep])


def held_out_key(env=ENV) -> int:
    a, b = np.divmod(np.arange(10 ** (2 * env.ndigit)), 10 ** env.ndigit)
    i = int(np.nonzero(env.split_of(a, b) == SPLITS.index("test"))[0][0])
    return int(pair_keys(env, a[i:i + 1], b[i:i + 1])[0])


# ---- prioritized ------------------------------------------------------------------------------
def test_prioritized_update_estimate_and_draw_probabilities_by_hand():
    s = PrioritizedSampler(ENV, floor=0.01, decay=0.5)
    k1, k2 = s.keys[0], s.keys[1]
    s.observe([k1], [6], G=8)  # right 6, wrong 2
    s.observe([k1, k2], [8, 0], G=8)  # k1: right 0.5*6 + 8 = 11, wrong 0.5*2 + 0 = 1; k2: right 0, wrong 8
    assert (s.right[0], s.wrong[0], s.right[1], s.wrong[1]) == (11.0, 1.0, 0.0, 8.0)
    assert s.right[2:].sum() == s.wrong[2:].sum() == 0
    m = (11 / 12 + 0 / 8) / 2  # the population's rate: the mean raw rate of the pairs seen
    assert s.population_rate() == pytest.approx(m)
    p = s.estimates()  # (s + G m) / (s + f + G)
    assert p[0] == pytest.approx(11 / 15) and p[1] == pytest.approx(11 / 48) and p[2] == pytest.approx(11 / 24)
    w = lambda q: q * (1 - q) + 0.01
    total = w(11 / 15) + w(11 / 48) + (len(s.keys) - 2) * w(11 / 24)
    probs = s.probabilities(p, NONE)
    assert probs[0] == pytest.approx(w(11 / 15) / total) and probs[1] == pytest.approx(w(11 / 48) / total)
    assert probs[5] == pytest.approx(w(11 / 24) / total)
    excluded = s.probabilities(p, np.array([k2]))  # drawn already this step: never twice
    assert excluded[1] == 0 and excluded[0] == pytest.approx(w(11 / 15) / (total - w(11 / 48)))


def test_prioritized_with_no_floor_draws_uniformly_when_no_pair_has_signal():
    """priority_floor=0 and every estimate 0 (every group so far all wrong): every weight p(1-p) is 0,
    so the draw is uniform over the pairs not excluded (was: probabilities of 0/0, a crash mid-run)."""
    s = PrioritizedSampler(ENV, floor=0.0, decay=0.5)
    s.observe(s.keys, np.zeros(len(s.keys)), G=8)
    probs = s.probabilities(s.estimates(), np.array([s.keys[0]]))
    assert probs[0] == 0 and np.allclose(probs[1:], 1 / (len(s.keys) - 1))
    a, b, _, _ = s.draw(5, np.random.default_rng(0), np.random.default_rng(1), NONE)
    assert len(set(zip(a.tolist(), b.tolist()))) == 5


def test_prioritized_draws_follow_the_probabilities():
    s = PrioritizedSampler(ENV, floor=0.01, decay=0.5)
    s.observe(s.keys[:3], [8, 4, 0], G=8)  # solved, half right, never right
    probs = s.probabilities(s.estimates(), NONE)
    rng, n = np.random.default_rng(0), 20000
    counts = np.zeros(len(s.keys))
    for _ in range(n):
        a, b, seen, estimates = s.draw(1, None, rng, NONE)
        counts[np.searchsorted(s.keys, pair_keys(ENV, a, b))] += 1
    for i in range(3):  # within 4 standard deviations of the binomial count
        assert abs(counts[i] - n * probs[i]) < 4 * math.sqrt(n * probs[i] * (1 - probs[i])), i
    assert counts[1] > counts[0] and counts[1] > counts[2]  # p(1-p) favours the mixed pair
    a, b, seen, estimates = s.draw(len(s.keys), None, rng, NONE)  # without replacement: every pair once
    assert sorted(pair_keys(ENV, a, b).tolist()) == s.keys.tolist()
    assert seen.sum() == 3 and np.allclose(estimates, s.estimates()[np.searchsorted(s.keys, pair_keys(ENV, a, b))])


def test_prioritized_refuses_a_space_too_large_to_enumerate():
    with pytest.raises(ValueError, match="use problem_sampler=replay"):
        PrioritizedSampler(MathEnvironment("adder", 4), floor=0.01, decay=0.5)


# ---- replay -------------------------------------------------------------------------------------
def test_replay_enters_leaves_and_drops_the_oldest_by_hand():
    t = train_keys()
    r = ReplaySampler(ENV, share=0.5, capacity=3)
    r.observe(t[:3], [3, 0, 8], G=8)  # mixed and all wrong enter; all right does not
    assert list(r.buffer.items()) == [(t[0], 3 / 8), (t[1], 0.0)]
    r.observe([t[3], t[0]], [5, 8], G=8)  # t0 solved: leaves
    assert list(r.buffer) == [t[1], t[3]]
    r.observe([t[4], t[2], t[1]], [1, 2, 4], G=8)  # t1 keeps its place with its new rate; 4 > 3: the oldest goes
    assert list(r.buffer.items()) == [(t[3], 5 / 8), (t[4], 1 / 8), (t[2], 2 / 8)]


def one_group_at_a_time(buffer: dict, keys, successes, G: int, capacity: int) -> list:
    """The replay buffer's rule, written out a group after another with a dict's own operations."""
    from collections import OrderedDict
    buffer = OrderedDict(buffer)
    for key, k in zip(keys, successes):
        if k == G:
            buffer.pop(key, None)
        else:
            buffer[key] = k / G  # a key already in keeps its place
    while len(buffer) > capacity:
        buffer.popitem(last=False)
    return list(buffer.items())


@pytest.mark.parametrize("seed", range(4))
def test_replay_observes_what_its_groups_one_after_another_would_leave(seed):
    """observe leaves the buffer (keys, order, rates) of its rule written out plainly, over random steps with keys
    that come several times in a step (solved, then not, then again), keys already in, and the oldest leaving at
    capacity (results/study/vectorized-replay/ checks array operations against it the same way)."""
    rng = np.random.default_rng(seed)
    t = train_keys()[:40]  # few keys, many groups: repeats within a step and across steps
    r = ReplaySampler(ENV, share=0.5, capacity=12)
    expected, moved, full = [], 0, 0
    for step in range(30):
        keys, successes = rng.choice(t, size=rng.integers(1, 25)), rng.choice([0, 3, 8, 8], size=25)
        successes = successes[:len(keys)]
        expected = one_group_at_a_time(expected, keys.tolist(), successes.tolist(), 8, 12)
        before = list(r.buffer)
        r.observe(keys, successes, G=8)
        assert list(r.buffer.items()) == expected, step
        moved, full = moved + (before != list(r.buffer)[:len(before)]), full + (len(r.buffer) == 12)
    assert moved > 10 and full > 5  # (the order changed often; the buffer was often at its capacity)
    r.observe(NONE, NONE, G=8)  # no group: nothing changes
    assert list(r.buffer.items()) == expected


def test_replay_draws_its_share_from_the_buffer_and_the_rest_fresh():
    t = train_keys()
    r = ReplaySampler(ENV, share=0.5, capacity=10)
    r.observe(t[:3], [1, 2, 3], G=8)
    a, b, selected, estimates = r.draw(4, np.random.default_rng(5), np.random.default_rng(6), np.array([t[0]]))
    keys = pair_keys(ENV, a, b)
    assert selected.tolist() == [True, True, False, False]
    assert sorted(keys[:2].tolist()) == sorted([t[1], t[2]])  # t0 was drawn already this step
    assert estimates[:2].tolist() == [r.buffer[k] for k in keys[:2].tolist()] and np.isnan(estimates[2:]).all()
    fresh = ENV.sample_operands(2, np.random.default_rng(5))  # the rest: fresh draws from the problems stream
    assert (a[2:] == fresh[0]).all() and (b[2:] == fresh[1]).all()
    a, b, selected, _ = r.draw(8, np.random.default_rng(5), np.random.default_rng(6), NONE)
    assert selected.sum() == 3  # a share of 4 from a buffer of 3: all of it


def long_pairs(env, split: str, values: list) -> np.ndarray:
    """(K, 2, width) digit arrays of the first pairs (a, b) of `values` in `split`, one per entry of values: a list
    of (a candidates, b) whose first a making a pair of that split is taken."""
    from rl.long_env import to_digits
    rows = []
    for candidates, b in values:
        a = next(a for a in candidates if env.split_of([a], [b])[0] == SPLITS.index(split))
        rows.append(np.stack([to_digits([a], env.width)[0], to_digits([b], env.width)[0]]))
    return np.stack(rows)


def test_replay_of_many_lengths_keeps_each_pairs_digits_and_draws_only_the_steps_width():
    """Keys of long pairs are hashes: the buffer keeps the digits, a step draws only pairs of its width (written at
    its written width), and a solved or evicted pair leaves with its digits."""
    env = LongAdditionEnvironment((1, 6), positions="coupled", max_position_offset=9)
    r = ReplaySampler(env, share=0.5, capacity=3)
    env.set_width(4)  # a step at width 4: the longer operand of each pair has 4 digits
    four = long_pairs(env, "train", [(range(1000, 9999), 56), (range(2000, 9999), 7), (range(3000, 9999), 999)])
    held_out = long_pairs(env, "validation", [(range(1000, 9999), 12)])
    pairs = np.concatenate([four, held_out])
    keys = pair_keys(env, pairs[:, 0], pairs[:, 1])
    r.observe(keys, [3, 0, 8, 1], G=8, pairs=pairs)  # mixed and all wrong enter; all right and held out do not
    assert list(r.buffer.items()) == [(keys[0], 3 / 8), (keys[1], 0.0)]
    assert r.widths == {keys[0]: 4, keys[1]: 4}
    assert np.array_equal(r.operands[keys[0]], np.pad(four[0], ((0, 0), (0, 2))))  # kept at the range's 6 digits
    env.set_width(2)
    two = long_pairs(env, "train", [(range(10, 99), 5)])
    r.observe(pair_keys(env, two[:, 0], two[:, 1]), [4], G=8, pairs=two)
    assert list(r.widths.values()) == [4, 4, 2]
    env.set_width(4, 6)  # width 4 written at 6 digits: the two pairs of width 4, none of width 2
    a, b, selected, estimates = r.draw(6, np.random.default_rng(5), np.random.default_rng(6), NONE)
    assert selected.tolist() == [True] * 2 + [False] * 4 and a.shape == b.shape == (6, 6)
    assert sorted(pair_keys(env, a[:2], b[:2]).tolist()) == sorted(keys[:2].tolist())
    assert sorted(estimates[:2].tolist()) == [0.0, 3 / 8] and np.isnan(estimates[2:]).all()
    fresh = env.sample_operands(4, np.random.default_rng(5))
    assert np.array_equal(a[2:], fresh[0]) and np.array_equal(b[2:], fresh[1])
    env.set_width(5)  # no buffered pair of 5 digits: all fresh
    assert not r.draw(4, np.random.default_rng(5), np.random.default_rng(6), NONE)[2].any()
    env.set_width(3)
    three = long_pairs(env, "train", [(range(100, 999), 1), (range(200, 999), 3)])
    key = lambda p: pair_keys(env, p[:, 0], p[:, 1])
    env.set_width(4)
    r.observe(keys[:1], [8], G=8, pairs=four[:1])  # solved: leaves, digits and all
    env.set_width(3)
    r.observe(key(three[:1]), [2], G=8, pairs=three[:1])
    assert list(r.buffer) == [keys[1], key(two)[0], key(three)[0]] and keys[0] not in r.operands
    r.observe(key(three[1:]), [1], G=8, pairs=three[1:])  # a fourth entry: the oldest leaves, digits and all
    assert list(r.buffer) == [key(two)[0], key(three)[0], key(three)[1]]
    assert len(r.operands) == len(r.widths) == 3 and keys[1] not in r.operands
    loaded = ReplaySampler(env, share=0.5, capacity=3)
    loaded.load_state_dict({k: v.clone() for k, v in r.state_dict().items()})
    assert list(loaded.buffer.items()) == list(r.buffer.items()) and loaded.widths == r.widths
    assert all(np.array_equal(loaded.operands[k], r.operands[k]) for k in r.buffer)


# ---- uniform, held-out pairs ---------------------------------------------------------------------
def test_uniform_draws_are_the_original_stream_exactly():
    a, b, selected, estimates = UniformSampler(ENV).draw(50, np.random.default_rng(3), None, NONE)
    a0, b0 = ENV.sample_operands(50, np.random.default_rng(3))
    assert (a == a0).all() and (b == b0).all() and not selected.any() and np.isnan(estimates).all()
    trainer = make_trainer()  # the first round of a step: the original draws from the (seed, rank, step) stream
    first, _, _ = trainer.sample(3)
    rng = seeding.numpy_rng(trainer.config.seed, 0, 3, seeding.PROBLEMS)
    prompts, _ = trainer.env.encode(*trainer.env.sample_operands(trainer.local_prompts, rng))
    assert torch.equal(first.prompts, prompts.repeat_interleave(trainer.config.rl_rollout_size, dim=0))


def test_no_held_out_pair_ever_enters_a_state():
    held_out = held_out_key()
    for s in (PrioritizedSampler(ENV, 0.01, 0.5), ReplaySampler(ENV, 0.5, 100)):
        before = {k: v.clone() for k, v in s.state_dict().items() if torch.is_tensor(v)}
        s.observe([held_out], [3], G=8)
        after = {k: v for k, v in s.state_dict().items() if torch.is_tensor(v)}
        assert all(torch.equal(before[k], after[k]) for k in before)
    for sampler in ("prioritized", "replay"):  # a real run: every pair drawn and kept is a training pair
        trainer = make_trainer(problem_sampler=sampler, rl_algorithm="dapo")
        drawn = []
        real = trainer.sample
        trainer.sample = lambda step: drawn.append(real(step)) or drawn[-1]
        for _ in range(4):
            trainer.train_step()
        keys = torch.cat([k for _, _, stats in drawn for k in [stats.outcomes()[0]]]).numpy()
        state = trainer.problem_sampler.state_dict()
        if sampler == "replay":
            keys = np.concatenate([keys, state["keys"].numpy()])
            assert len(state["keys"]) > 0
        assert (trainer.env.split_of(*key_operands(trainer.env, keys)) == 0).all()
    trainer = make_trainer(**SETTINGS["replay-lengths"], rl_algorithm="dapo")  # keys not invertible: the digits kept
    for _ in range(4):
        trainer.train_step()
    operands = trainer.problem_sampler.state_dict()["operands"].numpy()
    assert len(operands) > 0 and (trainer.env.split_of(operands[:, 0], operands[:, 1]) == 0).all()
    trainer.env.set_width(2)
    held_out = long_pairs(trainer.env, "test", [(range(10, 99), 3)])
    sampler, key = trainer.problem_sampler, pair_keys(trainer.env, held_out[:, 0], held_out[:, 1])
    before = len(sampler.buffer)
    sampler.observe(key, [0], G=4, pairs=held_out)  # all wrong, but held out: it stays out
    assert len(sampler.buffer) == before and key[0] not in sampler.buffer


def test_refill_rule_by_hand():
    assert refill_size(32, 32, 8, max_prompts=128) == math.ceil(1.25 * 24 * 32 / 8) == 120
    assert refill_size(32, 64, 4, max_prompts=128) == 128  # capped
    assert refill_size(32, 32, 0, max_prompts=128) == 128  # nothing kept yet: the most


# ---- lengths: a curriculum over the operand lengths of the task of many lengths ----------------------
def test_lengths_update_estimate_and_width_weights_by_hand():
    env = LongAdditionEnvironment((3, 6))
    s = LengthSampler(env, floor=0.02, decay=0.5)
    env.set_width(5)
    s.observe(np.array([11, 12]), np.array([6, 8]), G=8)  # width 5: right 14, wrong 2
    s.observe(np.array([13]), np.array([0]), G=8)  # width 5 again: right 0.5*14 + 0 = 7, wrong 0.5*2 + 8 = 9
    env.set_width(3)
    s.observe(np.array([14, 15]), np.array([8, 8]), G=8)  # width 3: right 16, wrong 0
    assert s.right.tolist() == [16.0, 0.0, 7.0, 0.0] and s.wrong.tolist() == [0.0, 0.0, 9.0, 0.0]
    m = (16 / 16 + 7 / 16) / 2  # the mean raw rate of the widths seen: an unseen width's estimate
    p = [(16 + 8 * m) / 24, m, (7 + 8 * m) / 24, m]  # (s + G m) / (s + f + G)
    assert s.estimates() == pytest.approx(p)
    w = [q * (1 - q) + 0.02 for q in p]
    assert s.width_weights() == pytest.approx([x / sum(w) for x in w])
    assert s.metrics() == pytest.approx({"select/mean_width": sum((3 + i) * x for i, x in enumerate(w)) / sum(w),
                                         "select/edge_width": 5})  # p = 0.53: 0.249 against m(1 - m) = 0.202
    a, b, selected, estimates = s.draw(4, np.random.default_rng(0), None, NONE)  # width 3 now: seen, its estimate
    assert a.shape == (4, 3) and selected.all() and estimates == pytest.approx([p[0]] * 4)


def test_lengths_weights_draw_the_widths_and_none_leaves_the_tasks_draw_unchanged():
    env = LongAdditionEnvironment((1, 4))
    weights = np.array([0.1, 0.0, 0.6, 0.3])
    widths = [env.draw_width(np.random.default_rng(i), weights) for i in range(4000)]
    counts = np.bincount(widths, minlength=5)[1:] / 4000
    assert counts[1] == 0 and np.abs(counts - weights).max() < 0.03  # 4 standard errors at most
    # no weights: the longer of two uniform draws, exactly the stream the uniform sampler's runs drew
    assert [env.draw_width(np.random.default_rng(i)) for i in range(50)] == \
        [int(max(np.random.default_rng(i).integers(1, 5, size=2))) for i in range(50)]


def test_lengths_draws_each_step_at_the_width_its_weights_favour():
    """A trainer whose curriculum has seen width 4 half solved and every other width solved: with no floor
    every step after it is at width 4, and its problems' longer operand has 4 digits."""
    from helpers import make_trainer
    trainer = make_trainer(**LENGTHS, length_floor=0.0)
    sampler = trainer.problem_sampler
    sampler.right[:], sampler.wrong[:] = 1000.0, 0.0
    sampler.right[3], sampler.wrong[3] = 500.0, 500.0
    sampler.G = 4
    seen = []
    real = trainer.rollouts.sample_round
    trainer.rollouts.sample_round = lambda *args, **kw: seen.append(trainer.env.width) or real(*args, **kw)
    trainer.train_step()
    assert seen and set(seen) == {4}


LENGTHS = dict(problem_sampler="lengths", rl_ndigits="1-6", positions="coupled", max_position_offset=9)
SETTINGS = {"prioritized": dict(problem_sampler="prioritized"), "replay": dict(problem_sampler="replay"),
            "lengths": LENGTHS, "replay-lengths": {**LENGTHS, "problem_sampler": "replay"}}


# ---- the trainer: metrics, resume, ranks ----------------------------------------------------------
@pytest.mark.parametrize("sampler", ["prioritized", "replay"])
def test_selection_metrics_say_what_the_draws_were(sampler):
    trainer = make_trainer(problem_sampler=sampler, rl_algorithm="dapo")
    trainer.train_step()
    seen = {}
    real = trainer.sample
    trainer.sample = lambda step: seen.setdefault("out", real(step))
    m = trainer.train_step()
    stats = seen["out"][2]
    assert m["select/selected_share"] == pytest.approx(stats.selected / stats.drawn) and 0 < stats.selected
    assert m["select/drawn_pass_rate"] == pytest.approx(stats.estimate_sum / stats.estimated)
    if sampler == "prioritized":
        assert m["select/unsolved_pairs"] == int((trainer.problem_sampler.estimates() < 0.5).sum()) > 0
    else:
        assert m["select/replay_size"] == len(trainer.problem_sampler.buffer) > 0


@pytest.mark.parametrize("sampler", ["prioritized", "replay", "lengths", "replay-lengths"])
def test_resume_restores_the_selection_state_exactly(tmp_path, sampler):
    """4 steps, snapshot, a fresh trainer loads it, 4 more == 8 straight, selection state included;
    a trainer that loads everything but the selection state goes elsewhere (the check has teeth)."""
    settings = dict(**SETTINGS[sampler], rl_algorithm="dapo")

    def run_steps(trainer, n):
        for _ in range(n):
            trainer.train_step()
        return trainer

    straight = run_steps(make_trainer(**settings), 8).state_dict()
    half = run_steps(make_trainer(**settings), 4).state_dict()
    torch.save(half, tmp_path / "half.pt")
    snap = torch.load(tmp_path / "half.pt", weights_only=True)
    fresh = fresh_trainer(**settings)
    fresh.load_state_dict(snap)
    assert_same_state(straight, run_steps(fresh, 4).state_dict())
    forgetful = make_trainer(**settings)
    forgetful.load_state_dict({**snap, "problem_sampler": make_trainer(**settings).problem_sampler.state_dict()})
    with pytest.raises(AssertionError, match="differs"):
        assert_same_state(straight, run_steps(forgetful, 4).state_dict())


@pytest.mark.parametrize("sampler", ["prioritized", "replay"])
def test_a_loaded_state_draws_and_estimates_as_the_saved_one_before_it_observes_again(sampler):
    """Everything the state says, not just what the next observe() rewrites: a sampler that loads
    another's state gives the same estimates, probabilities, metrics and draws at once."""
    make = lambda: (PrioritizedSampler(ENV, floor=0.01, decay=0.5) if sampler == "prioritized"
                    else ReplaySampler(ENV, share=0.5, capacity=50))
    saved, keys = make(), train_keys()
    rng = np.random.default_rng(0)
    for _ in range(3):  # groups of 8 answers, some all right, some mixed, some all wrong
        saved.observe(keys[:40], rng.integers(0, 9, size=40), G=8)
    loaded = make()
    loaded.load_state_dict({k: v.clone() if torch.is_tensor(v) else v for k, v in saved.state_dict().items()})
    assert loaded.metrics() == saved.metrics()
    if sampler == "prioritized":
        assert np.array_equal(loaded.estimates(), saved.estimates())
        assert np.array_equal(loaded.probabilities(loaded.estimates(), NONE),
                              saved.probabilities(saved.estimates(), NONE))
    rngs = lambda: (seeding.numpy_rng(1, 0, 5, seeding.PROBLEMS), seeding.numpy_rng(1, 0, 5, seeding.SELECTION))
    for got, want in zip(loaded.draw(16, *rngs(), NONE), saved.draw(16, *rngs(), NONE)):
        assert np.array_equal(got, want, equal_nan=True)


def rank_worker(rank: int, store: str, out: str, sampler: str):
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        trainer = make_trainer(info=DistInfo(rank, rank, 2, torch.device("cpu")), **SETTINGS[sampler],
                               rl_algorithm="dapo")
        outcomes, widths, real = [], [], trainer.sample
        trainer.sample = lambda step: outcomes.append(real(step)) or widths.append(getattr(trainer.env, "width", None)) \
            or outcomes[-1]
        for _ in range(3):
            trainer.train_step()
        torch.save({"state": trainer.problem_sampler.state_dict(), "widths": widths,
                    "outcomes": [stats.outcomes() for _, _, stats in outcomes]}, f"{out}.{rank}")
        torch.distributed.barrier()  # neither rank tears the group down while the other's last message is in flight
    finally:
        torch.distributed.destroy_process_group()
    end_spawned_worker()


@pytest.mark.parametrize("sampler", ["prioritized", "replay", "lengths", "replay-lengths"])
def test_every_rank_holds_the_state_of_all_ranks_outcomes(tmp_path, sampler):
    run_ranks(rank_worker, (str(tmp_path / "store"), str(tmp_path / "out"), sampler))
    ranks = [torch.load(f"{tmp_path / 'out'}.{r}", weights_only=True) for r in range(2)]
    expected = make_trainer(**SETTINGS[sampler]).problem_sampler  # one sampler fed rank 0's groups, then rank 1's
    for step in range(3):
        if sampler in ("lengths", "replay-lengths"):  # each step's groups are of the width both ranks drew for it
            expected.env.set_width(ranks[0]["widths"][step])
        keys = torch.cat([ranks[r]["outcomes"][step][0] for r in range(2)]).numpy()
        successes = torch.cat([ranks[r]["outcomes"][step][1] for r in range(2)]).numpy()
        pairs = None if ranks[0]["outcomes"][step][2] is None else \
            torch.cat([ranks[r]["outcomes"][step][2] for r in range(2)]).numpy()  # (many lengths: the digits)
        expected.observe(keys, successes, G=4, pairs=pairs)
    assert len(ranks[0]["outcomes"][0][0]) > 0 and len(ranks[1]["outcomes"][0][0]) > 0
    assert ranks[0]["widths"] == ranks[1]["widths"]  # every rank writes a step's problems at one width
    for r in range(2):
        state = {"problem_sampler": ranks[r]["state"]}
        assert_sampler_state_equal(state["problem_sampler"], expected.state_dict())


def assert_sampler_state_equal(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k], k


# ---- the benchmark's names for what it runs -----------------------------------------------------------
def test_benchmark_sampler_specs_name_the_settings_they_run_with():
    """A spec NAME:KEY=VALUE runs that sampler with those settings, and its result file says so."""
    from rl.tools.benchmark import run_name, sampler_args
    assert sampler_args("replay") == ["--problem_sampler=replay"]
    assert sampler_args("uniform:dynamic_sampling_max_rounds=2,rl_train_steps=9") == [
        "--problem_sampler=uniform", "--dynamic_sampling_max_rounds=2", "--rl_train_steps=9"]
    assert run_name("AdderRLConfig", "uniform:dynamic_sampling_max_rounds=2", 1, 1) == \
        "AdderRLConfig-uniform+dynamic_sampling_max_rounds=2-seed1"
    assert run_name("AdderRLConfig", None, 1, 2) == "AdderRLConfig-seed1-2proc"
    assert run_name("ScarceMultiplierRLConfig", None, 0, 1, ["sft_worked_examples=1024"]) == \
        "ScarceMultiplierRLConfig-sft_worked_examples=1024-seed0"


def test_benchmark_names_too_long_for_a_file_end_in_a_digest_and_the_seed(tmp_path):
    """A run's name past 255 bytes with ".json.tmp" stopped the benchmark when it made the run's folder: the part
    that does not fit becomes a digest of the whole name, so two runs still differ and the seed stays readable."""
    from rl.tools import results
    from rl.tools.benchmark import run_name
    from rl.tools.lengths import seed_label
    from rl.tools.results import MAX_NAME
    settings = [f"setting_number_{i}=value_{i}" for i in range(12)]
    long, other = (run_name("AdderRLConfig", "replay:rl_batch_size=256", 1, 2, s) for s in (settings, settings[:-1] +
                                                                                               ["setting_number_11=x"]))
    assert len(long) == len(other) == MAX_NAME == 246 and long != other
    assert long.endswith("-seed1-2proc") and long.startswith("AdderRLConfig-replay+rl_batch_size=256-setting_number_0")
    assert long[MAX_NAME - 23] == "~" and long[:MAX_NAME - 23] == other[:MAX_NAME - 23]
    os.makedirs(tmp_path / long)  # the folder and the record can be made (an OSError before)
    results.save({"seed": 1}, str(tmp_path / (long + ".json")))
    assert json.load(open(tmp_path / (long + ".json"))) == {"seed": 1}
    fits = run_name("AdderRLConfig", None, 1, 1, ["x" * (MAX_NAME - len("AdderRLConfig--seed1"))])
    assert len(fits) == MAX_NAME and "~" not in fits  # a name that fits is as before
    label = seed_label("LongAdderRLConfig", settings, 3)  # the length study's names are cut the same way
    assert len(label) == MAX_NAME and label.endswith("-seed3") and label[MAX_NAME - 17] == "~"
    from rl.tools.compare import run_name as compare_name  # and the algorithm comparison's
    cut = compare_name("AdderRLConfig", "grpo:" + ",".join(settings), 3)
    assert len(cut) == MAX_NAME and cut.startswith("AdderRLConfig-grpo+setting_number_0") and cut.endswith("-seed3")
    assert cut[MAX_NAME - 17] == "~"
    assert compare_name("AdderRLConfig", "dapo:problem_sampler=uniform", 0) == "AdderRLConfig-dapo+problem_sampler=uniform-seed0"
