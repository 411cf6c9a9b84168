"""The GPT and its KV-cached generation.  Run: python -m pytest tests/test_model.py"""

import copy

import pytest
import torch

from model.gpt import (GPT, AdamW, GPTConfig, KVCache, ModelSettings, PromptGroups, logn_scale, matmul_attention,
                       shared_prompt_attention, window_mask)
from rl.errors import ConfigError
from rl.warm_start import fingerprint
from tests.helpers import make_config, make_trainer

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


def test_shared_prompt_attention_is_attention_over_a_copied_cache():
    """By hand: the G rows of each prompt attend over its keys, then their own, as matmul_attention does over each
    row's copy of the prompt's keys followed by its own."""
    torch.manual_seed(0)
    B, G, H, P, t, hd = 3, 4, 2, 5, 3, 8
    q = torch.randn(B * G, H, 1, hd)
    prompt_k, prompt_v = torch.randn(B, H, P, hd), torch.randn(B, H, P, hd)
    own_k, own_v = torch.randn(B * G, H, t, hd), torch.randn(B * G, H, t, hd)
    copied = lambda prompt, own: torch.cat([prompt.repeat_interleave(G, dim=0), own], dim=2)
    want = matmul_attention(q, copied(prompt_k, own_k), copied(prompt_v, own_v), is_causal=False)
    got = shared_prompt_attention(q, prompt_k, prompt_v, own_k, own_v)
    assert got.shape == (B * G, H, 1, hd) and torch.allclose(got, want, atol=1e-6)
    # row 5 (prompt 1) by hand: its query against prompt 1's keys and its own
    keys, values = torch.cat([prompt_k[1], own_k[5]], dim=1), torch.cat([prompt_v[1], own_v[5]], dim=1)  # (H, P+t, hd)
    weights = ((q[5] @ keys.transpose(-2, -1)) / hd ** 0.5).softmax(dim=-1)
    assert torch.allclose(got[5], weights @ values, atol=1e-6)


@pytest.mark.parametrize("settings", [{}, dict(logn_attention=4), dict(bf16=True), dict(pos=True)],
                         ids=["plain", "logn", "bf16-autocast", "position-ids"])
def test_a_decode_that_shares_each_prompts_cache_samples_what_copies_sample(settings, monkeypatch):
    """generate(share_prompts=True): the same tokens from the same generator, greedy and sampled, and log-probs and
    entropies to float rounding, where each prompt's G rows read one copy of its cache; the cache holds the prompts
    once. A window's mask reads every row's ids: there it copies, and so is exactly the plain decode."""
    model = make_model(**{k: v for k, v in settings.items() if k == "logn_attention"})
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)  # sharper distributions: the sampled tokens are real choices, not uniform noise
    if settings.get("bf16"):
        model.configure_runtime(autocast_dtype=torch.bfloat16)
    prompts = torch.randint(0, 10, (6, 7))
    pos = torch.arange(1, 13).expand(6, 12) if settings.get("pos") else None
    # (bf16 rounds the two groupings' products apart by ~1e-2: a draw near the boundary between two tokens may fall
    # on either side, and the rows go their own ways from there; greedy's argmax has a margin)
    for kw in (dict(greedy=True),) if settings.get("bf16") else (dict(greedy=True), dict(temperature=1.0)):
        runs = [model.generate(prompts, 5, num_samples=4, generator=torch.Generator().manual_seed(1), with_stats=True,
                               end_token=END, pad_token=PAD, pos=pos, share_prompts=share, **kw) for share in (0, 1)]
        assert len(set(runs[0][0].flatten().tolist())) > 3  # the comparison compares real choices
        assert torch.equal(runs[0][0], runs[1][0]), kw
        tolerance = 2e-2 if settings.get("bf16") else 1e-5
        for plain, shared in zip(runs[0][1:], runs[1][1:]):
            assert torch.allclose(plain, shared, atol=tolerance)
    seen = []
    real = KVCache.share_prompts
    monkeypatch.setattr(KVCache, "share_prompts", lambda self, n, m: seen.append((self.k.shape, n, m))
                        or real(self, n, m))
    model.generate(prompts, 5, num_samples=4, greedy=True, share_prompts=True)
    assert seen == [((2, 6, 4, 7, 8), 4, 5)]  # (n_layer, B prompts, n_head, P, head_dim): one copy of each prompt


def test_a_windowed_decode_copies_its_cache_even_when_asked_to_share():
    model = make_model(attention_window=3)
    prompts = torch.randint(0, 10, (6, 7))
    draw = lambda share: model.generate(prompts, 5, num_samples=4, generator=torch.Generator().manual_seed(1),
                                        temperature=1.0, with_stats=True, share_prompts=share)
    assert all(torch.equal(a, b) for a, b in zip(draw(False), draw(True)))


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
    # one prompt alone (an evaluation's last batch): its samples' cache rows are copies, not views of one row
    one = prompts[:1]
    assert torch.equal(draw(one, 4), draw(one.repeat_interleave(4, dim=0), 1))


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


def test_generate_without_position_ids_is_what_it_was_before_they_existed():
    # recorded with the code before `pos` existed (commit 32228e8), same weights, prompts and generator
    model = make_model()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    prompts = torch.randint(0, 10, (4, 8), generator=torch.Generator().manual_seed(1))
    out, logp, entropy = model.generate(prompts, 6, temperature=1.0, end_token=11, pad_token=12, num_samples=2,
                                        generator=torch.Generator().manual_seed(2), with_stats=True)
    assert out.tolist() == [[1, 13, 2, 10, 4, 6], [13, 12, 8, 3, 12, 8], [13, 6, 12, 8, 13, 6], [10, 13, 10, 5, 13, 2],
                            [10, 6, 12, 8, 8, 12], [10, 6, 8, 8, 8, 6], [8, 10, 12, 3, 3, 3], [9, 1, 8, 6, 2, 3]]
    assert round(float(logp.sum()), 4) == -83.9258 and round(float(entropy.sum()), 4) == 89.6866
    assert model.generate(prompts, 6, greedy=True).tolist() == [
        [8, 10, 13, 12, 8, 8], [1, 1, 12, 1, 12, 2], [10, 6, 12, 1, 13, 1], [2, 8, 12, 1, 10, 8]]
    # and the ids 0, 1, 2, ... given explicitly are the same computation, bit for bit
    arange = torch.arange(14).expand(4, 14)
    again = model.generate(prompts, 6, temperature=1.0, end_token=11, pad_token=12, num_samples=2,
                           generator=torch.Generator().manual_seed(2), with_stats=True, pos=arange)
    assert all(torch.equal(x, y) for x, y in zip((out, logp, entropy), again))
    with torch.no_grad():
        assert torch.equal(model(prompts), model(prompts, pos=arange[:, :8]))


def test_cached_decode_with_given_position_ids_equals_the_full_pass_at_every_step():
    model = make_model(n_position=8)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)
    prompts = torch.randint(0, 10, (16, 8))
    # ids repeated, out of order and differing per row (as coupled ids with an offset per problem are):
    # 13 tokens read only 8 embeddings
    pos = (torch.tensor([3, 2, 1, 0, 3, 2, 1, 0, 1, 2, 3, 4, 0]) + torch.randint(0, 4, (16, 1))) % 8
    tokens = model.generate(prompts, 5, greedy=True, pos=pos)
    assert torch.equal(tokens, model.generate(prompts, 5, greedy=True, pos=pos, use_cache=False))
    assert not torch.equal(tokens, model.generate(prompts, 5, greedy=True, pos=pos.roll(1, dims=1)))  # ids matter
    draw = lambda p, ids, k: model.generate(p, 5, temperature=1.0, num_samples=k, pos=ids,
                                            generator=torch.Generator().manual_seed(0))
    assert torch.equal(draw(prompts, pos, 3), draw(prompts.repeat_interleave(3, 0), pos.repeat_interleave(3, 0), 1))
    tokens = tokens.clone()
    model.double()  # so that 1e-5 measures the cache's bookkeeping, not float32 rounding of logits near 15
    with torch.no_grad():
        full = model(torch.cat([prompts, tokens], dim=1), pos=pos)
        cache = KVCache(model.config, 16, 13, prompts.device, torch.float64)
        steps = [model(prompts, cache, pos[:, :8])[:, -1]]
        for t in range(4):
            steps.append(model(tokens[:, t:t + 1], cache, pos[:, 8 + t:9 + t])[:, -1])
    assert (torch.stack(steps, 1) - full[:, 7:12]).abs().max() < 1e-5
    assert len(set(tokens.flatten().tolist())) > 3  # the check compares real choices


def test_position_ids_outside_the_table_or_of_the_wrong_shape_are_refused():
    model = make_model()
    idx = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"position ids 0..16 outside the 16 embeddings \(n_position=16\)"):
        model(idx, pos=torch.tensor([[0, 1, 2, 16], [0, 0, 0, 0]]))
    with pytest.raises(ValueError, match=r"position ids of shape \(2, 3\) for tokens of shape \(2, 4\)"):
        model(idx, pos=torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"generate takes the position ids of prompt and answer, \(2, 7\), got \(2, 4\)"):
        model.generate(idx, 3, greedy=True, pos=torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="position ids 0..20 outside"):  # an answer's id, checked before decoding
        model.generate(idx, 3, greedy=True, pos=torch.tensor([[0, 1, 2, 3, 4, 5, 20]] * 2))


def test_logn_scale_by_hand():
    """max(1, ln(t + 1) / ln(base)) at sequence indices t = start .. start + T - 1."""
    like = torch.zeros(1)
    assert logn_scale(0, 4, 2, like).flatten().tolist() == pytest.approx([1.0, 1.0, 1.5849625, 2.0])
    assert logn_scale(3, 2, 2, like).flatten().tolist() == pytest.approx([2.0, 2.3219281])
    assert logn_scale(0, 9, 9, like).flatten().tolist() == [1.0] * 9  # up to base tokens, nothing changes
    assert logn_scale(0, 3, 2, like).shape == (1, 1, 3, 1)
    with pytest.raises(ValueError, match="logn_attention must be 0 \\(off\\) or a sequence length of 2 or more, got 1"):
        GPTConfig(vocab_size=14, logn_attention=1)


def test_logn_attention_leaves_the_first_base_tokens_alone_and_its_cached_decode_equals_the_full_pass():
    """Up to L tokens the logits equal the plain model's exactly; past L they differ, and a KV-cached decode, whose
    queries arrive one at a time at sequence index cache.pos, gives the full pass's logits at every step."""
    plain, scaled = make_model(n_position=16), make_model(n_position=16, logn_attention=6)
    scaled.load_state_dict(plain.state_dict())
    for m in (plain, scaled):
        with torch.no_grad():
            for p in m.parameters():
                p.mul_(4.0)  # sharp enough logits that the scaling changes them visibly
    idx = torch.randint(0, 10, (8, 12))
    with torch.no_grad():
        a, b = plain(idx), scaled(idx)
    assert torch.equal(a[:, :6], b[:, :6]) and (a[:, 6:] - b[:, 6:]).abs().max() > 1e-3
    prompts = idx[:, :4]
    tokens = scaled.generate(prompts, 8, greedy=True)
    assert torch.equal(tokens, scaled.generate(prompts, 8, greedy=True, use_cache=False))
    scaled.double()
    with torch.no_grad():
        full = scaled(torch.cat([prompts, tokens], dim=1))
        cache = KVCache(scaled.config, 8, 12, prompts.device, torch.float64)
        steps = [scaled(prompts, cache)[:, -1]]
        for t in range(7):
            steps.append(scaled(tokens[:, t:t + 1], cache)[:, -1])
    assert (torch.stack(steps, 1) - full[:, 3:11]).abs().max() < 1e-5


def test_window_mask_by_hand():
    """Query i reads key j iff j <= i and (|id_i - id_j| <= window or j is a global token); with a cache, the ids
    and global flags it holds are the keys'."""
    ids = torch.tensor([[4, 3, 2, 1, 4, 3, 2, 1, 2]])  # 432+432=: the coupled ids of a 3-digit sum's prompt
    glob = torch.tensor([[False, False, False, True, False, False, False, True, False]])  # "+" and "="
    none = torch.zeros_like(glob)
    m = window_mask(ids, none, None, 1)[0, 0]
    assert m.shape == (9, 9)
    assert m[8].tolist() == [False, True, True, True, False, True, True, True, True]  # id 2 reads ids 1-3
    assert m[4].tolist() == [True, True, False, False, True] + [False] * 4  # id 4: itself and the id-3, -4 before it
    assert m[0].tolist() == [True] + [False] * 8
    g = window_mask(ids, glob, None, 1)[0, 0]
    assert g[4].tolist() == [True, True, False, True, True] + [False] * 4  # "+" (id 1) read from id 4 too
    assert g[2].tolist() == [False, True, True] + [False] * 6  # a global token after the query stays unread
    assert torch.equal(window_mask(ids, none, None, 10)[0, 0], torch.ones(9, 9, dtype=torch.bool).tril())
    cache = KVCache(GPTConfig(vocab_size=14, attention_window=1), 1, 10, "cpu", torch.float32)
    window_mask(ids, glob, cache, 1)
    cache.pos = 9
    step = window_mask(torch.tensor([[4]]), torch.tensor([[False]]), cache, 1)  # the next token, id 4, reads ids 3-5
    assert step.shape == (1, 1, 1, 10)
    assert step[0, 0, 0].tolist() == [True, True, False, True, True, True, False, True, False, True]
    with pytest.raises(ValueError, match="attention_window must be 0 \\(off\\) or a number of position ids of 1 or "
                                         "more, got -1"):
        GPTConfig(vocab_size=14, attention_window=-1)
    with pytest.raises(ValueError, match="global_tokens \\[3, 14\\] outside the vocabulary 0..13"):
        GPTConfig(vocab_size=14, attention_window=1, global_tokens=(3, 14))
    # with attention_globals a run's window keeps every non-digit token of its task visible (the adder's "+", "=",
    # end and pad: 10-13);
    # without a window, model_args are those of every file made before the setting
    settings = ModelSettings(attention_window=8, attention_globals=True, vocab_size=14)
    assert settings.model_args()["global_tokens"] == [10, 11, 12, 13]
    assert "global_tokens" not in ModelSettings(attention_window=8, vocab_size=14).model_args()
    with pytest.raises(ValueError, match="^attention_globals keeps tokens visible through a window; set "
                                         "attention_window too$"):
        ModelSettings(attention_globals=True).check_model(14)
    assert ModelSettings(vocab_size=14).model_args() == {"vocab_size": 14, "n_position": 64, "n_layer": 4, "n_head": 8,
                                                         "n_embed": 256, "dropout": 0.0, "bias": False,
                                                         "tie_weights": True}


def test_a_windowed_layer_reads_only_the_tokens_in_its_window():
    """One layer: the windowed model's logits at token i are the plain model's at the end of the sequence made of
    the tokens i may read (ids near its own or a global token, not after it), with their ids. A window wider than
    every id gap is the plain model (up to the kernels' rounding)."""
    plain = make_model(n_layer=1, n_position=16)
    windowed = make_model(n_layer=1, n_position=16, attention_window=2, global_tokens=(10, 11))
    windowed.load_state_dict(plain.state_dict())
    with torch.no_grad():
        for m in (plain, windowed):
            for p in m.parameters():
                p.mul_(4.0)
    idx = torch.randint(0, 10, (3, 11))
    idx[0, 5], idx[2, 0], idx[2, 6] = 10, 11, 10
    pos = torch.tensor([[6, 5, 4, 3, 2, 1, 6, 5, 4, 3, 2]] * 3)
    pos[1] = torch.arange(11)  # plain sequence indices: a sliding window
    with torch.no_grad():
        out = windowed(idx, pos=pos)
        for r in range(3):
            for i in range(11):
                keep = [j for j in range(i + 1) if abs(int(pos[r, j]) - int(pos[r, i])) <= 2 or int(idx[r, j]) >= 10]
                if r == 1 and i >= 3:
                    assert keep == list(range(i - 2, i + 1))
                if r == 0 and i == 9:
                    assert keep == [1, 2, 3, 4, 5, 7, 8, 9]  # id 3 reads ids 1-5, and the global token at 5
                ref = plain(idx[r:r + 1, keep], pos=pos[r:r + 1, keep])[0, -1]
                assert (out[r, i] - ref).abs().max() < 1e-5
        assert (out - plain(idx, pos=pos)).abs().max() > 1e-2  # the window changes what is read
        wide = make_model(n_layer=1, n_position=16, attention_window=16)
        wide.load_state_dict(plain.state_dict())
        assert (wide(idx, pos=pos) - plain(idx, pos=pos)).abs().max() < 1e-5


def test_windowed_cached_decode_equals_the_full_pass_and_matmul_attention():
    """Each decoded token's mask reads the ids and global flags the cache keeps, prompt and earlier answers, also
    for samples copied from one prompt; the plain-matmul attention gives the same numbers under a mask."""
    model = make_model(n_position=16, attention_window=1, global_tokens=(10,))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    prompts = torch.randint(0, 10, (8, 5))
    prompts[:, 2] = 10
    pos = torch.tensor([[5, 4, 3, 2, 1, 2, 3, 4, 5, 6]] * 8)
    tokens = model.generate(prompts, 5, greedy=True, pos=pos)
    assert torch.equal(tokens, model.generate(prompts, 5, greedy=True, pos=pos, use_cache=False))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    sampled = model.generate(prompts[:2], 5, num_samples=4, generator=g1, pos=pos[:2])
    assert torch.equal(sampled, model.generate(prompts[:2], 5, num_samples=4, generator=g2, pos=pos[:2],
                                               use_cache=False))
    model.double()
    with torch.no_grad():
        full = model(torch.cat([prompts, tokens], dim=1), pos=pos)
        cache = KVCache(model.config, 8, 10, prompts.device, torch.float64)
        steps = [model(prompts, cache, pos[:, :5])[:, -1]]
        for t in range(4):
            steps.append(model(tokens[:, t:t + 1], cache, pos[:, 5 + t:6 + t])[:, -1])
        assert (torch.stack(steps, 1) - full[:, 4:9]).abs().max() < 1e-5
        q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64) for _ in range(3))
        mask = window_mask(torch.tensor([[3, 2, 1, 2, 3, 4]] * 2), torch.zeros(2, 6, dtype=torch.bool), None, 1)
        sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert (matmul_attention(q, k, v, is_causal=False, mask=mask) - sdpa).abs().max() < 1e-12


def test_qk_init_scale_multiplies_the_query_and_key_rows_and_leaves_every_other_weight():
    base, scaled = make_model(), make_model(qk_init_scale=4.0)
    C = base.config.n_embed
    scaled_params = dict(scaled.named_parameters())
    checked = 0
    for name, p in base.named_parameters():
        q = scaled_params[name]
        if name.endswith("attn.c_attn.weight"):  # rows: q, k, v
            assert torch.equal(q[:2 * C], 4.0 * p[:2 * C]) and torch.equal(q[2 * C:], p[2 * C:]), name
            checked += 1
        else:
            assert torch.equal(q, p), name
    assert checked == base.config.n_layer
    assert torch.equal(make_model(qk_init_scale=1.0).blocks[0].attn.c_attn.weight, base.blocks[0].attn.c_attn.weight)
    with pytest.raises(ValueError, match="^qk_init_scale must be positive, got 0.0$"):
        make_model(qk_init_scale=0.0)


def test_qk_init_scale_enters_model_args_and_the_warm_start_fingerprint_only_when_set():
    default, scaled = make_config(), make_config(qk_init_scale=4.0)
    assert "qk_init_scale" not in default.model_args()  # the files and warm-start caches made before it stay valid
    assert fingerprint(scaled, 1) == {**fingerprint(default, 1), "qk_init_scale": 4.0}
    # the run builds it so: q and k rows 4 times those of the same seed's default model, v rows the same
    on, off = (make_trainer(**kw).model.blocks[0].attn.c_attn.weight for kw in ({"qk_init_scale": 4.0}, {}))
    C = default.n_embed
    assert torch.equal(on[:2 * C], 4.0 * off[:2 * C]) and torch.equal(on[2 * C:], off[2 * C:])
    with pytest.raises(ConfigError, match="^qk_init_scale must be positive, got -1.0$"):
        make_config(qk_init_scale=-1.0)


def test_the_optimizer_steps_as_torchs_adamw_bit_for_bit():
    """configure_optimizer's AdamW (torch's methods without their torch._dynamo wrappers) against torch.optim.AdamW
    on the same groups: the same weights and state after three steps, and a copy loaded from its state_dict takes
    the same fourth step. Unfused too, where its step writes each weight in place with autograd's ops: that runs only
    without autograd, as torch's wrapper runs it."""
    torch.manual_seed(0)
    ours = GPT(GPTConfig(vocab_size=14, n_position=16, n_layer=1, n_embed=32, n_head=2))
    theirs, loaded, initial = copy.deepcopy(ours), copy.deepcopy(ours), copy.deepcopy(ours)
    adamw = lambda m: m.configure_optimizer(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.99))
    torch_adamw = lambda m: torch.optim.AdamW(
        [{"params": [p for p in m.parameters() if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in m.parameters() if p.dim() < 2], "weight_decay": 0.0}],
        lr=1e-2, betas=(0.9, 0.99), fused=True)
    idx, targets = torch.randint(0, 14, (4, 8)), torch.randint(0, 14, (4, 8))

    def step(model, optimizer):
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(idx).flatten(0, 1), targets.flatten()).backward()
        optimizer.step()

    pairs = [(ours, adamw(ours)), (theirs, torch_adamw(theirs))]
    for _ in range(3):
        for model, optimizer in pairs:
            step(model, optimizer)
    assert type(pairs[0][1]) is not torch.optim.AdamW
    state, torch_state = pairs[0][1].state_dict(), pairs[1][1].state_dict()
    assert state["param_groups"] == torch_state["param_groups"]
    for i, moments in torch_state["state"].items():
        assert all(torch.equal(state["state"][i][k], v) for k, v in moments.items())
    loaded.load_state_dict(ours.state_dict())
    pairs.append((loaded, adamw(loaded)))
    pairs[2][1].load_state_dict(copy.deepcopy(state))  # (a loaded state shares tensors with the one saved)
    for model, optimizer in pairs:
        step(model, optimizer)
    for a, b, c in zip(ours.parameters(), theirs.parameters(), loaded.parameters()):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert not any(torch.equal(a, b) for a, b in zip(ours.parameters(), initial.parameters()))
    unfused = [copy.deepcopy(initial) for _ in range(2)]
    for model, make in zip(unfused, (AdamW, torch.optim.AdamW)):
        step(model, make(model.parameters(), lr=1e-2, fused=False, foreach=False))
    assert all(torch.equal(a, b) for a, b in zip(*(m.parameters() for m in unfused)))


# ---- the grouped pass (PromptGroups): each shared prompt read once ------------------------------------------------
def grouped_case(seed=0, P=5, A=4):
    """Rows 0-1 share prompt a, rows 2-4 prompt b, row 5 prompt c, row 6 prompt a again (out of order, as rows of a
    shuffled minibatch are): the sequences, their groups and the prompt length."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(0, 14, (3, P), generator=g)
    inverse = torch.tensor([0, 0, 1, 1, 1, 2, 0])
    seq = torch.cat([prompts[inverse], torch.randint(0, 14, (len(inverse), A), generator=g)], dim=1)
    return seq, PromptGroups(P, torch.tensor([0, 2, 5]), inverse), P


@pytest.mark.parametrize("kw", [dict(), dict(logn_attention=3), dict(attention_window=2),
                                dict(attention_window=1, global_tokens=(10, 11))])
@pytest.mark.parametrize("matmul", [False, True])
@pytest.mark.parametrize("with_pos", [False, True])
def test_a_grouped_pass_gives_the_full_pass_logits_from_the_prompts_last_token_on(kw, matmul, with_pos):
    model = make_model(**kw, n_position=32)
    model.configure_runtime(matmul_attention=matmul)
    seq, groups, P = grouped_case()
    # ids a task chooses: the same for the rows of a prompt, as rl/rollout.py repeats them (repeated ids included)
    pos = torch.randint(0, 32, (3, seq.shape[1]), generator=torch.Generator().manual_seed(1))[groups.inverse]
    pos = pos if with_pos else None
    full = model(seq, pos=pos)[:, P - 1:]
    grouped = model(seq, pos=pos, groups=groups)
    assert grouped.shape == (7, seq.shape[1] - P + 1, 14)
    torch.testing.assert_close(grouped, full, rtol=1e-5, atol=1e-5)
    # rows grouped under another row's prompt get that prompt's logits, not their own: the groups are read
    wrong = model(seq, pos=pos, groups=PromptGroups(P, groups.first, groups.inverse.roll(1)))
    assert (wrong - full).abs().max() > 1e-2


def test_a_grouped_pass_takes_the_full_pass_gradient():
    model = make_model()
    seq, groups, P = grouped_case()
    weights = torch.randn(7, seq.shape[1] - P + 1, 14, generator=torch.Generator().manual_seed(2))
    grads = []
    for kwargs in (dict(), dict(groups=groups)):
        model.zero_grad(set_to_none=True)
        logits = model(seq, **kwargs)
        ((logits[:, P - 1:] if not kwargs else logits) * weights).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for full, grouped in zip(*grads):
        torch.testing.assert_close(grouped, full, rtol=1e-4, atol=1e-5 * full.abs().max().item())
    assert all(g.abs().sum() > 0 for g in grads[1])  # every weight took a gradient: the comparison is real



def test_a_grouped_hidden_and_a_grouped_critic_give_the_full_pass_from_the_prompts_last_token_on():
    """hidden(groups=...) is the grouped pass without the token head (a critic's trunk has none): the full pass's
    hidden states and the critic's values from position P - 1 on, and the value head's gradient."""
    from model.gpt import Critic
    model = make_model(logn_attention=3)
    seq, groups, P = grouped_case()
    torch.testing.assert_close(model.hidden(seq, groups=groups), model.hidden(seq)[:, P - 1:], rtol=1e-5, atol=1e-5)
    critic = Critic.from_policy(model)
    torch.nn.init.normal_(critic.value_head.weight, generator=torch.Generator().manual_seed(3))
    grads = []
    for kwargs in (dict(), dict(groups=groups)):
        critic.zero_grad(set_to_none=True)
        values = critic(seq, **kwargs)
        values = values if kwargs else values[:, P - 1:]
        assert values.shape == (7, seq.shape[1] - P + 1)
        values.square().sum().backward()
        grads.append((values.detach(), [p.grad.clone() for p in critic.parameters()]))
    torch.testing.assert_close(grads[1][0], grads[0][0], rtol=1e-5, atol=1e-5)
    assert grads[0][0].abs().max() > 1e-2  # (values that are not all 0)
    for full, grouped in zip(grads[0][1], grads[1][1]):
        torch.testing.assert_close(grouped, full, rtol=1e-4, atol=1e-5 * full.abs().max().item())
    wrong = critic(seq, groups=PromptGroups(P, groups.first, groups.inverse.roll(1)))
    assert (wrong - grads[0][0]).abs().max() > 1e-3

def test_a_grouped_pass_refuses_dropout_and_a_prompt_that_is_not_inside_the_row():
    model = make_model(dropout=0.1).train()
    seq, groups, P = grouped_case()
    with pytest.raises(ValueError, match=r"^a grouped pass has no dropout: rows sharing a prompt would share its "
                                         r"dropout mask; call model.eval\(\) first$"):
        model(seq, groups=groups)
    model.eval()
    for length in (0, seq.shape[1]):
        with pytest.raises(ValueError, match=rf"^a grouped pass needs a prompt of 1 to 8 tokens, got {length}$"):
            model(seq, groups=PromptGroups(length, groups.first, groups.inverse))
