"""The numerical guard's sampling, for weights that are finite but so large that the logits overflow:
sampling never raises and flags the rows that met non-finite logits, the others exactly as they were.
Run: python -m pytest tests/test_guard.py"""

import copy

import pytest
import torch

from model.gpt import GPT, GPTConfig

END, PAD = 11, 12
HUGE = 1e30  # finite weights times this are still finite, but the activations overflow to inf or nan


def make_model(seed=0, **kw):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**dict(vocab_size=14, n_position=16, n_layer=2, n_head=4, n_embed=32), **kw})).eval()


def blow_up(model):
    """Multiply the (tied) embedding and output head by HUGE: every weight stays finite, no logit does."""
    with torch.no_grad():
        model.wte.weight.mul_(HUGE)
    assert all(torch.isfinite(p).all() for p in model.parameters())


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
