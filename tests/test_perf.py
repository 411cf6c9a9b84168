"""The analytic FLOP count behind update_mfu, checked against PyTorch's own FLOP counter; how the tables count a run
that never reached a target.
Run: python -m pytest tests/test_perf.py"""

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from configs.adder import AdderRLConfig
from model.gpt import GPT, GPTConfig
from rl.tools.perf import forward_flops, update_flops
from rl.tools.report import median_range


def test_forward_flops_match_pytorch_counter():
    config = AdderRLConfig(n_layer=2, n_embed=64, n_head=4).get_args_ready()
    model = GPT(GPTConfig(**config.model_args()))
    T = config.max_seq_len - 1
    # The math attention kernel is plain matmuls, which the counter sees (the fused CPU kernel it does not).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(torch.zeros(3, T, dtype=torch.long))
    assert counter.get_total_flops() == 3 * forward_flops(config, T)


def test_update_flops_count_the_extra_forwards():
    reinforce = AdderRLConfig(rl_algorithm="reinforce").get_args_ready()
    dapo = AdderRLConfig(rl_algorithm="dapo").get_args_ready()  # its ratios use the sampler's log-probs
    ppo = AdderRLConfig(rl_algorithm="ppo", ppo_minibatches=4).get_args_ready()
    with_kl = AdderRLConfig(rl_algorithm="dapo", kl_coef=0.1).get_args_ready()
    one = forward_flops(reinforce, reinforce.max_seq_len - 1)
    assert update_flops(reinforce, 10) == 3 * one * 10
    assert update_flops(dapo, 10) == 3 * one * 10
    assert update_flops(ppo, 10) == 2 * 3 * one * 10  # 2 epochs
    assert update_flops(with_kl, 10) == 4 * one * 10  # the reference's forward


def test_a_run_that_never_got_there_counts_as_later_than_any():
    # seconds to a target for three seeds, one of which never reached it: the median is the later of the other two
    assert median_range([328.9, 303.5, None], "{:.0f}") == "329 (304-never)"
    assert median_range([300.0, None, None], "{:.0f}") == "never (300-never)"
    assert median_range([0.25, 0.75]) == "0.500 (0.250-0.750)" and median_range([None, None]) == "-"
