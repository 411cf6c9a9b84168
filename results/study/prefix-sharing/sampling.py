"""A rollout's sampling with and without prefix_sharing's shared prompt caches, paired in one process.

    PYTHONPATH=. python results/study/prefix-sharing/sampling.py AdderRLConfig [--prompts 64] [--pairs 20] \
        [--out results/study/prefix-sharing/sampling-pairs.json]

One model of the preset, built as rl/tools/perf.py builds it (random weights), `prompts` fixed training problems,
generate as the rollout calls it (G answers each, the preset's temperature, log-probs and entropies), its G rows of a
prompt reading copies of the prompt's cache (plain) or one copy (shared: model/gpt.py KVCache.share_prompts). After
one untimed call each, the two alternate (A B, then B A), `pairs` times, each from the same generator seed; prints
one JSON line: each one's median seconds, the ratio shared / plain pair by pair (median, min, max), and the share of
the tokens the two drew alike, with the machine; --out adds it to that file's rows.
"""

import argparse

import numpy as np
import torch

import paired
from rl.tools.perf import build_trainer


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--out", default=None, help="a JSON file whose rows this measurement joins")
    a = p.parse_args()
    trainer = build_trainer(a.config, rl_batch_size=a.prompts)
    env, c, model = trainer.env, trainer.config, trainer.model.eval()
    prompts, _ = env.encode(*env.sample_operands(a.prompts, np.random.default_rng(0)))
    sample = lambda share: model.generate(
        prompts, env.answer_len, temperature=c.rl_temperature, end_token=env.end_token, pad_token=env.pad_token,
        generator=torch.Generator().manual_seed(0), num_samples=c.rl_rollout_size, with_stats=True,
        with_nonfinite=True, share_prompts=share)
    tokens = {share: sample(share)[0] for share in (False, True)}  # untimed: first-call allocations
    seconds = paired.alternate(sample, a.pairs)
    row = dict(config=a.config, prompts=a.prompts, rl_rollout_size=c.rl_rollout_size, prompt_len=env.prompt_len,
               answer_len=env.answer_len, pairs=a.pairs, **paired.summary(seconds),
               same_tokens=(tokens[False] == tokens[True]).float().mean().item())
    paired.emit(row, a.out, "prefix-sharing-sampling")

if __name__ == "__main__":
    main()
