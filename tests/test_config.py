"""Config lookup, validation, derived fields and command-line parsing, and the whole catalogue of bad
inputs with their exact messages (in-process; tests/test_cli.py checks the one-line, exit-2 envelope
of a few of them through the real script).  Run: python -m pytest tests/test_config.py"""

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch

import configs
from configs import all_config_classes, get_config_class
from configs.base import BaseRLConfig, ConfigError
from configs.cli import build_config, parse_command_line
from configs.fields import check_fields, field_ranges, field_type
from model.gpt import GPT, GPTConfig
from rl import dist
from rl.snapshot import find_resume

REPO = Path(__file__).resolve().parents[1]


def config_from(*argv):
    return build_config(parse_command_line(list(argv)))


def test_shipped_configs_are_found_by_name():
    adder, mult = get_config_class("AdderRLConfig")(), get_config_class("MultiplierRLConfig")()
    assert (adder.task, adder.ndigit, adder.n_layer, adder.n_head, adder.n_embed) == ("adder", 3, 4, 8, 256)
    assert (mult.task, mult.ndigit, mult.show_work) == ("multiplier", 2, True)
    three = get_config_class("Multiplier3RLConfig")()
    assert (three.task, three.ndigit, three.show_work) == ("multiplier", 3, True)


def test_a_config_file_dropped_into_the_configs_folder_is_found(tmp_path, monkeypatch):
    # a folder standing in for configs/ (nothing is written into the repository)
    (tmp_path / "dropped_in.py").write_text(
        "from dataclasses import dataclass\nfrom configs.base import BaseRLConfig\n\n"
        "@dataclass\nclass DroppedInRLConfig(BaseRLConfig):\n    task: str = 'subtractor'\n    ndigit: int = 2\n")
    monkeypatch.setattr(configs, "__path__", [*configs.__path__, str(tmp_path)])
    cls = get_config_class("DroppedInRLConfig")
    assert cls().get_args_ready().max_seq_len == 6 + 3
    monkeypatch.undo()
    sys.modules.pop("configs.dropped_in", None)
    assert "DroppedInRLConfig" not in all_config_classes()


def test_unknown_config_lists_the_known_ones():
    with pytest.raises(ConfigError) as e:
        get_config_class("AdderConfig")
    assert str(e.value).startswith("unknown config 'AdderConfig'; did you mean 'AdderRLConfig'? known configs: ")
    assert "MultiplierRLConfig" in str(e.value)


def test_every_field_carries_a_reason():
    docs = BaseRLConfig.field_docs()
    assert [f.name for f in fields(BaseRLConfig) if not docs.get(f.name)] == []


def test_derived_fields_are_filled_in():
    c = get_config_class("AdderRLConfig")().get_args_ready()
    assert (c.vocab_size, c.max_seq_len, c.out_dir) == (14, 13, "out/AdderRLConfig")
    m = get_config_class("MultiplierRLConfig")().get_args_ready(debug=True)
    assert (m.vocab_size, m.max_seq_len, m.out_dir) == (15, 6 + 14, "out/MultiplierRLConfig-debug")
    plain = get_config_class("MultiplierRLConfig")(show_work=False).get_args_ready()
    assert (plain.vocab_size, plain.max_seq_len) == (14, 11)


def test_overrides_are_typed_and_win_over_debug_presets():
    c = config_from("--config_name", "AdderRLConfig", "--debug", "--rl_train_steps=3", "--learning_rate", "3e-4",
                    "--reverse_answer=false")
    assert c.rl_train_steps == 3 and c.learning_rate == 3e-4 and c.reverse_answer is False
    assert c.rl_batch_size == BaseRLConfig.DEBUG_OVERRIDES["rl_batch_size"]
    assert parse_command_line(["--debug"]).resume_mode == "never"
    assert parse_command_line(["--resume"]).resume_mode == "auto" == parse_command_line([]).resume_mode


@pytest.mark.parametrize("argv,message", [
    (["--config_name", "NoSuchConfig"], "unknown config 'NoSuchConfig'; known configs: "),
    (["--ndigits=4"], "unknown option --ndigits; did you mean --ndigit? (--help lists every option)"),
    (["--lerning_rate=1e-3"], "unknown option --lerning_rate; did you mean --learning_rate?"),
    (["--ndigit=three"], "--ndigit expects an integer, got 'three'"),
    (["--ndigit=3.5"], "--ndigit expects an integer, got '3.5'"),
    (["--learning_rate=nan"], "--learning_rate must be a finite number, got 'nan'"),
    (["--learning_rate=inf"], "--learning_rate must be a finite number, got 'inf'"),
    (["--reverse_answer=maybe"], "--reverse_answer expects true or false, got 'maybe'"),
    (["--rl_batch_size=0"], "rl_batch_size must be positive, got 0"),
    (["--rl_rollout_size=-2"], "rl_rollout_size must be positive, got -2"),
    (["--weight_decay=-1"], "weight_decay must be zero or positive, got -1.0"),
    (["--adam_beta2=1"], "adam_beta2 must be in [0, 1), got 1.0"),
    (["--n_embed=100"], "n_embed=100 is not divisible by n_head=8; pick n_head among [1, 2, 4, 5, 10, 20, 25]"),
    (["--n_head=7"], "n_embed=256 is not divisible by n_head=7; pick n_head among [1, 2, 4, 8, 16, 32]"),
    (["--ndigit=9", "--n_position=24"], "adder with ndigit=9 needs 31 positions (prompt 20 + answer 11) but "
                                         "n_position=24; raise n_position to at least 31"),
    (["--ndigit=10"], "ndigit must be between 1 and 9, got 10"),
    (["--task=divider"], "unknown task 'divider'; known tasks: adder, multiplier, subtractor"),
    (["--show_work=true"], "task adder defines no steps to show; use show_work=false (tasks with steps: multiplier)"),
    (["--test_fraction=0.6", "--validation_fraction=0.5"], "test_fraction and validation_fraction must be positive"),
    (["--rl_algorithm=sarsa"], "unknown rl_algorithm 'sarsa'; known: reinforce, grpo, rloo, ppo, dapo"),
    (["--advantage_mode=median"], "unknown advantage_mode 'median'; known: none, baseline, group_mean"),
    (["--loss_aggregation=mean"], "unknown loss_aggregation 'mean'; known: token-mean"),
    (["--kl_estimator=k4"], "unknown kl_estimator 'k4'; known: k1, k2, k3"),
    (["--rl_algorithm=rloo", "--rl_rollout_size=1"], "advantage_mode=rloo compares the answers to a prompt"),
    (["--rewards=exact:1"], "unknown reward 'exact' in rewards='exact:1'"),
    (["--rewards=exact_match,steps"], "reward 'steps' scores the shown work, but show_work is false"),
    (["--rewards=exact_match:1,exact_match:0.5"], "reward 'exact_match' is named twice in rewards="),
    (["--rewards=digit_match:0"], "reward weight for 'digit_match' must be positive, got '0'"),
    (["--vocab_size=20"], "vocab_size and max_seq_len are derived from the task; do not set them"),
    (["--rl_ga_steps=3"], "rl_batch_size*rl_rollout_size=512 is not divisible by rl_ga_steps=3"),
    (["--init_from=no/such/file.pt"], "init_from='no/such/file.pt' is neither 'sft', 'scratch' nor an existing file"),
    (["--device=tpu"], "device must be 'auto', 'cpu' or 'cuda', got 'tpu'"),
    (["--clip_low=1.5", "--rl_algorithm=ppo"], "clip_low must be in (0, 1): the ratio is clipped below at 1 - clip_low"),
    (["--problem_sampler=hard"], "unknown problem_sampler 'hard'; known: uniform, prioritized, replay"),
    (["--problem_sampler=prioritized", "--ndigit=4"], "problem_sampler=prioritized keeps a statistic per training pair"),
    (["--replay_share=1.5", "--problem_sampler=replay"], "replay_share must be in [0, 1], got 1.5"),
    (["--replay_capacity=0", "--problem_sampler=replay"], "replay_capacity must be positive, got 0"),
    (["--priority_floor=-0.1", "--problem_sampler=prioritized"], "priority_floor must be zero or positive"),
    # every setting matters or is refused (tests/test_settings_matter.py checks the rest by gradient)
    (["--rl_algorithm=dpo", "--kl_coef=0.1"], "kl_coef has no effect with objective=dpo: dpo_beta is DPO's KL"),
    (["--rl_algorithm=dpo", "--entropy_coef=0.1"], "entropy_coef has no effect with objective=dpo"),
    (["--rl_algorithm=dpo", "--clip_high=0.3"], "clip_high has no effect with objective=dpo"),
    (["--rl_algorithm=rft", "--kl_coef=0.1", "--kl_estimator=k1"], "kl_estimator=k1 puts the KL in the reward, which "
                                                                   "rft never reads"),
    (["--rl_algorithm=rft", "--advantage_mode=rloo"], "advantage_mode has no effect with objective=rft"),
    (["--rl_algorithm=rft", "--rewards=digit_match:1"], "rewards have no effect with objective=rft"),
    (["--rl_algorithm=grpo", "--advantage_mode=token_zscore", "--rewards=digit_match:1"],
     "rewards have no effect with advantage_mode=token_zscore: it credits each answer token"),
    (["--rl_algorithm=rft", "--advantage_mode=token_zscore"], "advantage_mode=token_zscore is the policy gradient's"),
    (["--rl_algorithm=reinforce", "--clip_high=0.28"], "clip_high has no effect when each rollout feeds one optimizer"),
    (["--rl_algorithm=grpo", "--gamma=0.9"], "gamma=0.9 has no effect here: it belongs to the critic"),
    (["--rl_algorithm=grpo", "--dpo_beta=0.2"], "dpo_beta=0.2 has no effect here: it belongs to objective=dpo"),
    (["--kl_estimator=k3"], "kl_estimator='k3' has no effect here: it needs kl_coef > 0"),
    (["--rl_algorithm=grpo", "--baseline_momentum=0.5"], "baseline_momentum=0.5 has no effect here"),
    (["--problem_sampler=uniform", "--replay_share=0.7"], "replay_share=0.7 has no effect here: it belongs to "
                                                          "problem_sampler=replay"),
    (["--priority_decay=0.9"], "priority_decay=0.9 has no effect here: it belongs to problem_sampler=prioritized"),
    (["--debug=yes"], "--debug takes no value"),
    (["--seed"], "--seed needs a value, e.g. --seed=VALUE"),
    (["stray"], "unexpected argument 'stray'"),
])
def test_bad_input_is_one_clear_message(argv, message):
    with pytest.raises(ConfigError) as e:
        config_from(*argv)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("argv,message", [
    # an option given twice: the last would silently win
    (["--learning_rate=1e-3", "--learning_rate=2e-3"],
     "--learning_rate is given more than once (--learning_rate=1e-3, then --learning_rate=2e-3); give it once"),
    (["--learning_rate", "1e-3", "--learning-rate=2e-3"],
     "--learning_rate is given more than once (--learning_rate 1e-3, then --learning-rate=2e-3); give it once"),
    (["--config_name", "AdderRLConfig", "--config_name=MultiplierRLConfig"],
     "--config_name is given more than once (--config_name AdderRLConfig, then --config_name=MultiplierRLConfig); "
     "give it once"),
    (["--debug", "--debug"], "--debug is given more than once; give it once"),
    (["--no_wandb", "--no-wandb"], "--no_wandb is given more than once (--no_wandb, then --no-wandb); give it once"),
    (["--resume", "--resume=never"], "--resume is given more than once (--resume, then --resume=never); give it once"),
    (["--resume=never", "--resume=never"], "--resume is given more than once; give it once"),
    # an empty value: not "not given" (an unset shell variable would otherwise start over in the default folder)
    (["--resume="], "--resume= is empty; give --resume=auto, --resume=never or --resume=PATH of a snapshot "
                    "(--resume alone means auto)"),
    (["--config_name="], "--config_name is empty; name a config, or leave --config_name out for AdderRLConfig"),
    (["--out_dir="], "--out_dir is empty; give it a value, or leave --out_dir out for its default"),
    (["--out_dir", ""], "--out_dir is empty; give it a value, or leave --out_dir out for its default"),
    (["--wandb_run_name="],
     "--wandb_run_name is empty; give it a value, or leave --wandb_run_name out for its default"),
    (["--seed="], "--seed is empty; give it a value, or leave --seed out for its default"),
    (["--lerning_rate="], "unknown option --lerning_rate; did you mean --learning_rate? (--help lists every option)"),
])
def test_a_repeated_or_empty_option_is_refused(argv, message):
    with pytest.raises(ConfigError) as e:
        config_from(*argv)
    assert str(e.value) == message


# ---- integers: a bound past which torch or numpy would fail mid-run; the types a command line gives
INT64 = "(torch and numpy hold sizes and counts in 64-bit integers); use a value in that range"


@pytest.mark.parametrize("argv,message", [
    ([f"--seed={2 ** 64}"], f"seed={2 ** 64} is outside [0, 2**64 - 1] (the seeds torch.manual_seed takes); "
                            f"use a value in that range"),
    ([f"--rl_batch_size={2 ** 63}"], f"rl_batch_size={2 ** 63} is outside [1, 2**63 - 1] {INT64}"),
    ([f"--num_mistakes={2 ** 63}"], f"num_mistakes={2 ** 63} is outside [0, 2**63 - 1] {INT64}"),
    ([f"--ppo_epochs={2 ** 63}"], f"ppo_epochs={2 ** 63} is outside [1, 2**63 - 1] {INT64}"),
    ([f"--ndigit={2 ** 63}"], f"ndigit must be between 1 and 9, got {2 ** 63}"),  # its owner's tighter bound
])
def test_an_integer_setting_past_what_torch_and_numpy_take_is_refused(argv, message):
    with pytest.raises(ConfigError) as e:
        config_from(*argv)
    assert str(e.value) == message
    assert config_from(f"--seed={2 ** 64 - 1}").seed == 2 ** 64 - 1  # torch.manual_seed's largest


@pytest.mark.parametrize("field,value,message", [
    ("rl_batch_size", 64.0, "rl_batch_size must be an integer, got 64.0"),
    ("n_layer", True, "n_layer must be an integer, got True"),
    ("seed", "1", "seed must be an integer, got '1'"),
    ("reverse_answer", "false", "reverse_answer must be true or false, got 'false'"),
    ("dynamic_sampling", 1, "dynamic_sampling must be true or false, got 1"),
])
def test_a_config_built_in_python_is_typed_too(field, value, message):
    """The command line types every value; a config built in Python gets the same one-line refusal
    rather than a comparison's TypeError, or a string 'false' that counts as true."""
    with pytest.raises(ConfigError) as e:
        get_config_class("AdderRLConfig")(**{field: value}).get_args_ready()
    assert str(e.value) == message


# ---- more minibatches than rows: optimizer steps with nothing to train on
EMPTY_MINIBATCHES = "so some optimizer steps would have nothing to train on; use at most"


@pytest.mark.parametrize("argv,message", [
    (["--ppo_minibatches=513"],
     "ppo_minibatches=513 is more than the 512 answers each process trains on per step at most (rl_batch_size=64 "
     f"prompts x rl_rollout_size=8 answers), {EMPTY_MINIBATCHES} 512"),
    (["--rl_algorithm=rft", "--ppo_minibatches=513"],  # rft trains on the right answers among them
     "ppo_minibatches=513 is more than the 512 answers each process trains on per step at most (rl_batch_size=64 "
     f"prompts x rl_rollout_size=8 answers), {EMPTY_MINIBATCHES} 512"),
    (["--rl_algorithm=dpo", "--ppo_minibatches=257"],  # a row is a pair: at most G // 2 to a prompt
     "ppo_minibatches=257 is more than the 256 preference pairs each process trains on per step at most "
     f"(rl_batch_size=64 prompts x rl_rollout_size=8 // 2 pairs), {EMPTY_MINIBATCHES} 256"),
])
def test_more_minibatches_than_rows_is_refused(argv, message):
    with pytest.raises(ConfigError) as e:
        config_from(*argv)
    assert str(e.value) == message
    config_from(*argv[:-1], f"--ppo_minibatches={int(message.split()[-1])}")  # as many as rows: accepted


def test_minibatches_are_bounded_by_each_process_s_rows():
    """Each process splits its own rows into ppo_minibatches, so the bound shrinks with more processes."""
    c = get_config_class("AdderRLConfig")(ppo_minibatches=128).get_args_ready()  # 64 prompts x 8 answers
    c.validate_world_size(4)
    with pytest.raises(ConfigError) as e:
        c.validate_world_size(8)
    assert str(e.value) == ("ppo_minibatches=128 is more than the 64 answers each process trains on per step at most "
                            "(rl_batch_size=64 / 8 processes = 8 prompts x rl_rollout_size=8 answers), so some "
                            "optimizer steps would have nothing to train on; use at most 64")
    dpo = get_config_class("AdderRLConfig")(rl_algorithm="dpo", ppo_minibatches=64).get_args_ready()
    dpo.validate_world_size(4)
    with pytest.raises(ConfigError, match=r"ppo_minibatches=64 is more than the 32 preference pairs each process "
                                          r"trains on per step at most \(rl_batch_size=64 / 8 processes = 8 prompts x "
                                          r"rl_rollout_size=8 // 2 pairs\)"):
        dpo.validate_world_size(8)


def test_prioritized_draws_that_the_train_split_cannot_fill_are_refused():
    """The prioritized sampler draws distinct pairs within a step, refill rounds (up to 4 x the prompts
    each) none drawn before: 1-digit addition has 83 training pairs, and numpy's draw failed mid-run past
    them ("Fewer non-zero entries in p than size")."""
    small = dict(ndigit=1, n_position=10, problem_sampler="prioritized")
    at_most = get_config_class("AdderRLConfig")(**small, rl_batch_size=16).get_args_ready()  # 16 + 4 x 16 = 80
    at_most.validate_world_size(1)
    with pytest.raises(ConfigError) as e:
        get_config_class("AdderRLConfig")(**small, rl_batch_size=17).get_args_ready().validate_world_size(1)
    assert str(e.value) == ("problem_sampler=prioritized draws up to 85 distinct training pairs a step on each process "
                            "(17 prompts and up to 1 refill round of 4 x 17), but the train split has 83; lower "
                            "rl_batch_size or dynamic_sampling_max_rounds, or use problem_sampler=replay")
    grpo = get_config_class("AdderRLConfig")(**small, rl_algorithm="grpo", rl_batch_size=96).get_args_ready()
    with pytest.raises(ConfigError) as e:
        grpo.validate_world_size(1)
    assert str(e.value) == ("problem_sampler=prioritized draws up to 96 distinct training pairs a step on each process "
                            "(96 prompts), but the train split has 83; lower rl_batch_size, or use "
                            "problem_sampler=replay")
    grpo.validate_world_size(2)  # each process draws its own 48


# ---- a pool of worked examples larger than the train split (refused before start, not in the warm start)
@pytest.mark.parametrize("argv,pairs", [
    (["--config_name", "ScarceMultiplierRLConfig"], 8461),  # 2-digit multiplication's training pairs
    (["--ndigit=1", "--n_position=10"], 83),
])
def test_a_pool_of_worked_examples_larger_than_the_train_split_is_refused(argv, pairs):
    with pytest.raises(ConfigError) as e:
        config_from(*argv, f"--sft_worked_examples={pairs + 1}")
    assert str(e.value) == (f"sft_worked_examples={pairs + 1} but the train split has only {pairs} pairs; set it to "
                            f"at most {pairs} (0 for all)")
    assert config_from(*argv, f"--sft_worked_examples={pairs}").sft_worked_examples == pairs


# ---- a setting the chosen algorithm, sampler or start ignores (tests/test_settings_matter.py: the rest)
WARM_START = "has no effect here: it belongs to the warm start (init_from=sft); set that, or leave {} unset"
NO_STEP = "has no effect here: it needs sft_max_steps > 0 (no warm start step runs); set that, or leave {} unset"
DYNAMIC = ("has no effect here: it belongs to dynamic sampling (dynamic_sampling=true, as rl_algorithm=dapo has it); "
           "set that, or leave dynamic_sampling_max_rounds unset")


@pytest.mark.parametrize("argv,message", [
    (["--rl_algorithm=grpo", "--dynamic_sampling_max_rounds=3"], f"dynamic_sampling_max_rounds=3 {DYNAMIC}"),
    (["--dynamic_sampling=false", "--dynamic_sampling_max_rounds=0"], f"dynamic_sampling_max_rounds=0 {DYNAMIC}"),
    (["--init_from=scratch", "--sft_learning_rate=0.01"],
     f"sft_learning_rate=0.01 {WARM_START.format('sft_learning_rate')}"),
    (["--init_from=scratch", "--sft_save_interval=7"], f"sft_save_interval=7 {WARM_START.format('sft_save_interval')}"),
    (["--debug", "--init_from=scratch", "--sft_max_steps=5"], f"sft_max_steps=5 {WARM_START.format('sft_max_steps')}"),
    (["--init_from=scratch", "--dropout=0.1"], "dropout=0.1 has no effect here: it applies only to the warm start, "
                                               "init_from=sft (RL samples and updates in eval mode); set that, or "
                                               "leave dropout unset"),
    (["--sft_max_steps=0", "--sft_patience=3"], f"sft_patience=3 {NO_STEP.format('sft_patience')}"),
    (["--sft_max_steps=0", "--dropout=0.1"], f"dropout=0.1 {NO_STEP.format('dropout')}"),
    # --debug's rewards are its own, but the user's are checked (rft reads none)
    (["--debug", "--rl_algorithm=rft", "--rewards=exact_match:1,format:1"],
     "rewards have no effect with objective=rft: it keeps the answers that are exactly right; leave rewards at its "
     "default"),
    (["--no_wandb", "--wandb_project=mine"], "--wandb_project has no effect with --no_wandb (metrics go to "
                                             "out_dir/metrics.jsonl only); drop one of them"),
])
def test_a_setting_the_run_would_ignore_is_refused(argv, message):
    with pytest.raises(ConfigError) as e:
        config_from(*argv)
    assert str(e.value) == message


@pytest.mark.parametrize("argv", [
    ["--rl_algorithm=grpo", "--dynamic_sampling=true", "--dynamic_sampling_max_rounds=3"],
    # --debug's own presets (sft_max_steps, dynamic_sampling_max_rounds, ...) are not the user's
    ["--debug", "--init_from=scratch"], ["--debug", "--rl_algorithm=grpo"],
    ["--config_name", "MultiplierRLConfig", "--debug", "--rl_algorithm=grpo", "--init_from=scratch"],
    # a preset's own warm-start settings are its defaults, not changes
    ["--config_name", "ScarceMultiplierRLConfig", "--init_from=scratch"],
    ["--sft_max_steps=0"], ["--no_wandb"], ["--wandb_project=mine"],
])
def test_a_preset_s_or_debug_s_own_setting_is_not_the_user_s(argv):
    config_from(*argv)


def test_a_file_start_keeps_its_dropout(tmp_path):
    """A snapshot's model_args carry the dropout it was made with and must match the config's, so a
    start from a file may set dropout (a start from scratch may not)."""
    weights = tmp_path / "weights.pt"
    weights.write_bytes(b"checked when the run starts")
    assert config_from(f"--init_from={weights}", "--dropout=0.1").dropout == 0.1


def test_global_batch_must_split_across_ranks():
    c = get_config_class("AdderRLConfig")(rl_batch_size=6, sft_batch_size=8).get_args_ready()
    with pytest.raises(ConfigError, match="rl_batch_size=6 is not divisible by the 4 processes; use a multiple of 4"):
        c.validate_world_size(4)
    c.validate_world_size(2)
    # the warm start's batch only when there is a warm start
    with pytest.raises(ConfigError, match="sft_batch_size=9 is not divisible by the 2 processes; use a multiple of 2"):
        get_config_class("AdderRLConfig")(sft_batch_size=9).get_args_ready().validate_world_size(2)
    scratch = get_config_class("AdderRLConfig")(init_from="scratch", rl_batch_size=6).get_args_ready()
    scratch.validate_world_size(3)  # sft_batch_size=256 is no multiple of 3, but no warm start runs


def test_devices_and_backends_this_machine_cannot_run(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(ValueError, match="backend='nccl' needs CUDA, which this run does not use; use --backend=gloo"):
        dist.pick_device_and_backend("auto", "nccl", 0)
    with pytest.raises(ValueError, match="device='cuda' was asked for but CUDA is not available here; use --device=cpu"):
        dist.pick_device_and_backend("cuda", "auto", 0)
    assert dist.pick_device_and_backend("auto", "auto", 0) == (dist.torch.device("cpu"), "gloo")


def test_each_gpu_preset_runs_as_the_gpu_runs_the_readme_reports_did():
    """A GPU preset (configs/gpu.py) is the README's GPU rows in one name: its CPU preset with exactly the settings
    of the runs in results/gpu/ that rl/tools/readme.py reports, on both cards; a change to either fails here."""
    from configs.gpu import GPU_PRESETS, cpu_preset
    from rl.tools import gpu, readme
    for card in (readme.README_GPU, readme.CHOICE_GPU):
        runs = readme.gpu_runs(card)
        assert {gpu.preset_of(config, rs[0]["set"]) for config, rs in runs.items()} == set(GPU_PRESETS), card
    adder = next(cls for cls in GPU_PRESETS if cpu_preset(cls).__name__ == "AdderRLConfig")
    ran = readme.gpu_runs()["AdderRLConfig"][0]["set"]
    assert gpu.preset_of("AdderRLConfig", ran) is adder
    # one setting more, one less or one other than the preset's: another set of runs
    assert gpu.preset_of("AdderRLConfig", [*ran, "seed=3"]) is None
    assert gpu.preset_of("AdderRLConfig", ran[1:]) is None
    assert gpu.preset_of("AdderRLConfig", [kv.replace("=512", "=256") for kv in ran]) is None
    assert gpu.preset_of("LongAdderRLConfig", []) is None  # (no GPU preset is made from it)
    assert gpu.preset_of("AdderRLConfig", [*ran, "sft_batchsize=512"]) is None  # a setting no config has (any more)
    for cls in GPU_PRESETS:  # each runs where its CPU preset runs, but for the device
        gpu_config, cpu_config = cls().get_args_ready(), cpu_preset(cls)().get_args_ready()
        assert gpu_config.device == "cuda" and cpu_config.device == "auto"
        assert (gpu_config.task, gpu_config.ndigit, gpu_config.show_work, gpu_config.n_layer) == (
            cpu_config.task, cpu_config.ndigit, cpu_config.show_work, cpu_config.n_layer)


def test_the_readme_shows_a_cards_runs_of_exactly_the_gpu_presets_settings(tmp_path, monkeypatch):
    """Whatever else ran on a card, and on how many seeds, the README's GPU rows are the runs of the GPU presets'
    settings (configs/gpu.py holds the choice): a candidate run on more seeds does not take their place."""
    from rl.tools import readme, results
    ran = readme.gpu_runs()["AdderRLConfig"][0]["set"]
    monkeypatch.setattr(results, "ROOT", str(tmp_path))
    card = "NVIDIA H100 80GB HBM3"
    record = lambda overrides, seed, gpu=card: results.save(
        {"config": "AdderRLConfig", "set": overrides, "seed": seed, "gpu": gpu},
        results.path("gpu/" + gpu.replace(" ", "-"), f"AdderRLConfig-{len(overrides)}-{gpu[-4:]}-seed{seed}"))
    for seed in (1, 0):
        record(ran, seed)
    for seed in (0, 1, 2):
        record([*ran, "rl_batch_size=256"], seed)  # another candidate, on more seeds
        record(ran, seed, gpu="NVIDIA H200")  # the preset's, on another card
    runs = readme.gpu_runs(card)
    assert list(runs) == ["AdderRLConfig"] and [(r["seed"], r["set"], r["gpu"]) for r in runs["AdderRLConfig"]] == [
        (0, ran, card), (1, ran, card)]
    assert [r["seed"] for r in readme.gpu_runs("NVIDIA H200")["AdderRLConfig"]] == [0, 1, 2]


def test_a_gpu_preset_without_cuda_is_refused_naming_its_cpu_preset(monkeypatch, capsys):
    from rl import rl_ddp
    from rl.tools import launch
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    line = ("AdderGPUConfig is sized for a GPU and CUDA is not available here; run AdderRLConfig on the CPU, or pass "
            "--device=cpu to run AdderGPUConfig here anyway")
    assert rl_ddp.main(["--config_name", "AdderGPUConfig", "--no_wandb"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"error: {line}"]
    with pytest.raises(ConfigError) as e:
        rl_ddp.check_start(["--config_name", "Multiplier3GPUConfig"])
    assert str(e.value).startswith("Multiplier3GPUConfig is sized for a GPU and CUDA is not available here; run "
                                   "Multiplier3RLConfig on the CPU")
    with pytest.raises(SystemExit) as e:  # the tools refuse it before their first run
        launch.check_command(["--config_name", "AdderGPUConfig"])
    assert str(e.value) == f"error: {line}"
    # asked for by name, CUDA is the user's own choice: the plain message
    with pytest.raises(ConfigError, match="^device='cuda' was asked for but CUDA is not available here; use --device"):
        rl_ddp.check_start(["--config_name", "AdderGPUConfig", "--device=cuda"])
    # and on the CPU when asked to
    assert rl_ddp.check_start(["--config_name", "MultiplierGPUConfig", "--device=cpu"]).device == "cpu"


def test_a_cpu_preset_on_a_gpu_names_the_gpu_preset_made_from_it():
    from rl.rl_ddp import gpu_hint
    assert gpu_hint("MultiplierRLConfig") == ("MultiplierRLConfig's steps are sized for a CPU; on a GPU, "
                                              "MultiplierGPUConfig has its settings chosen there (configs/gpu.py, "
                                              "README \"On a GPU\")")
    assert "Multiplier3GPUConfig has" in gpu_hint("Multiplier3RLConfig") and "AdderGPUConfig has" in gpu_hint(
        "AdderRLConfig")
    assert gpu_hint("ScarceMultiplierRLConfig") == gpu_hint("AdderGPUConfig") == ""
    # a command line that already sets what the GPU preset changes has chosen for itself; others still hear of it
    assert gpu_hint("AdderRLConfig", {"rl_train_steps": "400"}) == gpu_hint("AdderRLConfig", {"sft_batch_size": "1"})
    assert gpu_hint("AdderRLConfig", {"rl_train_steps": "400"}) == "" and gpu_hint("AdderRLConfig", {"seed": "3"})
    assert gpu_hint("MultiplierRLConfig", {"matmul_attention": "true"}) == ""
    assert gpu_hint("MultiplierRLConfig", {"device": "cuda"}) == gpu_hint("MultiplierRLConfig")  # where, not how


@pytest.mark.parametrize("cpuinfo,has", [
    ("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n", False),  # this VM's kind
    ("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n", True),
    ("processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_tile amx_bf16\n", True),
    ("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n", True),  # an ARM server
    ("processor\t: 0\nFeatures\t: fp asimd evtstrm crc32\n", False),
    ("processor\t: 0\nmodel name\t: something without a flags line\n", None),
    ("processor\t: 0\nflags\t\t: fpu avx512_bf16x\n", False),  # whole flags only
])
def test_the_cpus_bf16_instructions_are_read_from_its_flags(tmp_path, cpuinfo, has):
    (tmp_path / "cpuinfo").write_text(cpuinfo)
    assert dist.cpu_has_bf16(str(tmp_path / "cpuinfo")) is has
    assert dist.cpu_has_bf16(str(tmp_path / "missing")) is None  # (macOS has no /proc/cpuinfo)


def test_a_bf16_run_on_a_cpu_without_bf16_instructions_says_so_at_its_start(tmp_path, monkeypatch, capsys):
    """It still runs (its numbers are right, only slow); the note gives the measured cost and the faster choice."""
    from rl import rl_ddp
    note = rl_ddp.bf16_note("cpu", True, False)
    assert note == ("note: this CPU lists no bf16 instructions (avx512_bf16, amx_bf16, bf16), so torch emulates "
                    "bf16 matmuls: on a 2-core AMD EPYC the adder's update took 26x fp32's seconds, its sampling 4.4x "
                    "(results/study/cpu-bf16/); --precision=auto runs fp32 on the CPU")
    # fp32, a CPU with bf16 instructions or one that does not say, and CUDA: nothing to say
    assert {rl_ddp.bf16_note("cpu", False, False), rl_ddp.bf16_note("cpu", True, True),
            rl_ddp.bf16_note("cpu", True, None), rl_ddp.bf16_note("cuda", True, False)} == {""}
    run = ["--config_name", "AdderRLConfig", "--debug", "--no_wandb", "--init_from=scratch", "--rl_train_steps=0",
           "--num_eval=8"]
    monkeypatch.setattr(dist, "cpu_has_bf16", lambda: False)
    assert rl_ddp.main([*run, "--precision=bf16", f"--out_dir={tmp_path / 'bf16'}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[lines.index(note) - 1].startswith("AdderRLConfig: 3.17M parameters, 1 process(es) on cpu (bf16 "
                                                   "autocast)")
    assert rl_ddp.main([*run, f"--out_dir={tmp_path / 'fp32'}"]) == 0  # auto: fp32 here
    assert note not in capsys.readouterr().out
    monkeypatch.setattr(dist, "cpu_has_bf16", lambda: True)
    assert rl_ddp.main([*run, "--precision=bf16", f"--out_dir={tmp_path / 'amx'}"]) == 0
    assert note not in capsys.readouterr().out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_gpu_preset_runs_and_a_cpu_preset_names_its_gpu_preset(tmp_path):
    """Where there is a GPU: the GPU preset runs there by itself, and its CPU preset's run says it exists."""
    from helpers import run
    from rl.rl_ddp import gpu_hint
    gpu = run(["--config_name", "AdderGPUConfig", "--debug", "--no_wandb", f"--out_dir={tmp_path / 'gpu'}"])
    assert "1 process(es) on cuda" in gpu.stdout and gpu_hint("AdderRLConfig") not in gpu.stdout
    cpu = run(["--config_name", "AdderRLConfig", "--debug", "--no_wandb", f"--out_dir={tmp_path / 'cpu'}"])
    assert gpu_hint("AdderRLConfig") in cpu.stdout.splitlines()


LAUNCHER_FIX = "launch with torchrun, or unset RANK, LOCAL_RANK and WORLD_SIZE"
MASTER = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")


@pytest.mark.parametrize("variables,message", [
    (dict(RANK="0"), "RANK is set without LOCAL_RANK and WORLD_SIZE (torchrun sets all three); "),
    (dict(WORLD_SIZE="2", **MASTER), "WORLD_SIZE is set without RANK and LOCAL_RANK (torchrun sets all three); "),
    (dict(RANK="0", WORLD_SIZE="1"), "RANK and WORLD_SIZE are set without LOCAL_RANK (torchrun sets all three); "),
    (dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="two"), "WORLD_SIZE='two' is not an integer; "),
    (dict(RANK="", LOCAL_RANK="0", WORLD_SIZE="1"), "RANK='' is not an integer; "),
    (dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="0"), "WORLD_SIZE=0 must be at least 1; "),
    (dict(RANK="2", LOCAL_RANK="0", WORLD_SIZE="2", **MASTER), "RANK=2 is outside [0, WORLD_SIZE=2); "),
    (dict(RANK="-1", LOCAL_RANK="0", WORLD_SIZE="2", **MASTER), "RANK=-1 is outside [0, WORLD_SIZE=2); "),
    (dict(RANK="1", LOCAL_RANK="2", WORLD_SIZE="2", **MASTER), "LOCAL_RANK=2 is outside [0, WORLD_SIZE=2); "),
    (dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2"),
     "WORLD_SIZE=2 but MASTER_ADDR and MASTER_PORT are not set, so the processes cannot meet; "),
    (dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1"),
     "WORLD_SIZE=2 but MASTER_PORT is not set, so the processes cannot meet; "),
    (dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="http"),
     "MASTER_PORT='http' is not a port number (1 to 65535); "),
    (dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="70000"),
     "MASTER_PORT='70000' is not a port number (1 to 65535); "),
])
def test_a_launcher_environment_torchrun_would_not_make_is_refused(monkeypatch, variables, message):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as e:
        dist.read_env()
    assert str(e.value) == message + LAUNCHER_FIX


def test_a_launcher_environment_as_torchrun_makes_it_is_read(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert dist.read_env() == dist.DistInfo(0, 0, 1)  # plain python
    for name, value in dict(RANK="3", LOCAL_RANK="1", WORLD_SIZE="4", **MASTER).items():
        monkeypatch.setenv(name, value)
    assert dist.read_env() == dist.DistInfo(3, 1, 4)
    monkeypatch.setenv("WORLD_SIZE", "1"), monkeypatch.setenv("RANK", "0"), monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.delenv("MASTER_PORT")
    assert dist.read_env() == dist.DistInfo(0, 0, 1)  # one process needs no rendezvous


def test_init_from_and_a_cached_warm_start_that_cannot_be_read(tmp_path):
    """The same one-line errors as --resume, before start: missing, unreadable, another model."""
    from rl.snapshot import check_init_from
    from rl.warm_start import check_cache
    bad = tmp_path / "weights.pt"
    bad.write_bytes(b"not a snapshot")
    config = get_config_class("AdderRLConfig")(init_from=str(bad), out_dir=str(tmp_path)).get_args_ready()
    with pytest.raises(ConfigError, match=f"--init_from: snapshot {bad} is unreadable .*; pass another file"):
        check_init_from(config)
    other = get_config_class("AdderRLConfig")(n_layer=2).get_args_ready()
    weights = GPT(GPTConfig(**other.model_args())).state_dict()  # complete: only the shape is wrong
    torch.save({"model": weights, "model_args": other.model_args(), "task": other.task_args()}, bad)
    with pytest.raises(ConfigError, match="holds a model of n_layer=2, .* but the config asks for n_layer=4"):
        check_init_from(config)
    (tmp_path / "warm_start.pt").write_bytes(b"truncated")
    cached = get_config_class("AdderRLConfig")(out_dir=str(tmp_path)).get_args_ready()
    with pytest.raises(ConfigError, match="cached warm start: snapshot .*warm_start.pt is unreadable .*; delete it"):
        check_cache(cached)


def test_resume_from_a_missing_or_broken_file(tmp_path):
    config = get_config_class("AdderRLConfig")(out_dir=str(tmp_path)).get_args_ready()
    with pytest.raises(ConfigError, match="--resume=does/not/exist.pt: no such file \\(use --resume=never to start over\\)"):
        find_resume("does/not/exist.pt", config)
    bad = tmp_path / "rl_snapshot_3.pt"
    bad.write_bytes(b"this is not a snapshot")
    with pytest.raises(ConfigError, match=f"--resume: snapshot {bad} is unreadable"):
        find_resume(str(bad), config)
    never = find_resume("never", config)
    assert (never.snap, never.path) == (None, None)


def test_original_config_command_prints_the_resolved_config():
    cmd = ("from rl.rl_ddp import get_config_class; config = get_config_class('AdderRLConfig')(); "
           "print(config.get_args_ready())")
    out = subprocess.run([sys.executable, "-c", cmd], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.startswith("AdderRLConfig(") and "  vocab_size = 14" in out and "  max_seq_len = 13" in out


# every numeric setting states its range in its docstring, and a value just outside it is refused
OUTSIDE = {"(> 0)": 0, "(>= 0)": -1, "(in [0, 1])": 1.5, "(in [0, 1))": 1.0, "(1 to 9)": 10, "(in (0, 1))": 1.0,
           "(in (0, 1])": 1.5, "(>= -1)": -2}


def test_every_numeric_setting_states_its_range_and_a_value_outside_it_is_refused():
    docs, checked = BaseRLConfig.field_docs(), 0
    for f in fields(BaseRLConfig):
        if field_type(f) not in (int, float) or f.name in ("vocab_size", "max_seq_len"):
            continue
        stated = re.search(r"\((> 0|>= 0|>= -1|in \[0, 1\]|in \[0, 1\)|1 to 9|in \(0, 1\)|in \(0, 1\])[;)]", docs[f.name])
        assert stated, f"{f.name}: no range in its docstring: {docs[f.name]!r}"
        bad = 0.0 if stated.group(1) == "in (0, 1)" and f.name.endswith("_fraction") else \
            OUTSIDE[f"({stated.group(1)})"]
        with pytest.raises(ConfigError, match=f.name):
            get_config_class("AdderRLConfig")(**{f.name: bad}).get_args_ready()
        checked += 1
    assert checked >= 50


# ---- a broken file under configs/ breaks only the configs it defines (issue 35) ------------------------
# Each is dropped into a folder standing in for configs/ (nothing is written into the repository).
BROKEN_FILES = {  # module: (its text, the config class it means to define, the first line of why it fails)
    "syntax_draft": ("from dataclasses import dataclass\nfrom configs.base import BaseRLConfig\n\n@dataclass\n"
                     "class SyntaxDraftRLConfig(BaseRLConfig)\n    task: str = 'subtractor'\n",
                     "SyntaxDraftRLConfig", "SyntaxError: expected ':', line 5"),
    # README "Adding a task"'s snippet as written there, without its imports
    "subtractor": ('@dataclass\nclass SubtractorRLConfig(BaseRLConfig):\n    task: str = "subtractor"\n',
                   "SubtractorRLConfig", "NameError: name 'dataclass' is not defined, line 1"),
    "import_draft": ("from dataclasses import dataclass\nfrom configs.base import SubtractorBase\n\n@dataclass\n"
                     "class ImportDraftRLConfig(SubtractorBase):\n    ndigit: int = 2\n",
                     "ImportDraftRLConfig",
                     f"ImportError: cannot import name 'SubtractorBase' from 'configs.base' "
                     f"({REPO / 'configs' / 'base.py'}), line 2"),
}


def drop_in_configs(folder, monkeypatch, **files):
    """Write {module: text} into folder and scan it as part of configs/; the caller forgets the modules."""
    for module, text in files.items():
        (folder / f"{module}.py").write_text(text)
    monkeypatch.setattr(configs, "__path__", [*configs.__path__, str(folder)])


def known_configs():
    return ", ".join(sorted(all_config_classes()))


@pytest.mark.parametrize("module", BROKEN_FILES)
def test_a_broken_config_file_breaks_only_the_configs_it_defines(module, tmp_path, monkeypatch):
    text, name, why = BROKEN_FILES[module]
    drop_in_configs(tmp_path, monkeypatch, **{module: text})
    try:
        assert get_config_class("AdderRLConfig")().get_args_ready().task == "adder"
        assert "AdderRLConfig" in all_config_classes() and name not in all_config_classes()
        assert configs.scan_configs()[1] == {str(tmp_path / f"{module}.py"): why}
        with pytest.raises(ConfigError) as e:
            get_config_class(name)
        # (outside the repository the file is shown by its whole path)
        assert str(e.value) == (f"unknown config {name!r}; {tmp_path / f'{module}.py'} failed to import ({why}): "
                                f"fix it; known configs: {known_configs()}")
    finally:
        sys.modules.pop(f"configs.{module}", None)


def test_a_broken_config_file_is_not_blamed_for_another_name(tmp_path, monkeypatch):
    drop_in_configs(tmp_path, monkeypatch, **{m: text for m, (text, _, _) in BROKEN_FILES.items()})
    try:  # a typo of a config that exists: the drafts cannot hold it, and are not mentioned
        with pytest.raises(ConfigError) as e:
            get_config_class("AdderConfig")
        assert str(e.value) == f"unknown config 'AdderConfig'; did you mean 'AdderRLConfig'? known configs: " \
                               f"{known_configs()}"
        with pytest.raises(ConfigError) as e:  # a name two drafts mention: both are named
            get_config_class("DraftRLConfig")
        assert str(e.value).startswith(f"unknown config 'DraftRLConfig'; {tmp_path / 'import_draft.py'} failed to "
                                       f"import (ImportError: ")
        assert f"{tmp_path / 'syntax_draft.py'} failed to import (SyntaxError: expected ':', line 5): fix them; " \
               f"known configs: " in str(e.value)
    finally:
        for module in BROKEN_FILES:
            sys.modules.pop(f"configs.{module}", None)


def test_the_script_names_a_broken_config_file_in_one_line_and_says_nothing_of_it_otherwise(tmp_path, monkeypatch,
                                                                                         capsys):
    from rl import rl_ddp
    folder = tmp_path / "configs"  # shown as the user knows it: a file of the repository's configs/
    folder.mkdir()
    monkeypatch.setattr(configs, "REPO", str(tmp_path))
    drop_in_configs(folder, monkeypatch, subtractor=BROKEN_FILES["subtractor"][0])
    try:
        assert rl_ddp.main(["--config_name", "SubtractorRLConfig"]) == 2
        err = capsys.readouterr().err
        assert err.splitlines() == [f"error: unknown config 'SubtractorRLConfig'; configs/subtractor.py failed to import "
                                    f"(NameError: name 'dataclass' is not defined, line 1): fix it; known configs: "
                                    f"{known_configs()}"], err
        assert rl_ddp.main(["--config_name", "AdderRLConfig", "--help"]) == 0  # an unrelated draft: no noise
        assert capsys.readouterr().err == ""
    finally:
        sys.modules.pop("configs.subtractor", None)


# ---- --help keeps what the base says: allowed values, ranges, what None means (issue 35) -------------
def help_text(capsys, config_name) -> str:
    from configs.cli import print_help
    print_help(parse_command_line(["--config_name", config_name, "--help"]))
    return capsys.readouterr().out


def field_blocks(text) -> dict:
    """{field: [its head line, the lines under it]} of a --help text."""
    blocks, name = {}, None
    for line in text.splitlines():
        if line.startswith("  --"):
            name = line[4:].split("=")[0]
            assert name not in blocks, f"--{name} is listed twice"
            blocks[name] = [line]
        elif name and line.startswith("      "):
            blocks[name].append(line)
        else:
            name = None
    return blocks


def one_line(doc) -> str:
    return " ".join(doc.split())


def test_help_starts_with_the_usage_and_lists_every_field_once_for_every_config(capsys):
    from configs.cli import FLAGS
    for name, cls in all_config_classes().items():
        text = help_text(capsys, name)
        usage = text.splitlines()[0]
        assert usage == ("usage: python rl/rl_ddp.py [--config_name NAME] [--debug] [--no_wandb] "
                         "[--resume[=auto|never|PATH]] [--KEY=VALUE ...] [--help]")
        assert all(f"[--{flag}" in usage for flag in FLAGS)
        assert list(field_blocks(text)) == [f.name for f in fields(cls)], name  # each once, in order


def test_help_of_a_field_a_preset_overrides_keeps_the_base_values_and_range_and_adds_the_preset_reason(capsys):
    base, mult = BaseRLConfig.field_docs(), get_config_class("MultiplierRLConfig").field_docs()
    blocks = field_blocks(help_text(capsys, "MultiplierRLConfig"))
    # the allowed values live in the base's docstring, the measurement behind replay in the preset's
    assert blocks["problem_sampler"] == ["  --problem_sampler='replay'", f"      {one_line(base['problem_sampler'])}",
                                         f"      MultiplierRLConfig: {one_line(mult['problem_sampler'])}"]
    assert "uniform, prioritized (" in blocks["problem_sampler"][1]
    assert blocks["replay_share"][1].endswith("(in [0, 1])")  # the range, from the base
    assert blocks["replay_share"][2].startswith("      MultiplierRLConfig: three quarters of each step")
    assert blocks["n_layer"] == ["  --n_layer=4", "      transformer blocks (> 0)"]  # not overridden: no preset line
    assert blocks["task"] == ["  --task='multiplier'", f"      {one_line(base['task'])}"]  # overridden, no reason
    # a preset of a preset: the reason of the class that set the value shown, not its parent's
    three = field_blocks(help_text(capsys, "Multiplier3RLConfig"))["problem_sampler"]
    assert three[0] == "  --problem_sampler='uniform'" and three[2].startswith("      Multiplier3RLConfig: measured")
    scarce = field_blocks(help_text(capsys, "ScarceMultiplierRLConfig"))["replay_share"]  # its value: the parent's
    assert scarce[0] == "  --replay_share=0.75" and scarce[2].startswith("      MultiplierRLConfig: three quarters")


def test_help_of_a_gpu_preset_gives_its_reasons_under_its_own_name(capsys):
    """What every GPU preset sets alike (configs/gpu.py's OnOneGPU, not a config) is said as the preset's own."""
    blocks = field_blocks(help_text(capsys, "MultiplierGPUConfig"))
    own = get_config_class("MultiplierGPUConfig").field_docs()["device"]
    assert blocks["device"] == ["  --device='cuda'", f"      {one_line(BaseRLConfig.field_docs()['device'])}",
                                f"      MultiplierGPUConfig: {one_line(own)}"]
    assert blocks["device"][2].startswith("      MultiplierGPUConfig: sized for a GPU: refused at start")
    assert blocks["sft_target_accuracy"][2].startswith("      MultiplierGPUConfig: a supervised step costs")
    # its CPU preset's own reasons stay where the GPU preset keeps the value
    assert blocks["replay_share"][2].startswith("      MultiplierRLConfig: three quarters of each step")


def test_help_says_what_a_none_default_means_and_the_algorithm_value(capsys):
    from rl.algorithms import ALGORITHM_FIELDS, ALGORITHMS
    blocks = field_blocks(help_text(capsys, "AdderRLConfig"))
    assert len(ALGORITHM_FIELDS) == 8
    for name in ALGORITHM_FIELDS:
        assert blocks[name][0] == f"  --{name}=None  (dapo: {ALGORITHMS['dapo'][name]})"
        assert blocks[name][-1] == ("      None: rl_algorithm's value, from its row of the algorithm table "
                                    "(rl/algorithms.py)")
    assert blocks["advantage_mode"][0] == "  --advantage_mode=None  (dapo: group_zscore)"
    assert blocks["clip_low"][1] == "      PPO clips the ratio below at 1 - clip_low (in (0, 1))"  # and the range


def test_help_for_an_unknown_config_is_the_one_line_error(capsys):
    from rl import rl_ddp
    assert rl_ddp.main(["--config_name", "AdderConfig", "--help"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"error: unknown config 'AdderConfig'; did you mean 'AdderRLConfig'? "
                                              f"known configs: {known_configs()}"]


def test_the_printed_config_marks_the_row_settings_an_objective_never_reads():
    from configs.adder import AdderRLConfig
    marked = lambda algorithm: sorted(line.split()[0] for line in str(AdderRLConfig(rl_algorithm=algorithm)
                                                                      .get_args_ready()).splitlines()
                                      if line.endswith(f"(not read by objective={algorithm})"))
    assert marked("dpo") == ["advantage_mode", "clip_high", "clip_low", "loss_aggregation"]
    assert marked("rft") == ["advantage_mode"]
    assert "not read" not in str(AdderRLConfig(rl_algorithm="dapo").get_args_ready())


def test_each_range_is_written_once_in_its_docstring_and_checked_from_there():
    from dataclasses import fields as dataclass_fields
    ranges = field_ranges(BaseRLConfig)
    # every positivity or unit-interval check of the config reads a docstring: one place per range
    assert len(ranges) > 40 and set(ranges.values()) == {"> 0", ">= 0", "in [0, 1]", "in [0, 1)"}
    types = {f.name: f for f in dataclass_fields(BaseRLConfig)}
    for name, kind in ranges.items():
        is_int = field_type(types[name]) is int
        bad = {"> 0": 0 if is_int else 0.0, ">= 0": -1 if is_int else -0.5, "in [0, 1]": 1.5, "in [0, 1)": 1.0}[kind]
        words = {"> 0": "positive", ">= 0": "zero or positive"}.get(kind, kind)
        with pytest.raises(ConfigError) as e:
            check_fields(BaseRLConfig(**{name: bad}))
        assert str(e.value) == f"{name} must be {words}, got {bad}"
    # a docstring without a range puts no bound on its field here (ndigit's 1 to 9 is its environment's)
    check_fields(BaseRLConfig(ndigit=0))
