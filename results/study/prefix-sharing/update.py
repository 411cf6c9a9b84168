"""The RL step's update with and without prefix_sharing, paired in one process, on one fixed sampled batch.

    PYTHONPATH=. python results/study/prefix-sharing/update.py AdderRLConfig [--pairs 30] [--set KEY=VALUE ...] \
        [--out results/study/prefix-sharing/update-pairs.json]

Two trainers of the preset, built as rl/tools/perf.py builds them (random weights, the digit_match reward, so every
answer trains and none is skipped), the same weights and the same sampled batch, one with prefix_sharing. After one
untimed update each, their updates alternate (A B, then B A), `pairs` times; prints one JSON line: each one's median
seconds, the ratio shared / plain pair by pair (median, min, max), and the tokens the update's forwards read (what the
linear layers see: a grouped pass reads U * P + N * T, a full pass N * (P + T)), with the machine; --out adds it to
that file's rows.
"""

import argparse
from dataclasses import fields

import paired
from configs import get_config_class
from configs.cli import parse_value
from configs.fields import field_type
from rl.tools.perf import build_trainer, fixed_update


def counting(trainer, tokens: list):
    """Record the tokens each forward of the trainer's policy reads."""
    def count(module, args, kwargs):
        groups, idx = kwargs.get("groups"), args[0]
        tokens.append(idx.numel() if groups is None else len(groups.first) * groups.length
                      + idx[:, groups.length:].numel())
    return trainer.model.register_forward_pre_hook(count, with_kwargs=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--set", nargs="*", default=[], help="KEY=VALUE overrides of both, typed as the command line types them")
    p.add_argument("--out", default=None, help="a JSON file whose rows this measurement joins")
    a = p.parse_args()
    # typed as the command line types them (configs/cli.py), by the config's own fields
    kinds = {f.name: field_type(f) for f in fields(get_config_class(a.config))}
    overrides = {k: parse_value(k, kinds[k], v) for k, v in (kv.split("=", 1) for kv in a.set)}
    updates, tokens, rows = {}, {}, {}
    for flag in (False, True):
        trainer = build_trainer(a.config, prefix_sharing=flag, **overrides)
        batch, updates[flag] = fixed_update(trainer)
        tokens[flag], rows[flag] = [], len(batch)
        hook = counting(trainer, tokens[flag])
        updates[flag]()  # untimed: first-call allocations (and its forwards' tokens counted)
        hook.remove()
    assert rows[False] == rows[True]  # the same batch
    seconds = paired.alternate(lambda flag: updates[flag](), a.pairs)
    c = trainer.config
    row = dict(
        config=a.config, set=overrides, rows=rows[True], ppo_minibatches=c.ppo_minibatches, rl_ga_steps=c.rl_ga_steps,
        prompt_len=trainer.env.prompt_len, answer_len=trainer.env.answer_len, rl_rollout_size=c.rl_rollout_size,
        tokens_plain=sum(tokens[False]), tokens_shared=sum(tokens[True]), pairs=a.pairs, **paired.summary(seconds))
    paired.emit(row, a.out, "prefix-sharing-update")


if __name__ == "__main__":
    main()
