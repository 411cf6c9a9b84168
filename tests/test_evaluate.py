"""Which split each reported number decodes, pinned from the outside, and greedy decoding: the
trainer's test and validation sets, the entry script's names for them and the number it reports
must each decode the split the README says; pass@k by hand, the exact p(right) against the product of
token probabilities and the sampled pass@k against the exact one.
Run: python -m pytest tests/test_evaluate.py"""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from helpers import make_trainer
from rl import math_trainer, rl_ddp
from rl.evaluate import EvalResult, answer_probability, count_right_samples, exact_pass_at_k, pass_at_k_unbiased
from rl.math_env import SPLITS
from rl.math_reward import digit_match, exact_match
from rl.warm_start import teacher_forced_step

TEST, VALIDATION = SPLITS.index("test"), SPLITS.index("validation")


def test_each_reported_number_decodes_the_split_it_is_named_after(monkeypatch):
    """A stand-in evaluation scores 0.5 per test pair and 0.25 per validation pair it is given, so
    each number says which split was decoded under its name."""
    seen = []

    def by_split(model, env, a, b, info, *, split, **kwargs):
        splits = env.split_of(a, b)
        seen.append(split)
        return EvalResult(float(0.5 * (splits == TEST).mean() + 0.25 * (splits == VALIDATION).mean()), 0.0, None,
                          len(a), split)
    monkeypatch.setattr(math_trainer, "evaluate", by_split)
    trainer, metrics = make_trainer(), {}
    reported = rl_ddp.evaluate_and_report(trainer, metrics, "")  # what the entry script logs, prints and summarises
    assert metrics["eval/accuracy"] == 0.5 and metrics["val/accuracy"] == 0.25
    assert reported.accuracy == 0.5 and sorted(seen) == ["test", "validation"]
    assert len(trainer.eval_set("test")[0]) == len(trainer.eval_set("validation")[0]) == trainer.config.num_eval


def greedy_answers(model, env, a, b) -> torch.Tensor:
    """Answers by argmax, one token at a time without a cache; after the end token, padding."""
    prompts, _ = env.encode(a, b)
    sequence, done = prompts, torch.zeros(len(prompts), dtype=torch.bool)
    with torch.no_grad():
        for _ in range(env.answer_len):
            token = model(sequence)[:, -1].argmax(dim=-1)
            token = torch.where(done, torch.full_like(token, env.pad_token), token)
            done |= token == env.end_token
            sequence = torch.cat([sequence, token[:, None]], dim=1)
    return sequence[:, env.prompt_len:]


def test_evaluation_decodes_greedily():
    trainer = make_trainer()
    a, b = trainer.eval_set("test")
    _, targets = trainer.env.encode(a, b)
    answers = greedy_answers(trainer.model, trainer.env, a, b)
    result = trainer.accuracy("test")
    assert result.digit_accuracy == pytest.approx(digit_match(trainer.env, targets, answers).mean().item(), abs=1e-9)
    assert result.accuracy == pytest.approx(exact_match(trainer.env, targets, answers).mean().item(), abs=1e-9)
    assert trainer.accuracy("test") == result  # the same answers every time




# ---- pass@k: sampled and exact ----------------------------------------------------------------
def test_pass_at_k_unbiased_by_hand():
    assert pass_at_k_unbiased(5, 2, 2).item() == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k_unbiased(5, torch.tensor([0, 1, 5]), 1).tolist() == pytest.approx([0.0, 0.2, 1.0])
    assert pass_at_k_unbiased(5, 4, 2).item() == 1.0  # n - c = 1 < k: every pair of draws holds a right one
    for n, c, k in [(10, 3, 4), (64, 7, 8), (200, 150, 60), (200, 3, 1)]:  # C(200, 60) is about 1e51
        ratio = Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_at_k_unbiased(n, c, k).item() == pytest.approx(float(1 - ratio), rel=1e-12, abs=1e-15)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k_unbiased(4, 1, 5)


def test_exact_pass_at_k_by_hand():
    assert exact_pass_at_k(torch.tensor([0.0, 0.5, 1.0]), 3).tolist() == pytest.approx([0.0, 0.875, 1.0])
    # 1 - (1 - p)^k loses every digit for a tiny p in floating point; k p is the answer to first order
    assert exact_pass_at_k(torch.tensor([1e-20], dtype=torch.float64), 2).item() == pytest.approx(2e-20, abs=1e-29)


@pytest.fixture(scope="module")
def taught():
    """A tiny policy (2-digit addition) after 200 supervised steps: right often, not always, so p(right)
    is spread over (0, 1); and its RL snapshot, made with rl_temperature=0.8."""
    trainer = make_trainer(rl_temperature=0.8)
    optimizer, rng = torch.optim.Adam(trainer.model.parameters(), lr=3e-3), np.random.default_rng(0)
    for _ in range(200):
        teacher_forced_step(trainer.model, trainer.env, optimizer, *trainer.env.sample_operands(64, rng), "cpu")
    trainer.model.eval()
    return trainer


def test_answer_probability_is_the_product_of_the_token_probabilities(taught):
    """p(right) by hand: the model read one token at a time, softmax(logits / T) at each answer token
    of the target, end token included, multiplied."""
    model, env, T = taught.model, taught.env, 0.7
    prompts, targets = env.encode([37, 5], [48, 91])
    by_hand = []
    with torch.no_grad():
        for prompt, target in zip(prompts, targets):
            probability, sequence = 1.0, prompt
            for token in target:  # "58$"... the end token is the last factor
                probability *= torch.softmax(model(sequence[None])[0, -1] / T, dim=-1)[token].item()
                sequence = torch.cat([sequence, token[None]])
            by_hand.append(probability)
    assert targets[0, -1] == env.end_token
    assert answer_probability(model, env, prompts, targets, T).tolist() == pytest.approx(by_hand, rel=1e-5)


def test_a_greedy_answer_is_certain_at_a_small_temperature(taught):
    """As T -> 0 sampling is greedy: p(right) -> 1 where the greedy answer is right, 0 where it is wrong."""
    env = taught.env
    a, b = env.eval_operands(200, "test")
    prompts, targets = env.encode(a, b)
    greedy = taught.model.generate(prompts, env.answer_len, greedy=True, end_token=env.end_token,
                                   pad_token=env.pad_token)
    right = exact_match(env, targets, greedy).bool()
    p = answer_probability(taught.model, env, prompts, targets, 1e-4)
    assert 0 < right.sum() < len(right)  # both cases are checked
    assert p[right].min() > 0.99 and p[~right].max() < 0.01


def binomial_variance(n: int, p: torch.Tensor, k: int) -> torch.Tensor:
    """Var of the unbiased pass@k estimate when c ~ Binomial(n, p): p (B,) -> (B,), summed over c = 0..n."""
    c = torch.arange(n + 1, dtype=torch.float64)
    p = p.double().clamp(1e-300, 1 - 1e-16)[:, None]
    log_pmf = (torch.lgamma(torch.tensor(n + 1.0)) - torch.lgamma(c + 1) - torch.lgamma(n - c + 1)
               + c * p.log() + (n - c) * torch.log1p(-p))
    f = pass_at_k_unbiased(n, torch.arange(n + 1), k)
    return (log_pmf.exp() * f ** 2).sum(dim=1) - exact_pass_at_k(p[:, 0], k) ** 2


def test_sampled_and_exact_pass_at_k_agree_within_their_error(taught):
    """The unbiased estimate from n samples has mean 1 - (1 - p)^k for each problem, so the two means
    over problems differ by sampling noise only: its standard error, from each problem's binomial."""
    env, n, T = taught.env, 32, 1.0
    a, b = env.eval_operands(150, "test")
    p = answer_probability(taught.model, env, *env.encode(a, b), T)
    assert ((p > 0.1) & (p < 0.9)).float().mean() > 0.3  # spread: the comparison is not 0 = 0 or 1 = 1
    c = count_right_samples(taught.model, env, a, b, num_samples=n, temperature=T,
                            generator=torch.Generator().manual_seed(0), batch_size=1000)
    for k in (1, 4, 32):
        sampled, exact = pass_at_k_unbiased(n, c, k).mean().item(), exact_pass_at_k(p, k).mean().item()
        se = binomial_variance(n, p, k).sum().sqrt().item() / len(a)
        assert abs(sampled - exact) < 4 * se, (k, sampled, exact, se)
    again = count_right_samples(taught.model, env, a, b, num_samples=n, temperature=T,
                                generator=torch.Generator().manual_seed(0), batch_size=1000)
    assert torch.equal(c, again)  # a seeded generator: the same samples
