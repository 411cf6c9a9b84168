"""The GPT and its KV-cached generation.  Run: python -m pytest tests/test_model.py"""

import pytest
import torch

from model.gpt import GPT, GPTConfig, KVCache

END, PAD = 11, 12


def make_model(seed=0, **kw):
    torch.manual_seed(seed)
    args = dict(vocab_size=14, n_position=16, n_layer=2, n_head=4, n_embed=32)
    args.update(kw)
    return GPT(GPTConfig(**args)).eval()


def test_cached_and_uncached_generation_agree():
    model = make_model()
    # Larger random weights so the argmax is not the same token everywhere.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)
    prompts = torch.randint(0, 10, (16, 8))
    cached = model.generate(prompts, 5, greedy=True)
    uncached = model.generate(prompts, 5, greedy=True, use_cache=False)
    assert torch.equal(cached, uncached)
    assert len(set(cached.flatten().tolist())) > 3  # the check compares real choices

    # The logits at each decoding step match a full forward pass over the same sequence.
    cached = cached.clone()  # leave inference mode
    with torch.no_grad():
        check_step_logits(model, prompts, cached)


def check_step_logits(model, prompts, cached):
    full = model(torch.cat([prompts, cached], dim=1))
    cache = KVCache(model.config, 16, 13, prompts.device, torch.float32)
    step_logits = [model(prompts, cache)[:, -1]]
    for t in range(4):
        step_logits.append(model(cached[:, t:t + 1], cache)[:, -1])
    assert torch.allclose(torch.stack(step_logits, 1), full[:, 7:12], atol=1e-4)


def test_sampling_is_reproducible_with_a_generator_and_pads_after_end():
    model = make_model()
    prompts = torch.randint(0, 10, (64, 8))
    draw = lambda seed: model.generate(prompts, 6, temperature=2.0, end_token=END, pad_token=PAD,
                                       generator=torch.Generator().manual_seed(seed))
    first, again, other = draw(1), draw(1), draw(2)
    assert torch.equal(first, again) and not torch.equal(first, other)
    for row in first.tolist():
        if END in row:
            after = row[row.index(END) + 1:]
            assert all(t == PAD for t in after)
    assert any(END in row and row.index(END) < 5 for row in first.tolist())  # some rows did end early


def test_top_k_one_is_greedy():
    model = make_model()
    prompts = torch.randint(0, 10, (8, 8))
    assert torch.equal(model.generate(prompts, 4, top_k=1, generator=torch.Generator().manual_seed(0)),
                       model.generate(prompts, 4, greedy=True))


def test_weight_tying_and_shape_errors():
    tied, untied = make_model(), make_model(tie_weights=False)
    assert tied.lm_head.weight is tied.wte.weight and untied.lm_head.weight is not untied.wte.weight
    assert untied.num_params() - tied.num_params() == 14 * 32
    with pytest.raises(ValueError, match="sequence of 17 tokens exceeds n_position=16"):
        tied(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"n_embed=30 is not divisible by n_head=4; pick n_head among \[1, 2, 3, 5"):
        make_model(n_embed=30)


def test_num_samples_reads_each_prompt_once_and_matches_repeated_prompts():
    model = make_model()
    prompts = torch.randint(0, 10, (6, 8))
    repeated = prompts.repeat_interleave(4, dim=0)
    assert torch.equal(model.generate(prompts, 5, greedy=True, num_samples=4),
                       model.generate(repeated, 5, greedy=True))
    draw = lambda p, k: model.generate(p, 5, temperature=1.5, num_samples=k, generator=torch.Generator().manual_seed(3))
    assert torch.equal(draw(prompts, 4), draw(repeated, 1))
    assert torch.equal(model.generate(prompts, 5, greedy=True, num_samples=4, use_cache=False),
                       model.generate(repeated, 5, greedy=True))


def test_logprobs_and_entropy_are_those_of_the_distribution_each_token_was_drawn_from():
    model = make_model()
    prompts = torch.randint(0, 10, (3, 8))
    tokens, logp, entropy = model.generate(prompts, 4, temperature=0.7, num_samples=2, with_stats=True,
                                           generator=torch.Generator().manual_seed(0))
    assert torch.equal(tokens, model.generate(prompts, 4, temperature=0.7, num_samples=2,
                                              generator=torch.Generator().manual_seed(0)))
    with torch.no_grad():
        logits = model(torch.cat([prompts.repeat_interleave(2, 0), tokens], 1))[:, 7:11] / 0.7
    p = torch.softmax(logits, -1)
    assert torch.allclose(entropy, -(p * torch.log(p)).sum(-1), atol=1e-5)
    assert torch.allclose(logp, torch.log(p).gather(-1, tokens[..., None])[..., 0], atol=1e-5)


def test_one_optimizer_decays_matrices_and_embeddings_only():
    model = make_model()
    opt = model.configure_optimizer(lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99))
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    assert any(p is model.blocks[0].ln_1.weight for p in no_decay["params"])  # LayerNorm gains are not decayed
    assert opt.defaults["betas"] == (0.9, 0.99) and opt.defaults["lr"] == 1e-3
