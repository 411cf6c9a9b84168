"""Which split each reported number decodes, pinned from the outside, and greedy decoding: the
trainer's test and validation sets, the entry script's names for them and the number it reports
must each decode the split the README says; pass@k by hand, the exact p(right) against the product of
token probabilities and the sampled pass@k against the exact one, and the command python -m rl.evaluate
(its report, --show, the JSON file, the one-line errors).
Run: python -m pytest tests/test_evaluate.py"""

import json
import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

from helpers import REPO, make_trainer
from model.gpt import GPT, GPTConfig
from rl import math_trainer, rl_ddp
from rl.evaluate import (EvalResult, answer_probability, count_right_samples, eval_position_ids, evaluate,
                         exact_pass_at_k, fifths, main, pass_at_k_unbiased)
from rl.long_env import environments
from rl.math_env import SPLITS, MathEnvironment
from rl.math_reward import digit_match, exact_match
from rl.warm_start import teacher_forced_step

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


def test_the_evaluation_says_at_which_digits_answers_go_wrong(taught):
    """Each final-answer digit's share of wrong greedy answers, in the order written, by hand."""
    env = taught.env
    a, b = env.eval_operands(300, "test")
    _, targets = env.encode(a, b)
    answers = greedy_answers(taught.model, env, a, b)
    digits = slice(env.final_start, env.answer_len - 1)
    by_hand = (answers[:, digits] != targets[:, digits]).double().mean(dim=0).tolist()
    result = evaluate(taught.model, env, a, b, taught.info)
    assert by_hand != by_hand[::-1] and 0 < min(by_hand)  # (so a wrong order or a lost digit shows)
    assert result.digit_errors == pytest.approx(by_hand, abs=1e-12) and len(by_hand) == 3  # 2 digits: sums of 3
    assert 1 - result.digit_accuracy == pytest.approx(sum(by_hand) / len(by_hand))
    assert result.end_errors == (answers[:, -1] != targets[:, -1]).double().mean().item()


def test_the_digit_error_rate_of_each_fifth_of_the_answer():
    assert fifths([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]) == "0.100 0.350 0.550 0.750 0.950"
    # (11 digits: parts of 3, 2, 2, 2, 2; an answer of two digits: two parts)
    assert fifths([0.5, 0.25]) == "0.500 0.250"


# ---- pass@k and the command: python -m rl.evaluate FILE ---------------------------------------------
def test_pass_at_k_unbiased_by_hand():
    assert pass_at_k_unbiased(5, 2, 2).item() == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k_unbiased(5, torch.tensor([0, 1, 5]), 1).tolist() == pytest.approx([0.0, 0.2, 1.0])
    assert pass_at_k_unbiased(5, 4, 2).item() == 1.0  # n - c = 1 < k: every pair of draws holds a right one
    for n, c, k in [(10, 3, 4), (64, 7, 8), (200, 150, 60), (200, 3, 1)]:  # C(200, 60) is about 1e51
        ratio = Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_at_k_unbiased(n, c, k).item() == pytest.approx(float(1 - ratio), rel=1e-12, abs=1e-15)
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k_unbiased(4, 1, 5)


def test_exact_pass_at_k_by_hand():
    assert exact_pass_at_k(torch.tensor([0.0, 0.5, 1.0]), 3).tolist() == pytest.approx([0.0, 0.875, 1.0])
    # 1 - (1 - p)^k loses every digit for a tiny p in floating point; k p is the answer to first order
    assert exact_pass_at_k(torch.tensor([1e-20], dtype=torch.float64), 2).item() == pytest.approx(2e-20, abs=1e-29)


@pytest.fixture(scope="module")
def taught():
    """A tiny policy (2-digit addition) after 200 supervised steps: right often, not always, so p(right)
    is spread over (0, 1); and its RL snapshot, made with rl_temperature=0.8."""
    trainer = make_trainer(rl_temperature=0.8)
    optimizer, rng = torch.optim.Adam(trainer.model.parameters(), lr=3e-3), np.random.default_rng(0)
    for _ in range(200):
        teacher_forced_step(trainer.model, trainer.env, optimizer, *trainer.env.sample_operands(64, rng), "cpu")
    trainer.model.eval()
    return trainer


def test_answer_probability_is_the_product_of_the_token_probabilities(taught):
    """p(right) by hand: the model read one token at a time, softmax(logits / T) at each answer token
    of the target, end token included, multiplied."""
    model, env, T = taught.model, taught.env, 0.7
    prompts, targets = env.encode([37, 5], [48, 91])
    by_hand = []
    with torch.no_grad():
        for prompt, target in zip(prompts, targets):
            probability, sequence = 1.0, prompt
            for token in target:  # "58$"... the end token is the last factor
                probability *= torch.softmax(model(sequence[None])[0, -1] / T, dim=-1)[token].item()
                sequence = torch.cat([sequence, token[None]])
            by_hand.append(probability)
    assert targets[0, -1] == env.end_token
    assert answer_probability(model, env, prompts, targets, T).tolist() == pytest.approx(by_hand, rel=1e-5)


def test_a_greedy_answer_is_certain_at_a_small_temperature(taught):
    """As T -> 0 sampling is greedy: p(right) -> 1 where the greedy answer is right, 0 where it is wrong."""
    env = taught.env
    a, b = env.eval_operands(200, "test")
    prompts, targets = env.encode(a, b)
    greedy = taught.model.generate(prompts, env.answer_len, greedy=True, end_token=env.end_token,
                                   pad_token=env.pad_token)
    right = exact_match(env, targets, greedy).bool()
    p = answer_probability(taught.model, env, prompts, targets, 1e-4)
    assert 0 < right.sum() < len(right)  # both cases are checked
    assert p[right].min() > 0.99 and p[~right].max() < 0.01


def binomial_variance(n: int, p: torch.Tensor, k: int) -> torch.Tensor:
    """Var of the unbiased pass@k estimate when c ~ Binomial(n, p): p (B,) -> (B,), summed over c = 0..n."""
    c = torch.arange(n + 1, dtype=torch.float64)
    p = p.double().clamp(1e-300, 1 - 1e-16)[:, None]
    log_pmf = (torch.lgamma(torch.tensor(n + 1.0)) - torch.lgamma(c + 1) - torch.lgamma(n - c + 1)
               + c * p.log() + (n - c) * torch.log1p(-p))
    f = pass_at_k_unbiased(n, torch.arange(n + 1), k)
    return (log_pmf.exp() * f ** 2).sum(dim=1) - exact_pass_at_k(p[:, 0], k) ** 2


def test_sampled_and_exact_pass_at_k_agree_within_their_error(taught):
    """The unbiased estimate from n samples has mean 1 - (1 - p)^k for each problem, so the two means
    over problems differ by sampling noise only: its standard error, from each problem's binomial."""
    env, n, T = taught.env, 32, 1.0
    a, b = env.eval_operands(150, "test")
    p = answer_probability(taught.model, env, *env.encode(a, b), T)
    assert ((p > 0.1) & (p < 0.9)).float().mean() > 0.3  # spread: the comparison is not 0 = 0 or 1 = 1
    c = count_right_samples(taught.model, env, a, b, num_samples=n, temperature=T,
                            generator=torch.Generator().manual_seed(0), batch_size=1000)
    for k in (1, 4, 32):
        sampled, exact = pass_at_k_unbiased(n, c, k).mean().item(), exact_pass_at_k(p, k).mean().item()
        se = binomial_variance(n, p, k).sum().sqrt().item() / len(a)
        assert abs(sampled - exact) < 4 * se, (k, sampled, exact, se)
    again = count_right_samples(taught.model, env, a, b, num_samples=n, temperature=T,
                                generator=torch.Generator().manual_seed(0), batch_size=1000)
    assert torch.equal(c, again)  # a seeded generator: the same samples


@pytest.fixture(scope="module")
def snapshot_file(taught, tmp_path_factory):
    path = tmp_path_factory.mktemp("snap") / "rl_snapshot_7.pt"
    torch.save(taught.state_dict(), path)
    return path


def command(args: list, capsys) -> tuple:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


JSON_KEYS = {"command", "file", "kind", "step", "task", "split", "num", "samples", "temperature", "temperature_from",
             "logn_attention", "attention_window", "attention_globals",
             "k", "seed", "device", "threads", "num_problems", "greedy_accuracy", "greedy_digit_accuracy",
             "greedy_digit_errors", "greedy_end_errors",
             "greedy_steps_accuracy", "pass_at_k", "mean_p_right", "exact_note", "pass_at_k_curve", "seconds"}


def test_the_command_reports_greedy_sampled_and_exact_numbers(snapshot_file, taught, capsys):
    out = snapshot_file.parent / "eval.json"
    args = [snapshot_file, "--num", 100, "--samples", 16, "--k", 1, 4, 16, "--show", 3, "--out", out]
    code, stdout, stderr = command(args, capsys)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    assert set(report) == JSON_KEYS and set(report["pass_at_k"]) == {"1", "4", "16"}
    assert report["file"] == str(snapshot_file) and report["command"].startswith("python -m rl.evaluate ")
    assert (report["split"], report["num"], report["num_problems"], report["samples"], report["k"]) == (
        "test", 100, 100, 16, [1, 4, 16])
    assert report["temperature"] == 0.8 and report["temperature_from"] == "the file's rl_temperature"
    a, b = taught.env.eval_operands(100, "test")
    greedy = evaluate(taught.model, taught.env, a, b, taught.info)
    assert report["greedy_accuracy"] == greedy.accuracy and report["greedy_digit_accuracy"] == greedy.digit_accuracy
    assert report["greedy_digit_errors"] == greedy.digit_errors
    assert report["greedy_end_errors"] == greedy.end_errors
    assert f"  {'all':>10}: {fifths(greedy.digit_errors)}   end {greedy.end_errors:.3f}" in stdout.splitlines()
    p = answer_probability(taught.model, taught.env, *taught.env.encode(a, b), 0.8)
    assert report["pass_at_k"]["4"]["exact"] == pytest.approx(exact_pass_at_k(p, 4).mean().item())
    assert report["mean_p_right"] == pytest.approx(report["pass_at_k"]["1"]["exact"])
    assert (snapshot_file.parent / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = stdout.splitlines()
    assert any(line.split()[:4] == ["16", f"{report['pass_at_k']['16']['sampled']:.4f}",
                                    f"{report['pass_at_k']['16']['sampled_stderr']:.4f}",
                                    f"{report['pass_at_k']['16']['exact']:.4f}"] for line in lines)
    shown = [line for line in lines if "sampled right" in line]
    assert len(shown) == 3
    for line, x, y in zip(shown, a, b):  # e.g. "  37+48= 580$  (85)  right  p(right)=0.93  15/16 sampled right"
        truth = taught.env.problem(int(x), int(y))
        assert line.split()[0] == truth.prompt and ("  right  " in line) == (line.split()[1] == truth.target)
        assert line.split()[2] == f"({int(line.split()[1][-2::-1])})"  # the number the reversed answer means
    # seeded: the same command gives the same numbers; another seed other samples
    code, again, _ = command(args, capsys)
    assert code == 0 and again.splitlines()[1:] == lines[1:]  # (the first line holds the seconds)
    command([*args, "--seed", 1, "--temperature", 1.5], capsys)
    other = json.loads(out.read_text())
    assert other["temperature"] == 1.5 and other["pass_at_k"]["1"]["sampled"] != report["pass_at_k"]["1"]["sampled"]


def test_by_default_the_command_evaluates_the_set_the_run_reported_on(snapshot_file, taught, tmp_path, capsys):
    """No --num: the file's num_eval, so its greedy accuracy is the number the run reported."""
    code, _, stderr = command([snapshot_file, "--samples", 2, "--k", 1, "--out", tmp_path / "r.json"], capsys)
    report = json.loads((tmp_path / "r.json").read_text())
    assert code == 0, stderr
    assert report["num"] == report["num_problems"] == taught.config.num_eval
    assert report["greedy_accuracy"] == taught.accuracy("test").accuracy


def test_a_warm_start_with_shown_work_reports_no_exact_figures(tmp_path, capsys, monkeypatch):
    """A warm start file has no config (temperature 1.0); with show_work the right final answer is
    many token sequences, so only the sampled pass@k is reported, and the output says why. Without
    matplotlib, one line says how to install it and the rest is done."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    task = dict(task="multiplier", ndigit=2, reverse_answer=True, use_format=True, show_work=True,
                test_fraction=0.1, validation_fraction=0.05)
    env = MathEnvironment(**task)
    model = GPT(GPTConfig(vocab_size=env.vocab_size, n_position=env.seq_len, n_layer=1, n_head=2, n_embed=16))
    path = tmp_path / "warm_start.pt"
    torch.save({"kind": "warm_start", "model": model.state_dict(), "model_args": vars(model.config), "task": task},
               path)
    code, stdout, stderr = command([path, "--num", 20, "--samples", 4, "--k", 1, 4], capsys)
    assert code == 0, stderr
    report = json.loads((tmp_path / "warm_start.eval.json").read_text())
    assert report["temperature"] == 1.0 and report["temperature_from"] == "default"
    assert report["pass_at_k"]["4"]["exact"] is None and report["mean_p_right"] is None
    assert report["greedy_steps_accuracy"] is not None and "exact pass@k not reported" in stdout
    assert stderr == "plot skipped: matplotlib is not installed (pip install -r requirements-tools.txt)\n"
    assert not (tmp_path / "warm_start.eval.png").exists() and "wrote " in stdout


@pytest.mark.parametrize("args,message", [
    (["missing.pt"], "error: snapshot missing.pt does not exist"),
    (["README.md"], "error: snapshot README.md is unreadable"),
    (["{snap}", "--samples", "4", "--k", "1", "8"], "error: --k 8 is outside 1..--samples=4"),
    (["{snap}", "--k", "0"], "error: --k 0 is outside"),
    (["{snap}", "--samples", "0"], "error: --samples must be positive, got 0"),
    (["{snap}", "--num", "-3"], "error: --num must be positive, got -3"),
    (["{snap}", "--split", "train"], "error: --split=train is refused: the reported numbers are held out"),
    (["{snap}", "--split", "tset"], "error: unknown split 'tset'; use test (the default) or validation"),
    (["{snap}", "--temperature", "0"], "error: --temperature must be a positive number, got 0.0"),
    (["{snap}", "--samles", "8"], "error: unrecognized arguments: --samles 8"),
    (["{snap}", "--device", "tpu"], "error: device must be 'auto', 'cpu' or 'cuda', got 'tpu'"),
    (["{snap}", "--logn_attention", "1"], "error: --logn_attention must be 0 (off) or a sequence length of 2 or more, "
                                          "got 1"),
    (["{snap}", "--attention_window", "-2"], "error: --attention_window must be 0 (off) or a number of position ids "
                                             "of 1 or more, got -2"),
    (["{snap}", "--attention_globals"], "error: --attention_globals keeps tokens visible through a window; pass "
                                        "--attention_window W too"),
    ([], "error: no file to evaluate"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, snapshot_file, capsys):
    code, stdout, stderr = command([str(snapshot_file) if a == "{snap}" else a for a in args], capsys)
    assert code == 2 and stderr.startswith(message) and len(stderr.strip().splitlines()) == 1, stderr


def test_the_module_runs_as_a_command():
    """python -m rl.evaluate: its help, and a missing file's one line with no traceback."""
    run = lambda *args: subprocess.run([sys.executable, "-m", "rl.evaluate", *args], cwd=REPO, capture_output=True,
                                       text=True, timeout=120)
    missing = run("no/such/rl_snapshot_1.pt")
    assert missing.returncode == 2 and missing.stderr == "error: snapshot no/such/rl_snapshot_1.pt does not exist\n"
    assert main(["--help"]) == 0


def test_numbers_that_blow_up_are_one_line_and_exit_1(snapshot_file, capsys):
    """Logits over a temperature so small that they overflow: no number is reported from them."""
    code, stdout, stderr = command([snapshot_file, "--num", 10, "--samples", 2, "--k", 1, "--temperature", 1e-45],
                                   capsys)
    assert code == 1 and stderr.startswith("error: non-finite logits while sampling at temperature 1e-45")
    assert len(stderr.strip().splitlines()) == 1 and stdout == ""


@pytest.fixture(scope="module")
def long_file(tmp_path_factory):
    """The RL snapshot of a tiny model of the task of many lengths (1-4 digits, coupled ids), taught 150 supervised
    steps at the widths training draws: right at some lengths, not all."""
    trainer = make_trainer(rl_ndigits="1-4", eval_ndigits="2,4", positions="coupled", max_position_offset=3,
                           n_position=16, problem_sampler="uniform", rl_temperature=0.8)
    optimizer, rng = torch.optim.Adam(trainer.model.parameters(), lr=3e-3), np.random.default_rng(0)
    for step in range(150):
        trainer.env.set_width(trainer.env.draw_width(rng))
        teacher_forced_step(trainer.model, trainer.env, optimizer, *trainer.env.sample_operands(64, rng), "cpu",
                            rng=rng)
    trainer.model.eval()
    path = tmp_path_factory.mktemp("long") / "rl_snapshot_3.pt"
    torch.save(trainer.state_dict(), path)
    return trainer, path


def test_a_file_of_many_lengths_is_evaluated_at_each_length(long_file, tmp_path, capsys):
    trainer, path = long_file
    out = tmp_path / "long.json"
    code, stdout, stderr = command([path, "--ndigits", 3, 1, "--num", 40, "--samples", 8, "--k", 1, 8, "--out", out],
                                   capsys)
    assert code == 0, stderr
    report = json.loads(out.read_text())
    assert list(report["by_length"]) == ["1", "3"] and report["by_length"]["3"]["num_problems"] == 40
    assert report["num_problems"] == 40 + report["by_length"]["1"]["num_problems"]  # (1 digit: every test pair, 12)
    wrong_ends = {}
    for L, numbers in report["by_length"].items():  # each length's own fixed set, at its own width
        env = environments(trainer.config.task_args(), [int(L)])["eval"][int(L)]
        a, b = env.eval_operands(40, "test")
        greedy = evaluate(trainer.model, env, a, b, trainer.info)
        assert env.width == int(L) and numbers["greedy_accuracy"] == greedy.accuracy
        assert numbers["greedy_digit_errors"] == greedy.digit_errors and len(greedy.digit_errors) == int(L) + 1
        line = f"  {L + ' digits':>10}: {fifths(greedy.digit_errors)}   end {greedy.end_errors:.3f}"
        assert line in stdout.splitlines() and numbers["greedy_end_errors"] == greedy.end_errors
        prompts, targets = env.encode(a, b)  # answers not ended where they should be, counted by hand
        answers = trainer.model.generate(prompts, env.answer_len, greedy=True, end_token=env.end_token,
                                         pad_token=env.pad_token, pos=eval_position_ids(env, len(prompts), "cpu"))
        assert greedy.end_errors == (answers[:, -1] != targets[:, -1]).double().mean().item()
        wrong_ends[L] = greedy.end_errors
        p = answer_probability(trainer.model, env, *env.encode(a, b), 0.8)
        assert numbers["pass_at_k"]["8"]["exact"] == pytest.approx(exact_pass_at_k(p, 8).mean().item())
    assert 0 < wrong_ends["3"] < 1  # (this model stops in the wrong place on some 3-digit sums, not all)
    mean = (report["by_length"]["1"]["greedy_accuracy"] + report["by_length"]["3"]["greedy_accuracy"]) / 2
    assert report["greedy_accuracy"] == pytest.approx(mean) and 0 < mean < 1  # taught: right often, not always
    assert "   3 digits: greedy" in stdout and (tmp_path / "long.png").read_bytes()[:4] == b"\x89PNG"
    # no --ndigits: the lengths its run evaluated (eval_ndigits 2,4)
    code, _, stderr = command([path, "--num", 10, "--samples", 2, "--k", 1, "--out", tmp_path / "d.json"], capsys)
    assert code == 0, stderr
    assert list(json.loads((tmp_path / "d.json").read_text())["by_length"]) == ["2", "4"]


@pytest.mark.parametrize("setting, value, globals_, said", [
    ("logn_attention", 3, False, "attention log-n scaled past 3 tokens"),
    ("attention_window", 1, False, "attention within 1 position ids"),
    ("attention_window", 1, True, "attention within 1 position ids and to the non-digit tokens")])
def test_model_settings_evaluate_the_files_weights_read_another_way(setting, value, globals_, said, long_file,
                                                                    tmp_path, capsys):
    """--logn_attention L (attention scaled past L tokens) and --attention_window W (each token reads the tokens
    whose ids are within W of its own; with --attention_globals the non-digit ones too): the file's weights in a
    model built with the setting (exact pass@1 as that model gives it, by hand), said in the table and the JSON;
    0 is the file as is."""
    trainer, path = long_file
    env = environments(trainer.config.task_args(), [2])["eval"][2]
    problems = env.encode(*env.eval_operands(40, "test"))
    args = {**trainer.config.model_args(), setting: value}
    if globals_:  # "+", "=", the end and the pad (ids 10-13) stay visible through the window
        assert args["vocab_size"] == 14
        args["global_tokens"] = (10, 11, 12, 13)
    changed = GPT(GPTConfig(**args))
    changed.load_state_dict(trainer.model.state_dict())
    p = {name: answer_probability(model.eval(), env, *problems, 0.8).mean().item()
         for name, model in (("changed", changed), ("plain", trainer.model))}
    assert abs(p["changed"] - p["plain"]) > 1e-5  # (the check below, to 1e-6, can tell them apart)
    for v, name in ((value, "changed"), (0, "plain")):
        out = tmp_path / f"{v}.json"
        flags = ["--attention_globals"] if globals_ and v else []
        code, stdout, stderr = command([path, "--ndigits", 2, "--num", 40, "--samples", 2, "--k", 1,
                                        f"--{setting}", v, *flags, "--out", out], capsys)
        report = json.loads(out.read_text())
        assert code == 0 and report[setting] == v and report["attention_globals"] == bool(flags), stderr
        assert report["by_length"]["2"]["pass_at_k"]["1"]["exact"] == pytest.approx(p[name], abs=1e-6)
        assert (said in stdout.splitlines()[0]) == (v == value)
        assert ("non-digit tokens" in stdout.splitlines()[0]) == bool(flags)


def test_lengths_the_file_cannot_take_are_one_line(long_file, snapshot_file, capsys):
    _, path = long_file
    code, _, stderr = command([path, "--ndigits", 40], capsys)
    assert code == 2 and stderr == ("error: 40 digits need position ids up to 42, but the model of "
                                    f"{path} has n_position=16; evaluate shorter lengths\n")
    code, _, stderr = command([snapshot_file, "--ndigits", 3], capsys)
    assert code == 2 and stderr.startswith("error: --ndigits needs a file of the task of many lengths (rl_ndigits); ")
    code, _, stderr = command([path, "--ndigits", 0], capsys)
    assert code == 2 and stderr == "error: --ndigits takes operand lengths of 1 or more, got 0\n"


def test_what_rl_adds_reports_pass_at_k_of_each_arm_from_the_run_folder(taught, tmp_path):
    """benchmark --what_rl_adds: the warm start and RL's last snapshot read from the run's folder, the
    supervised model as given; each arm's numbers are evaluate_set's for that model, exact and sampled."""
    import argparse
    from rl import run_dir
    from rl.evaluate import evaluate_set
    from rl.tools.benchmark import PASS_KS, PASS_SAMPLES, pass_at_k_arms
    config, env = taught.config, taught.env
    assert pass_at_k_arms(config, env, str(tmp_path), taught.model) == {}  # nothing in the folder: nothing to say
    scratch = make_trainer(rl_temperature=0.8, seed=5).model  # the "warm start": other weights than the taught ones
    torch.save({"kind": "warm_start", "model": scratch.state_dict(), "model_args": config.model_args(),
                "task": config.task_args()}, run_dir.warm_start_path(str(tmp_path)))
    torch.save(taught.state_dict(), tmp_path / "rl_snapshot_7.pt")
    out = pass_at_k_arms(config, env, str(tmp_path), scratch)  # the "supervised" arm: the scratch weights again
    assert out["pass_at_k_samples"] == PASS_SAMPLES and list(out["pass_at_k"]) == ["warm_start", "rl", "sft"]
    args = argparse.Namespace(batch_size=config.eval_batch_size, split="test", seed=config.seed, samples=PASS_SAMPLES,
                              temperature=0.8, k=list(PASS_KS))
    a, b = env.eval_operands(config.num_eval, "test")
    assert out["pass_at_k"]["rl"] == evaluate_set(taught.model, env, a, b, args, "cpu")[0]["pass_at_k"]
    assert out["pass_at_k"]["warm_start"] == out["pass_at_k"]["sft"]  # the same weights, the same seeded samples
    rl, start = out["pass_at_k"]["rl"], out["pass_at_k"]["warm_start"]
    assert list(rl) == ["1", "8", "64"] and rl["1"]["exact"] is not None and rl["64"]["exact"] >= rl["1"]["exact"]
    assert rl["1"]["exact"] > start["1"]["exact"]  # the taught weights write the sums, the scratch ones do not


def test_what_rl_adds_pass_table_gives_exact_figures_or_sampled_ones_with_their_error():
    from rl.tools.benchmark import adds_pass_table
    exact = lambda p: {k: {"sampled": p, "sampled_stderr": 0.01, "exact": p} for k in ("1", "8", "64")}
    sampled = lambda p: {k: {"sampled": p, "sampled_stderr": 0.012, "exact": None} for k in ("1", "8", "64")}
    row = lambda config, seed, arm: {"config": config, "sampler": "default", "seed": seed, "processes": 1,
                                     "pass_at_k": {"warm_start": arm(0.5), "rl": arm(0.75), "sft": arm(0.25)}}
    text = adds_pass_table([row("AdderRLConfig", 0, exact), row("ScarceMultiplierRLConfig", 0, sampled)])
    assert "| AdderRLConfig | " in text and "| + RL | exact | 0.750 | 0.750 | 0.750 |" in text
    assert "| + supervised, RL's seconds | sampled | 0.250 +- 0.012 | 0.250 +- 0.012 | 0.250 +- 0.012 |" in text
