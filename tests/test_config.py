"""Config lookup, validation, derived fields and command-line parsing.  Run: python -m pytest tests/test_config.py"""

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from configs import all_config_classes, get_config_class
from configs.base import BaseRLConfig, ConfigError
from rl.rl_ddp import build_config, parse_command_line

REPO = Path(__file__).resolve().parents[1]


def config_from(*argv):
    return build_config(parse_command_line(list(argv)))


def test_shipped_configs_are_found_by_name():
    adder, mult = get_config_class("AdderRLConfig")(), get_config_class("MultiplierRLConfig")()
    assert (adder.task, adder.ndigit, adder.n_layer, adder.n_head, adder.n_embed) == ("adder", 3, 4, 8, 256)
    assert (mult.task, mult.ndigit, mult.n_layer, mult.n_head, mult.n_embed) == ("multiplier", 2, 6, 8, 256)


def test_a_config_file_dropped_into_configs_is_found(tmp_path):
    path = REPO / "configs" / "test_dropped_in_tmp.py"
    path.write_text("from dataclasses import dataclass\nfrom configs.base import BaseRLConfig\n\n"
                    "@dataclass\nclass DroppedInRLConfig(BaseRLConfig):\n    task: str = 'subtractor'\n    ndigit: int = 2\n")
    try:
        cls = get_config_class("DroppedInRLConfig")
        assert cls().get_args_ready().max_seq_len == 6 + 3
    finally:
        path.unlink()
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
    assert (m.vocab_size, m.max_seq_len, m.out_dir) == (14, 11, "out/MultiplierRLConfig-debug")


def test_overrides_are_typed_and_win_over_debug_presets():
    c = config_from("--config_name", "AdderRLConfig", "--debug", "--rl_train_steps=3", "--learning_rate", "3e-4",
                    "--reverse_answer=false")
    assert c.rl_train_steps == 3 and c.learning_rate == 3e-4 and c.reverse_answer is False
    assert c.rl_batch_size == BaseRLConfig.DEBUG_OVERRIDES["rl_batch_size"]


@pytest.mark.parametrize("argv,message", [
    (["--ndigits=4"], "unknown option --ndigits; did you mean --ndigit? (--help lists every option)"),
    (["--ndigit=three"], "--ndigit expects an integer, got 'three'"),
    (["--learning_rate=nan"], "--learning_rate must be a finite number, got 'nan'"),
    (["--reverse_answer=maybe"], "--reverse_answer expects true or false, got 'maybe'"),
    (["--rl_batch_size=0"], "rl_batch_size must be positive, got 0"),
    (["--weight_decay=-1"], "weight_decay must be zero or positive, got -1.0"),
    (["--n_head=7"], "n_embed=256 is not divisible by n_head=7; pick n_head among [1, 2, 4, 8, 16, 32]"),
    (["--ndigit=9", "--n_position=24"], "adder with ndigit=9 needs 31 positions (prompt 20 + answer 11) but "
                                         "n_position=24; raise n_position to at least 31"),
    (["--task=divider"], "unknown task 'divider'; known tasks: adder, multiplier, subtractor"),
    (["--rl_algorithm=ppo2"], "unknown rl_algorithm 'ppo2'"),
    (["--rewards=exact:1"], "unknown reward 'exact' in rewards='exact:1'"),
    (["--vocab_size=20"], "vocab_size and max_seq_len are derived from the task; do not set them"),
    (["--rl_ga_steps=3"], "rl_batch_size*rl_rollout_size=512 is not divisible by rl_ga_steps=3"),
    (["--init_from=no/such/file.pt"], "init_from='no/such/file.pt' is neither 'sft', 'scratch' nor an existing file"),
    (["--debug=yes"], "--debug takes no value"),
    (["stray"], "unexpected argument 'stray'"),
])
def test_bad_input_is_one_clear_message(argv, message):
    with pytest.raises(ConfigError) as e:
        config_from(*argv)
    assert str(e.value).startswith(message)


def test_global_batch_must_split_across_ranks():
    c = get_config_class("AdderRLConfig")(rl_batch_size=6, sft_batch_size=8).get_args_ready()
    with pytest.raises(ConfigError, match="rl_batch_size=6 is not divisible by the 4 processes; use a multiple of 4"):
        c.validate_world_size(4)
    c.validate_world_size(2)


def test_original_config_command_prints_the_resolved_config():
    cmd = ("from rl.rl_ddp import get_config_class; config = get_config_class('AdderRLConfig')(); "
           "print(config.get_args_ready())")
    out = subprocess.run([sys.executable, "-c", cmd], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.startswith("AdderRLConfig(") and "  vocab_size = 14" in out and "  max_seq_len = 13" in out
