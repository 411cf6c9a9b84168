"""Which split each reported number decodes, pinned from the outside, and greedy decoding: the
trainer's test and validation sets, the entry script's names for them and the number it reports
must each decode the split the README says. Run: python -m pytest tests/test_evaluate.py"""

import pytest
import torch

from helpers import make_trainer
from rl import math_trainer, rl_ddp
from rl.evaluate import EvalResult
from rl.math_env import SPLITS
from rl.math_reward import digit_match, exact_match

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
