"""How the model runs on a device (issue 33): the sampling draw without host syncs, an RL step's few reads of the
device, precision, CUDA-graph decoding, the stage clocks and RL's early stop on a validation target. The CUDA tests
skip without CUDA.
Run: python -m pytest tests/test_precision.py"""

import json
import math

import pytest
import torch

from helpers import TINY_ARGS, DeviceReads, make_trainer, run, run_main
from model.gpt import GPT, GPTConfig, attention, autocast_dtype_for, draw, matmul_attention, repeat_rows
from torch.nn import functional as F
from rl.algorithms import answer_mask, policy_logprobs
from rl import rl_ddp
from rl.dist import DistInfo, reduce_sums
from rl.evaluate import evaluate
from rl.run_dir import read_metrics
from rl.tools.results import gpu

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


# ---- the CPU path: the same tokens as before, without the host syncs ---------------------------
@pytest.mark.parametrize("top_k", [None, 3])
def test_draw_gives_torch_multinomials_tokens_from_the_same_generator_state(top_k):
    # draw writes out torch.multinomial's path for one draw; both read the same stream
    logits = torch.randn(257, 14) * 3
    ours, _ = draw(logits, top_k, torch.Generator().manual_seed(5))
    masked = logits if top_k is None else logits.masked_fill(logits < torch.topk(logits, top_k).values[:, [-1]],
                                                             float("-inf"))
    theirs = torch.multinomial(masked.softmax(-1), 1, generator=torch.Generator().manual_seed(5)).squeeze(1)
    assert torch.equal(ours, theirs) and ours.unique().numel() > 3  # (and really random: several tokens drawn)


def test_repeat_rows_is_repeat_interleave():
    t = torch.arange(2 * 3 * 4).view(2, 3, 4)
    for dim in range(3):
        assert torch.equal(repeat_rows(t, 3, dim), t.repeat_interleave(3, dim=dim))
    assert repeat_rows(t, 1) is t


def test_precision_names():
    assert autocast_dtype_for("auto", "cpu") is None and autocast_dtype_for("fp32", "cpu") is None
    assert autocast_dtype_for("bf16", "cpu") is torch.bfloat16 and autocast_dtype_for("auto", "cuda") is torch.bfloat16
    with pytest.raises(ValueError, match="^unknown precision 'fp16'; known: auto, fp32, bf16$"):
        autocast_dtype_for("fp16", "cpu")


@pytest.mark.parametrize("args, message", [
    (["--precision=fp16"], "error: unknown precision 'fp16'; known: auto, fp32, bf16"),
    (["--rl_target_accuracy=1.5"], "error: rl_target_accuracy must be in [0, 1], got 1.5"),
    (["--rl_target_evals=3"], "error: rl_target_evals=3 has no effect here: it needs rl_target_accuracy > 0; "
                              "set that, or leave rl_target_evals unset"),
])
def test_bad_settings_are_one_line(tmp_path, args, message):
    proc = run_main(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", f"--out_dir={tmp_path}", *args],
                    check=False)
    assert proc.returncode == 2 and proc.stderr.strip() == message


def on_policy_ratio(trainer) -> float:
    """train/ratio_mean of one PPO step whose learning rate is too small to move the policy: every
    minibatch is then on-policy, and its ratio is the learner's log-probs against the sampler's."""
    return trainer.train_step()["train/ratio_mean"]


def test_bf16_autocast_on_the_cpu_keeps_the_on_policy_ratio_at_one():
    trainer = make_trainer(rl_algorithm="ppo", learning_rate=1e-30, precision="bf16", rl_batch_size=16)
    assert trainer.model.autocast_dtype is torch.bfloat16
    assert abs(on_policy_ratio(trainer) - 1) < 1e-3


def test_stage_shares_add_up_to_one():
    trainer = make_trainer()
    for _ in range(2):
        m = trainer.train_step()
        shares = [m[f"perf/{k}_share"] for k in ("rollout", "reward", "update", "other")]
        assert all(0 <= s <= 1 for s in shares) and math.isclose(sum(shares), 1.0, abs_tol=1e-9)
        assert shares[0] > 0 and shares[2] > 0  # sampling and the update take real time


# ---- an RL step reads the device a few times, not once a number (on CUDA each read is a host sync) --------
def test_device_reads_counts_the_reads_of_what_the_device_computed():
    model = torch.nn.Linear(3, 2)
    with DeviceReads(model) as reads:
        y = model(torch.randn(4, 3)).detach()
        y.sum().item(), float(y[0, 0]), bool(y[0, 0] > 0), y.tolist(), y[y > 0]  # five reads
        y.cpu().tolist()  # one: the copy is the host's
        host = torch.arange(4)
        host.sum().item(), host.tolist(), host[host > 1]  # none: made on the host
        host.to("cpu").tolist()  # one: moved to the device first
    assert sum(reads.sites.values()) == 7, dict(reads.sites)


def test_reduce_sums_reads_the_device_once_and_gives_each_numbers_float():
    with DeviceReads() as reads:
        values = {"a": torch.tensor(0.1).to("cpu"), "n": 3, "b": torch.tensor([5]).to("cpu"), "x": 2.5,
                  "c": torch.tensor(True).to("cpu")}
        sums = reduce_sums(values, torch.device("cpu"))
    assert sums == {k: float(v) for k, v in values.items()} and list(sums) == list(values)
    assert sum(reads.sites.values()) == 1, dict(reads.sites)


@pytest.mark.parametrize("overrides, once_a_step", [
    (dict(), 2),  # the adder: problem replay, and dynamic sampling's refill round
    (dict(config_name="MultiplierRLConfig"), 2),
    (dict(prefix_sharing=True), 2),  # its prompt groups are made on the host, from the rows' indices
    (dict(rl_algorithm="reinforce"), 2),  # the baseline from the step before: known on the host
    (dict(rl_algorithm="reinforce", advantage_mode="batch_zscore"), 3),  # and the batch's statistics, all ranks'
    (dict(rl_algorithm="ppo_critic"), 2),  # GAE's whitening over all ranks: summed on the device, nothing read
    (dict(rl_algorithm="dpo"), 3),  # and the rewards, which pair answers on the host
])
def test_an_rl_step_reads_the_device_once_a_round_and_a_few_times_a_step(overrides, once_a_step):
    # Each sampling round reads its groups' outcomes once (the problem sampler's, dynamic sampling's), and the step
    # twice: the update's normalisers (the minibatches' shapes) and, for logging, once: the metrics with the reward
    # statistics (the baseline follows them after the read) and the update's statistics (the numerical guard's
    # skips among them: it decides on the device); an optimizer step reads nothing. (The adder's step read 64
    # times.)
    trainer = make_trainer(**overrides)
    trainer.train_step()  # the first step makes the critic and the reference, and sets the baseline
    modules = [trainer.model, *(learner.module for learner in trainer.learners)]
    with DeviceReads(*modules, *([trainer.ref_model] if trainer.ref_model is not None else [])) as reads:
        m = trainer.train_step()
    c = trainer.config
    assert m["train/batch_answers"] > 0 and m["train/skipped_steps"] == 0  # (it trained: every optimizer step ran)
    assert c.ppo_epochs * c.ppo_minibatches > 1 or overrides  # (the adder, the multiplier: two optimizer steps)
    assert sum(reads.sites.values()) == m["train/sampling_rounds"] + once_a_step, dict(reads.sites)


def test_the_baselines_first_step_reads_the_reward_statistics_before_the_update_and_later_steps_do_not():
    # the first step's advantages are centred on its own mean reward, over all ranks: read before the update; from
    # then on the baseline is the step before's, a float on the host, and the mean reward is read with the metrics
    trainer = make_trainer(rl_algorithm="reinforce")
    counts, metrics = [], []
    for step in range(2):
        with DeviceReads(trainer.model) as reads:
            metrics.append(trainer.train_step())
        counts.append(sum(reads.sites.values()) - metrics[-1]["train/sampling_rounds"])
    assert counts == [3, 2], counts
    assert metrics[0]["train/advantage_baseline"] == metrics[0]["train/avg_reward"]  # the first step's own mean
    assert metrics[1]["train/advantage_baseline"] == metrics[0]["train/baseline"]
    m = trainer.config.baseline_momentum
    assert metrics[1]["train/baseline"] == m * metrics[0]["train/baseline"] + (1 - m) * metrics[1]["train/avg_reward"]


def test_a_loss_whose_total_is_a_float_takes_the_same_step():
    # the loss's "total" (the guard's) may be a detached tensor, read with the gradient norms, or a float already read
    trainers = [make_trainer() for _ in range(2)]
    loss = trainers[1].objective.loss
    trainers[1].objective.loss = lambda *a: {**(out := loss(*a)), "total": float(out["total"])}
    metrics = [t.train_step() for t in trainers]
    assert metrics[0]["train/policy_loss"] == metrics[1]["train/policy_loss"] != 0
    assert all(torch.equal(p, q) for p, q in zip(trainers[0].model.parameters(), trainers[1].model.parameters()))


def test_a_warm_start_step_reads_nothing_from_the_device():
    # its loss is read only at a validation check, whose evaluation reads anyway
    from rl import warm_start
    trainer = make_trainer(init_from="sft")
    optimizer = trainer.model.configure_optimizer(lr=1e-3, weight_decay=0.01, betas=(0.9, 0.99))
    with DeviceReads(trainer.model) as reads:
        for step in range(2):
            loss = warm_start.supervised_step(trainer.model, trainer.env, optimizer, trainer.config, trainer.info, step)
    assert sum(reads.sites.values()) == 0 and reads.marked(loss), dict(reads.sites)


def test_an_evaluation_reads_the_device_once_a_batch():
    trainer = make_trainer()
    a, b = trainer.env.eval_operands(200, "validation")
    with DeviceReads(trainer.model) as reads:
        result = evaluate(trainer.model, trainer.env, a, b, trainer.info, batch_size=64, split="validation")
    assert result.num_problems == 200 and sum(reads.sites.values()) == 4, dict(reads.sites)  # 4 batches


def test_no_gpu_fields_without_cuda():
    assert gpu() == {} if not torch.cuda.is_available() else gpu()["gpu"]


# ---- RL stops once validation holds its target ------------------------------------------------
def test_rl_stops_when_validation_holds_the_target_and_a_resume_stays_stopped(tmp_path, monkeypatch, capsys):
    # validation scripted by step (the real evaluation runs; its validation number is replaced): the rule alone decides
    scripted = {1: 0.3, 2: 0.6, 3: 0.4, 4: 0.7, 5: 0.8, 6: 0.9, 7: 0.9}
    real = rl_ddp.evaluate_and_report

    def evaluate_and_report(trainer, metrics_, prefix):
        result = real(trainer, metrics_, prefix)
        metrics_["val/accuracy"] = scripted.get(trainer.step, 0.0)
        return result
    monkeypatch.setattr(rl_ddp, "evaluate_and_report", evaluate_and_report)
    args = ["--config_name", "AdderRLConfig", "--no_wandb", f"--out_dir={tmp_path}", *TINY_ARGS, "--rl_train_steps=40",
            "--eval_interval=1", "--save_interval=100", "--rl_target_accuracy=0.5", "--rl_target_evals=2"]
    assert rl_ddp.main(args) == 0
    # 0.6 then 0.4 starts the count over; 0.7, 0.8 hold it: RL stops after step 5, its snapshot and summary written
    assert "RL stops at step 5/40: validation accuracy has held rl_target_accuracy=0.5 at 2 evaluation(s) in a row" \
        in capsys.readouterr().out
    assert [r["step"] for r in read_metrics(str(tmp_path))] == [0, 1, 2, 3, 4, 5]
    assert json.loads((tmp_path / "summary.json").read_text())["rl_steps_run"] == 5
    assert rl_ddp.main(args) == 0  # the same command again: the run is finished, not continued
    assert "Resumed from" in capsys.readouterr().out and len(read_metrics(str(tmp_path))) == 6


# ---- CUDA: graphs and autocast ----------------------------------------------------------------
def cuda_model(tie_weights=True, **runtime):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=14, n_position=16, n_layer=2, n_head=4, n_embed=64, tie_weights=tie_weights)
    model = GPT(config).cuda().eval()
    model.configure_runtime(**runtime)
    return model


@cuda
@pytest.mark.parametrize("autocast_dtype", [None, torch.bfloat16])
@pytest.mark.parametrize("share_prompts", [False, True])
def test_graph_decoding_gives_the_eager_tokens_from_the_same_generator_state(autocast_dtype, share_prompts):
    prompts = torch.randint(0, 12, (64, 8), device="cuda")
    runs = {}
    for graphs in (False, True):
        model = cuda_model(autocast_dtype=autocast_dtype, cuda_graphs=graphs)
        gen = torch.Generator("cuda").manual_seed(3)
        runs[graphs] = [model.generate(prompts, 6, num_samples=4, generator=gen, end_token=12, pad_token=13,
                                       with_stats=True, share_prompts=share_prompts)
                        for _ in range(3)]  # the 2nd and 3rd replay the graph
        runs[graphs].append(gen.get_state())  # the stream moved on by as much
        assert len(model._graphs) == (1 if graphs else 0)
    for eager, graphed in zip(runs[False][:3], runs[True][:3]):
        assert all(torch.equal(a, b) for a, b in zip(eager, graphed))
    assert torch.equal(runs[False][3], runs[True][3])
    assert not torch.equal(runs[True][0][0], runs[True][1][0])  # each call draws afresh


@cuda
def test_graph_greedy_decoding_of_a_batch_padded_to_a_power_of_two():
    prompts = torch.randint(0, 12, (300, 8), device="cuda")  # padded to 512 inside
    eager = cuda_model().generate(prompts, 6, greedy=True, end_token=12, pad_token=13)
    graphed = cuda_model(cuda_graphs=True).generate(prompts, 6, greedy=True, end_token=12, pad_token=13)
    assert graphed.shape == (300, 6) and torch.equal(eager, graphed)


@cuda
def test_graph_reads_the_weights_as_they_are_now():
    # untied: a small random GPT with tied weights greedily repeats its last token, whatever the embedding
    model = cuda_model(tie_weights=False, cuda_graphs=True)
    prompts = torch.randint(0, 12, (8, 8), device="cuda")
    before = model.generate(prompts, 6, greedy=True)
    with torch.no_grad():  # in place, as the optimizer updates: the graph must see it
        model.lm_head.weight.copy_(torch.randn_like(model.lm_head.weight))
    after = model.generate(prompts, 6, greedy=True)
    model.configure_runtime()
    assert torch.equal(after, model.generate(prompts, 6, greedy=True)) and not torch.equal(before, after)


@cuda
def test_attention_of_more_rows_than_one_cuda_call_takes():
    q, k, v = (torch.randn(40000, 2, 3, 8, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    whole = attention(q, k, v, is_causal=True)  # two calls of at most MAX_ATTENTION_BATCH rows
    assert torch.equal(whole[:100], F.scaled_dot_product_attention(q[:100], k[:100], v[:100], is_causal=True))


@cuda
def test_bf16_log_probs_are_close_to_fp32s():
    model = cuda_model()
    seq = torch.randint(0, 12, (256, 14), device="cuda")
    fp32 = policy_logprobs(model, seq, seq[:, 8:], 8, 1.0)
    model.configure_runtime(autocast_dtype=torch.bfloat16)
    bf16 = policy_logprobs(model, seq, seq[:, 8:], 8, 1.0)
    # bf16 keeps 8 bits of mantissa: logits of a small random model agree to about 1e-2
    assert (bf16 - fp32).abs().max() < 0.05 and (bf16 - fp32).abs().mean() < 0.01


@cuda
@pytest.mark.parametrize("graphs", [False, True])
def test_on_policy_ratio_is_one_under_bf16_on_cuda(graphs):
    info = DistInfo(device=torch.device("cuda", 0))
    trainer = make_trainer(rl_algorithm="ppo", learning_rate=1e-30, precision="bf16", cuda_graphs=graphs,
                           device="cuda", info=info)
    assert abs(on_policy_ratio(trainer) - 1) < 1e-3


# ---- attention in plain matmuls (not yet the default anywhere: measured on a GPU first) ---------
@pytest.mark.parametrize("is_causal, Tq", [(True, 7), (False, 1), (False, 7)])
def test_matmul_attention_is_sdpas_attention(is_causal, Tq):
    q, k, v = torch.randn(5, 2, Tq, 8), torch.randn(5, 2, 7, 8), torch.randn(5, 2, 7, 8)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert torch.allclose(matmul_attention(q, k, v, is_causal=is_causal), expected, atol=1e-6)


def test_a_model_with_matmul_attention_computes_the_same_logits():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=14, n_position=16, n_layer=2, n_head=4, n_embed=64)).eval()
    idx = torch.randint(0, 14, (6, 12))
    sdpa = model(idx)
    model.configure_runtime(matmul_attention=True)
    assert all(b.attn.matmul_attention for b in model.blocks)
    assert torch.allclose(model(idx), sdpa, atol=1e-5)
    # and decoding through the KV cache (one query against the cache) agrees too
    greedy = lambda: model.generate(idx[:, :8], 4, greedy=True)
    matmul = greedy()
    model.configure_runtime()
    assert torch.equal(matmul, greedy())


def test_the_matmul_attention_setting_reaches_every_block_and_keeps_the_cpu_curve():
    """--matmul_attention=true runs the policy's attention in matmuls; on the CPU the first step's loss is SDPA's
    to float rounding (the setting is opt-in, so the presets' curves are untouched)."""
    on, off = make_trainer(matmul_attention=True), make_trainer()
    assert all(b.attn.matmul_attention for b in on.model.blocks)
    assert not any(b.attn.matmul_attention for b in off.model.blocks)
    assert on.train_step()["train/policy_loss"] == pytest.approx(off.train_step()["train/policy_loss"], abs=1e-5)


@cuda
def test_matmul_attention_graphs_give_the_eager_tokens():
    prompts = torch.randint(0, 12, (64, 8), device="cuda")
    runs = []
    for graphs in (False, True):
        model = cuda_model(autocast_dtype=torch.bfloat16, cuda_graphs=graphs, matmul_attention=True)
        runs.append(model.generate(prompts, 6, num_samples=4, generator=torch.Generator("cuda").manual_seed(3)))
    assert torch.equal(*runs)


# ---- torch.compile (--compile=true) ------------------------------------------------------------------
# On the CPU these tests trace with torch.compile's aot_eager backend: dynamo's graphs, its guards and recompiles,
# and AOT autograd's joint forward and backward with the in-place writes functionalized, what this code can get
# wrong, run by eager kernels. Inductor's C++ kernels for them took 30-50 s each to build on 2 CPU cores from a
# cold cache (a fresh machine's), most of the suite's margin; the CUDA tests below run inductor's own kernels.
@pytest.fixture
def aot_eager(monkeypatch):
    import functools
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))


def test_a_compiled_model_gives_eager_logits_and_gradients_for_any_batch_in_one_graph(aot_eager):
    """compile=True sends every full pass through one torch.compile graph with dynamic shapes: the logits and
    gradients are eager's to float rounding, a second batch size compiles nothing new, a copy (the frozen
    reference) runs eagerly, and position ids are still checked on the host before the compiled pass."""
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=14, n_position=16, n_layer=1, n_head=4, n_embed=32))
    idx = torch.randint(0, 14, (6, 12))
    eager = model(idx)
    eager.square().mean().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    model.configure_runtime(compile=True)
    torch._dynamo.reset()
    counters.clear()
    compiled = model(idx)
    compiled.square().mean().backward()
    assert torch.allclose(compiled, eager, atol=1e-5) and not torch.equal(compiled, torch.zeros_like(compiled))
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, grads[name], rtol=1e-4, atol=1e-6), name
    copy = __import__("copy").deepcopy(model)
    assert copy._compiled is None
    assert torch.allclose(model(idx[:4]), copy(idx[:4]), atol=1e-5)  # another batch size...
    assert counters["stats"]["unique_graphs"] == 1  # ...through the same compiled graph
    with pytest.raises(ValueError, match=r"^position ids 16\.\.16 outside the 16 embeddings \(n_position=16\)$"):
        model(idx, pos=torch.full_like(idx, 16))



def test_a_compiled_grouped_pass_gives_eager_logits_and_gradients_for_any_groups_in_one_graph(aot_eager):
    """compile=True compiles the grouped pass (prefix_sharing's) too: its logits and gradients are the eager grouped
    pass's to float rounding, other numbers of rows and of prompts compile nothing new, and the host's checks stay
    before it."""
    from torch._dynamo.utils import counters
    from model.gpt import PromptGroups
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=14, n_position=16, n_layer=1, n_head=4, n_embed=32)).eval()
    P, G = 5, 2
    idx = torch.randint(0, 14, (12, 6))  # (6 prompts of 6 tokens: sizes equal by chance, as model/gpt.py compiled says)
    idx[:, :P] = idx[::G, :P].repeat_interleave(G, dim=0)  # rows i*G ... i*G+G-1 share a prompt
    batches = [(idx, PromptGroups.of_rows(torch.arange(12), G, P)),
               (idx[2:9], PromptGroups.of_rows(torch.arange(2, 9), G, P))]  # 7 rows of 4 prompts, 2 of them part
    eager = []
    for rows, groups in batches:
        out = model(rows, groups=groups)
        out.square().mean().backward()
        eager.append((out.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}))
        model.zero_grad(set_to_none=True)
    model.configure_runtime(compile=True)
    torch._dynamo.reset()
    counters.clear()
    for (rows, groups), (logits, grads) in zip(batches, eager):
        out = model(rows, groups=groups)
        out.square().mean().backward()
        assert out.shape == (len(rows), 6 - P + 1, 14) and torch.allclose(out, logits, atol=1e-5)
        for name, p in model.named_parameters():
            assert torch.allclose(p.grad, grads[name], rtol=1e-4, atol=1e-6), name
        model.zero_grad(set_to_none=True)
    assert counters["stats"]["unique_graphs"] == 1  # one graph for 12 rows of 6 prompts and 7 rows of 4
    assert __import__("copy").deepcopy(model)._compiled_grouped is None
    with pytest.raises(ValueError, match=r"^position ids 16\.\.16 outside the 16 embeddings \(n_position=16\)$"):
        model(idx, pos=torch.full_like(idx, 16), groups=batches[0][1])

def test_a_compiled_decode_draws_the_eager_tokens_through_one_graph_per_cache_layout(monkeypatch):
    """compile=True compiles generate's cached passes too: the plain decode and prefix_sharing's (one copy of each
    prompt's cache) draw eager's tokens, log-probs and entropies from the same generator state, through one graph
    for the prefill and one for a decoded token at every position (a shared cache: its prefill, its first own token
    and the rest), whatever the batch size. Dynamo's graphs alone (its eager backend: 11 s here against aot_eager's 20
    for these five graphs); the CUDA test below runs them through inductor, the cache's in-place writes and all."""
    import functools
    from torch._dynamo.utils import counters
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=14, n_position=32, n_layer=1, n_head=2, n_embed=16)).eval()
    # 8 prompts first: the head size (16 / 2), and 8 x 4 rows the cache's 32 positions (sizes equal by chance, which
    # torch.compile's duck sizing would take to be one: model/gpt.py compiled)
    prompts = torch.randint(0, 10, (8, 6))
    for share, graphs in ((False, 2), (True, 3)):
        sample = lambda rows: model.generate(prompts[:rows], 7, num_samples=4, with_stats=True, share_prompts=share,
                                             generator=torch.Generator().manual_seed(1))
        model.configure_runtime()
        eager = [sample(8), sample(3)]
        model.configure_runtime(compile=True)
        torch._dynamo.reset()
        counters.clear()
        for rows, (tokens, logps, entropy) in zip((8, 3), eager):
            compiled = sample(rows)
            assert torch.equal(compiled[0], tokens) and tokens.unique().numel() > 3  # (sampled: several tokens)
            assert torch.allclose(compiled[1], logps, atol=1e-6) and torch.allclose(compiled[2], entropy, atol=1e-6)
        assert counters["stats"]["unique_graphs"] == graphs  # ...8 and 3 prompts, 7 positions, through these graphs
    assert __import__("copy").deepcopy(model)._compiled_cached is None
    # Another model of the same structure (the perf sweep builds one a row) is served by the same graphs, with its
    # own weights (graph inputs, not constants): it compiles nothing, and torch.compile's limit of 8 graphs a
    # function is not spent by model after model.
    other = GPT(GPTConfig(vocab_size=14, n_position=32, n_layer=1, n_head=2, n_embed=16)).eval()
    draw = lambda: other.generate(prompts, 7, num_samples=4, with_stats=True, share_prompts=True,
                                  generator=torch.Generator().manual_seed(1))
    other.configure_runtime()
    eager = draw()
    other.configure_runtime(compile=True)
    compiled = draw()
    assert torch.equal(compiled[0], eager[0]) and not torch.equal(eager[0], sample(8)[0])  # (its weights, not model's)
    assert torch.allclose(compiled[1], eager[1], atol=1e-6) and counters["stats"]["unique_graphs"] == 3


def test_the_compile_setting_reaches_the_model():
    assert make_trainer(compile=True).model._compiled is not None
    assert make_trainer().model._compiled is None  # off by default: the presets' curves are untouched


@cuda
def test_compiled_bf16_logits_match_eager_on_cuda():
    model = cuda_model(autocast_dtype=torch.bfloat16, matmul_attention=True)
    idx = torch.randint(0, 12, (64, 12), device="cuda")
    eager = model(idx).float()
    model.configure_runtime(autocast_dtype=torch.bfloat16, matmul_attention=True, compile=True)
    # bf16 rounding (8 bits of mantissa) on logits of order 1; fused kernels round in other places
    assert (model(idx).float() - eager).abs().max() < 5e-2


@cuda
def test_a_compiled_decode_replays_in_its_graph_the_tokens_it_draws_eagerly():
    """On CUDA, compile=True's cached passes (inductor's kernels) are captured inside generate's decode graph: the
    replay draws the compiled eager loop's tokens and log-probs from the same generator state, and where a row drew
    what the uncompiled decode drew, its bf16 log-probs are that decode's to bf16 rounding; plain and with prefix
    sharing. (One model throughout: torch.compile's graphs are kept for it, compiled once.)"""
    prompts = torch.randint(0, 12, (64, 8), device="cuda")
    model = cuda_model()
    for share in (False, True):
        runs = []
        for graphs, compile in ((False, False), (False, True), (True, True)):
            model.configure_runtime(autocast_dtype=torch.bfloat16, cuda_graphs=graphs, matmul_attention=True,
                                    compile=compile)
            runs.append(model.generate(prompts, 6, num_samples=4, with_stats=True, share_prompts=share,
                                       generator=torch.Generator("cuda").manual_seed(3)))
        (eager, eager_logps, _), (tokens, logps, entropy), (replayed, replayed_logps, replayed_entropy) = runs
        assert torch.equal(replayed, tokens) and torch.equal(replayed_logps, logps), share
        assert torch.equal(replayed_entropy, entropy), share
        same = (eager == tokens).all(dim=1)  # (a token drawn otherwise where two nearly tie changes the row after it)
        assert same.float().mean() > 0.5 and (logps - eager_logps)[same].abs().max() < 5e-2, share


# ---- the warm start's steps as one CUDA graph (--sft_cuda_graphs=true) ---------------------------------
@cuda
def test_a_graphed_warm_start_step_trains_as_its_eager_steps():
    """GraphedStep: three eager steps, then the captured one, then replays of it give the losses and weights of
    the same steps run eagerly with the same capturable AdamW, its rate following the schedule."""
    import copy
    import numpy as np
    from torch.optim.lr_scheduler import LambdaLR
    from rl.warm_start import GraphedStep, supervised_batch, teacher_forced_step
    cuda_trainer = lambda: make_trainer(device="cuda", info=DistInfo(device=torch.device("cuda", 0)))
    trainer = cuda_trainer()
    env, eager_model = trainer.env, trainer.model.train()
    graphed_model = copy.deepcopy(eager_model)
    optimizers = [m.configure_optimizer(lr=1e-3, weight_decay=0.01, betas=(0.9, 0.99))
                  for m in (eager_model, graphed_model)]
    schedules = [LambdaLR(o, lambda k: min(1.0, (k + 1) / 4)) for o in optimizers]
    eager = GraphedStep(optimizers[0], grad_clip=1.0)
    eager.WARMUP = 10 ** 9  # every step eager: the same AdamW (capturable, rates in tensors), never captured
    graphed = GraphedStep(optimizers[1], grad_clip=1.0)
    rng = np.random.default_rng(0)
    for step in range(7):
        a, b = env.sample_operands(32, rng)
        expected = eager(eager_model, supervised_batch(env, a, b, "cuda"), env.prompt_len).item()
        loss = teacher_forced_step(graphed_model, env, optimizers[1], a, b, "cuda", grad_clip=1.0,
                                   graphed=graphed).item()
        assert loss == pytest.approx(expected, rel=1e-5), step
        for schedule in schedules:
            schedule.step()
    assert len(graphed.graphs) == 1 and graphed.calls == 7  # one batch shape: one graph
    assert optimizers[1].param_groups[0]["lr"].item() == pytest.approx(1e-3)  # the schedule's rate reached the graph
    for (name, p), q in zip(eager_model.named_parameters(), graphed_model.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name
    assert not torch.equal(eager_model.wte.weight, cuda_trainer().model.wte.weight)  # it trained


@cuda
def test_a_graphed_step_continues_from_a_loaded_adamw():
    """A continued warm start: AdamW loaded from a progress file (its step counts on the host), then graphed."""
    import numpy as np
    from rl.warm_start import GraphedStep, portable, supervised_batch, teacher_forced_step
    trainer = make_trainer(device="cuda", info=DistInfo(device=torch.device("cuda", 0)))
    env, model = trainer.env, trainer.model.train()
    adamw = lambda: model.configure_optimizer(lr=1e-3, weight_decay=0.01, betas=(0.9, 0.99))
    first, rng = adamw(), np.random.default_rng(0)
    for _ in range(2):
        teacher_forced_step(model, env, first, *env.sample_operands(32, rng), "cuda", grad_clip=1.0)
    loaded = adamw()
    loaded.load_state_dict(portable(first.state_dict()))
    graphed = GraphedStep(loaded, grad_clip=1.0)
    losses = [graphed(model, supervised_batch(env, *env.sample_operands(32, rng), "cuda"), env.prompt_len).item()
              for _ in range(GraphedStep.WARMUP + 3)]
    assert len(graphed.graphs) == 1 and all(math.isfinite(x) for x in losses)
    assert all(loaded.state[p]["step"].item() == 2 + len(losses) for p in model.parameters())


@cuda
def test_a_run_with_graphed_warm_start_steps(tmp_path):
    proc = run(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", "--device=cuda", "--sft_cuda_graphs=true",
                f"--out_dir={tmp_path}"])
    assert "Warm start: " in proc.stdout and "Final held-out accuracy" in proc.stdout
