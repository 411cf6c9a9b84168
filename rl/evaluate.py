"""Held-out evaluation: greedy decoding on a fixed evaluation set, scored by the rule rewards.

Every accuracy this project reports comes from `evaluate`, on the test split; the warm start's
stopping rule (and any other choice) calls it on the validation split. "Right" is the same
definition as the reward's (rl/math_reward.py): `accuracy` is final-answer exact match,
`steps_accuracy` the share of answers whose shown work is all right (None when no work is shown).
The evaluation set is split across ranks and the counts are summed, so 1 and N processes report
the same number. An answer decoded from non-finite logits (weights that overflowed) is no answer:
evaluation then raises TrainingError on every rank instead of reporting a number.

Beyond greedy accuracy, how often sampling finds the right answer (pass@k), for any snapshot or warm
start file, on the fixed evaluation set of the test (or validation) split:

    python -m rl.evaluate out/AdderRLConfig/rl_snapshot_200.pt --split test --num 1000 --k 1 8 64 --samples 64 --show 10
    python -m rl.evaluate out/LongAdderRLConfig/rl_snapshot_200.pt --ndigits 10 20 40 100 --k 1 8 64
    python -m rl.evaluate out/LongAdderRLConfig/rl_snapshot_200.pt --ndigits 40 100 --logn_attention 24
    python -m rl.evaluate out/LongAdderRLConfig/rl_snapshot_200.pt --ndigits 100 --attention_window 8 \
        --attention_globals
    python -m rl.evaluate --help

A file of the task of many lengths (rl_ndigits) is evaluated at each length of --ndigits (default: the
lengths its run evaluated), each on its own fixed set; the report gives every length's numbers and
their mean, and the PNG accuracy and pass@k against length. --logn_attention L evaluates the file's weights
with attention's log-n scaling past L tokens, --attention_window W with each token reading only the tokens
whose position ids are within W of its own (and, with --attention_globals, the non-digit tokens; model/gpt.py),
whatever the file was trained with.

pass@k is the chance that at least one of k answers sampled at the temperature is right, averaged over
problems, estimated two ways: `pass_at_k_unbiased` from n sampled answers per problem (Chen et al.
2021), and `exact_pass_at_k` from the probability p that one sample is right, which one teacher-forced
pass gives exactly (`answer_probability`), since the right answer is one token sequence: no sampling
noise. With show_work=true many answers (any shown work) share the right final answer, so p is not one
sequence's probability and only the sampled figures are reported. Where greedy answers go wrong: the
share of answers wrong at each final-answer digit (EvalResult.digit_errors; the table gives it by fifth of
the answer, so a length's errors show whether they pile up at the top columns), and at the end token. The
command prints a table, writes every number to a JSON file (and pass@k against k to a PNG when matplotlib
is installed).
"""

import argparse
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

import torch
from tqdm import tqdm

from model.gpt import check_attention_window, check_logn_attention, window_global_tokens
from rl import dist, seeding
from rl.algorithms import answer_logits, answer_mask, masked, token_logprobs
from rl.errors import ConfigError, TrainingError  # (TrainingError re-exported: from rl.evaluate import it works)
from rl.long_env import environments, parse_lengths
from rl.math_env import MathEnvironment
from rl.math_reward import digit_match, exact_match, final_digits, steps_match
from rl.run_dir import WriteError, write_json
from rl.snapshot import load_snapshot, model_from_snapshot


@dataclass
class EvalResult:
    accuracy: float  # share of problems whose final answer is exactly right
    digit_accuracy: float  # share of final-answer digits that are right
    steps_accuracy: Optional[float]  # share whose shown work is all right; None without show_work
    num_problems: int
    split: str = "test"
    mistakes: list = field(default_factory=list)  # a few "claims 12+34=47, truth 46" lines (rank 0's share)
    by_length: dict = field(default_factory=dict)  # operand length -> its set's accuracy (eval_ndigits); else {}
    # share of answers wrong at each final-answer digit, in the order written (least significant first when
    # reversed): where long answers go wrong; [] for a mean over lengths (each length has its own digits)
    digit_errors: list = field(default_factory=list)
    end_errors: float = 0.0  # share of answers whose last token is not the end token where it should be

    @classmethod
    def mean_over_lengths(cls, results: dict) -> "EvalResult":
        """One result of several lengths' ({length: EvalResult}): each accuracy the mean over the lengths (every
        length counts alike, however many problems its set holds), the problems summed, each length's accuracy
        kept, and the mistakes of the last (longest) length, the most telling."""
        mean = lambda name: sum(getattr(r, name) for r in results.values()) / len(results)
        parts = list(results.values())
        return cls(mean("accuracy"), mean("digit_accuracy"), None, sum(r.num_problems for r in parts), parts[0].split,
                   parts[-1].mistakes, {length: r.accuracy for length, r in results.items()})

    def summary(self) -> str:
        name = "held-out" if self.split == "test" else self.split
        steps = f", steps all right {self.steps_accuracy:.4f}" if self.steps_accuracy is not None else ""
        lengths = f" [by length: {self.lengths_text()}]" if self.by_length else ""
        return (f"{name} accuracy {self.accuracy:.4f} ({self.num_problems} problems, greedy), "
                f"digit accuracy {self.digit_accuracy:.4f}{steps}{lengths}")

    def lengths_text(self) -> str:
        return ", ".join(f"{length}: {accuracy:.3f}" for length, accuracy in self.by_length.items())

    def metrics(self, prefix: str = "eval") -> dict:
        out = {f"{prefix}/accuracy": self.accuracy, f"{prefix}/digit_accuracy": self.digit_accuracy,
               **{f"{prefix}/accuracy_len{length}": accuracy for length, accuracy in self.by_length.items()}}
        if self.steps_accuracy is not None:
            out[f"{prefix}/steps_accuracy"] = self.steps_accuracy
        return out


def eval_position_ids(env, n: int, device) -> Optional[torch.Tensor]:
    """The ids (n, P + A) every evaluation reads: the environment's at its fixed evaluation offsets, so an
    evaluation is a fixed function of the weights (None for the fixed-length tasks: the model's own positions)."""
    pos = env.position_ids(n)
    return None if pos is None else pos.to(device)


def operand(x, i: int):
    """Problem i's operand as describe_mistake takes it: a Python int, or a digit row (rl/long_env.py)."""
    return x[i] if getattr(x, "ndim", 1) == 2 else int(x[i])


def wrong_end(env, targets: torch.Tensor, generated: torch.Tensor) -> int:
    """How many answers (B, A) whose last token should be the end token have another one there (none where the
    answer has no end token: known_length, rl/long_env.py)."""
    ends = targets[:, -1] == env.end_token
    return int((ends & (generated[:, -1] != env.end_token)).sum())


@torch.no_grad()
def evaluate(model, env: MathEnvironment, a, b, info: dist.DistInfo, *, batch_size: int = 500,
             num_mistakes: int = 3, split: str = "test") -> EvalResult:
    """Greedy answers for the pairs (a, b) (int arrays (N,)) of `split`; model may be DDP-wrapped."""
    model = dist.unwrap(model)
    was_training = model.training
    model.eval()
    a, b = a[info.rank::info.world_size], b[info.rank::info.world_size]
    digits = final_digits(env)  # as digit_match reads them
    # exact, right digits, steps all right, problems, non-finite, wrong ends; then answers wrong at each final digit
    counts = torch.zeros(6 + digits.stop - digits.start, dtype=torch.float64)
    mistakes = []
    for i in range(0, len(a), batch_size):
        prompts, targets = env.encode(a[i:i + batch_size], b[i:i + batch_size])
        generated, nonfinite = model.generate(prompts.to(info.device), env.answer_len, greedy=True,
                                              end_token=env.end_token, pad_token=env.pad_token, with_nonfinite=True,
                                              pos=eval_position_ids(env, len(prompts), info.device))
        # one read of the device a batch: the answers, and whether each met non-finite logits
        generated, nonfinite = torch.cat([generated, nonfinite[:, None].to(generated.dtype)], dim=1).cpu().split(
            [env.answer_len, 1], dim=1)
        exact = exact_match(env, targets, generated)
        counts += torch.tensor([exact.sum().item(), digit_match(env, targets, generated).sum().item(),
                                steps_match(env, targets, generated).sum().item(), len(exact),
                                nonfinite.sum().item(), wrong_end(env, targets, generated),
                                *(generated[:, digits] != targets[:, digits]).sum(dim=0).tolist()], dtype=torch.float64)
        for j in torch.nonzero(exact == 0).flatten().tolist()[: num_mistakes - len(mistakes)]:
            mistakes.append(env.describe_mistake(operand(a, i + j), operand(b, i + j), generated[j]))
    model.train(was_training)
    counts = dist.sum_on_host(counts, info.device).tolist()
    exact, right_digits, steps, n, nonfinite, wrong_ends, *wrong_at = counts
    if nonfinite:  # the same sum on every rank: every rank raises
        raise TrainingError(f"non-finite logits in greedy evaluation on the {split} split ({nonfinite:.0f} of {n:.0f} "
                            f"problems): the policy's weights have overflowed; lower learning_rate (sft_learning_rate "
                            f"in the warm start), keep grad_clip on, or check the file init_from loaded")
    return EvalResult(exact / n, right_digits / n, steps / n if env.show_work else None, int(n), split, mistakes,
                      digit_errors=[w / n for w in wrong_at], end_errors=wrong_ends / n)


# ---- pass@k: is one of k sampled answers right? -----------------------------------------------------
def pass_at_k_unbiased(n: int, c, k: int) -> torch.Tensor:
    """The unbiased estimate of pass@k from n sampled answers of which c are right (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1): 1 - C(n - c, k) / C(n, k), computed as
    1 - prod_{i=n-c+1}^{n} (1 - k / i), which never forms the huge binomials. c: counts (B,) (or an
    int) -> (B,) float64. 1 <= k <= n; where n - c < k every draw of k holds a right one, and a factor
    (i = k) is 0."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k} and n={n}")
    c = torch.as_tensor(c, dtype=torch.int64)
    i = torch.arange(1, n + 1, dtype=torch.float64)  # (n,)
    factors = torch.where(i > (n - c)[..., None], 1.0 - k / i, torch.ones_like(i))  # (B, n)
    return 1.0 - factors.prod(dim=-1)


def exact_pass_at_k(p: torch.Tensor, k: int) -> torch.Tensor:
    """pass@k of a problem whose one right answer a sample writes with probability p: 1 - (1 - p)^k,
    as -expm1(k log1p(-p)), exact for p near 0 or 1. p (B,) -> (B,) float64."""
    return -torch.expm1(k * torch.log1p(-p.double()))


@torch.no_grad()
def answer_probability(model, env: MathEnvironment, prompts: torch.Tensor, targets: torch.Tensor,
                       temperature: float) -> torch.Tensor:
    """The probability that sampling at `temperature` (GPT.generate) writes exactly `targets`, from one
    teacher-forced pass: exp of the sum over the answer's tokens of log softmax(logits / T) at the
    target token. The sum stops at the end token, included: generation pads after it without drawing.
    prompts (B, P), targets (B, A) -> (B,) float64."""
    was_training = model.training
    model.eval()
    logits = answer_logits(model, torch.cat([prompts, targets], dim=1), env.prompt_len, temperature,
                           pos=eval_position_ids(env, len(prompts), prompts.device))  # (B, A, V)
    logp = token_logprobs(logits, targets).double()  # (B, A)
    model.train(was_training)
    return masked(logp, answer_mask(targets, env.end_token)).sum(dim=1).exp()


@torch.no_grad()
def count_right_samples(model, env: MathEnvironment, a, b, *, num_samples: int, temperature: float,
                        generator: torch.Generator, batch_size: int = 4096, progress: bool = False) -> torch.Tensor:
    """c (N,) int64: how many of num_samples answers sampled at `temperature` for each problem (a, b)
    (int arrays (N,)) are exactly right (final-answer exact match, the reward's definition). At most
    batch_size answers are generated at once (so memory stays small whatever num_samples), which with
    the generator fixes every draw. TrainingError if an answer met non-finite logits."""
    was_training = model.training
    model.eval()
    device, per_batch = generator.device, max(1, batch_size // num_samples)  # problems per generate call
    counts = []
    for i in tqdm(range(0, len(a), per_batch), desc="sampling", unit="batch", disable=not progress, leave=False):
        prompts, targets = env.encode(a[i:i + per_batch], b[i:i + per_batch])
        generated, nonfinite = model.generate(prompts.to(device), env.answer_len, temperature=temperature,
                                              end_token=env.end_token, pad_token=env.pad_token, generator=generator,
                                              num_samples=num_samples, with_nonfinite=True,
                                              pos=eval_position_ids(env, len(prompts), device))
        if nonfinite.any():
            raise TrainingError(f"non-finite logits while sampling at temperature {temperature} "
                                f"({int(nonfinite.sum())} answers): raise --temperature, or check the file's weights")
        right = exact_match(env, targets.repeat_interleave(num_samples, dim=0), generated.cpu())  # (B * n,)
        counts.append(right.view(-1, num_samples).sum(dim=1).long())
    model.train(was_training)
    return torch.cat(counts)


def p_right(model, env: MathEnvironment, a, b, *, temperature: float, batch_size: int) -> torch.Tensor:
    """answer_probability of each problem's right answer, batch_size problems a pass: (a, b) int arrays
    (N,) -> (N,) float64 on the CPU. TrainingError if the logits were not finite."""
    device, parts = next(model.parameters()).device, []
    for i in range(0, len(a), batch_size):
        prompts, targets = env.encode(a[i:i + batch_size], b[i:i + batch_size])
        parts.append(answer_probability(model, env, prompts.to(device), targets.to(device), temperature).cpu())
    p = torch.cat(parts)
    if not torch.isfinite(p).all():
        raise TrainingError(f"non-finite logits in the teacher-forced pass at temperature {temperature}: "
                            f"raise --temperature, or check the file's weights")
    return p


def k_grid(n: int) -> list:
    """Some k from 1 to n, about evenly spaced in log k (the plot's x axis), n included."""
    return sorted({min(n, round(2 ** (j / 2))) for j in range(int(2 * math.log2(n)) + 1)} | {n})


def pass_at_k_table(ks: list, c: torch.Tensor, n: int, p: Optional[torch.Tensor]) -> dict:
    """For each k: the sampled pass@k (mean over problems of the unbiased estimate from c (N,) right of
    n), its standard error over problems, and the exact one (mean of 1 - (1 - p)^k; None without p)."""
    out = {}
    for k in ks:
        per_problem = pass_at_k_unbiased(n, c, k)
        se = per_problem.std().item() / math.sqrt(len(c)) if len(c) > 1 else float("nan")
        out[k] = dict(sampled=per_problem.mean().item(), sampled_stderr=se,
                      exact=exact_pass_at_k(p, k).mean().item() if p is not None else None)
    return out


# ---- the command: python -m rl.evaluate FILE ----------------------------------------------------------
class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one-line ConfigErrors (argparse's own prints the usage and exits)."""

    def error(self, message):
        raise ConfigError(f"{message}; see python -m rl.evaluate --help")


def parse_args(argv: list) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m rl.evaluate", add_help=False, description=(
        "Greedy accuracy, and pass@k sampled and exact, of a snapshot or warm start file on the fixed "
        "evaluation set of a held-out split; a table on stdout, every number in a JSON file, a PNG of pass@k."),
        epilog="example: python -m rl.evaluate out/AdderRLConfig/rl_snapshot_200.pt --k 1 8 64 --samples 64 --show 10")
    parser.add_argument("file", nargs="?", help="an RL snapshot (rl_snapshot_*.pt) or a warm start (warm_start.pt)")
    parser.add_argument("--split", default="test", help="test (default) or validation: the numbers are held out")
    parser.add_argument("--num", type=int, default=None, help="problems: the first NUM of the split's fixed set "
                        "(default: the file's num_eval, the set the run reported on; else 1000)")
    parser.add_argument("--ndigits", type=int, nargs="+", default=None, help="operand lengths to evaluate, each on its "
                        "own set (a file of the task of many lengths only; default: the lengths its run evaluated)")
    parser.add_argument("--samples", type=int, default=64, help="answers sampled per problem (n of pass@k)")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 8, 64], help="the k of pass@k, each at most --samples")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature (default: the file's rl_temperature, else 1.0)")
    parser.add_argument("--show", type=int, default=0, help="print this many problems with the greedy answer")
    parser.add_argument("--out", default=None, help="the JSON file (default: FILE's stem + .eval.json beside it); "
                                                    "the PNG goes beside it")
    parser.add_argument("--seed", type=int, default=0, help="seeds the sampling: the same numbers every run")
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu or cuda")
    parser.add_argument("--batch_size", type=int, default=4096,
                        help="answers a forward pass takes at once (bounds memory)")
    parser.add_argument("--logn_attention", type=int, default=None, help="attention's log-n scaling past L tokens "
                        "(model/gpt.py logn_scale; 0: off; default: the file's own, off unless it was trained with it)")
    parser.add_argument("--attention_window", type=int, default=None, help="each token reads only the tokens whose "
                        "position ids are within W of its own (model/gpt.py window_mask; 0: off; default: the file's "
                        "own, off unless it was trained with it)")
    parser.add_argument("--attention_globals", action="store_true", help="with a window, every query reads the "
                        "non-digit tokens (+, =) too, as attention_globals=true does in training")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    args = parser.parse_args(argv)
    args.help_text = parser.format_help()
    return args


def check_args(args: argparse.Namespace):
    """ConfigError (one line) for an argument no evaluation can take."""
    if args.file is None:
        raise ConfigError("no file to evaluate; pass a snapshot or warm start file: python -m rl.evaluate FILE")
    if args.split == "train":
        raise ConfigError("--split=train is refused: the reported numbers are held out; use test or validation")
    if args.split not in ("test", "validation"):
        raise ConfigError(f"unknown split {args.split!r}; use test (the default) or validation")
    for name in ("num", "samples", "batch_size"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            raise ConfigError(f"--{name} must be positive, got {getattr(args, name)}")
    bad = [k for k in args.k if not 1 <= k <= args.samples]
    if bad:
        raise ConfigError(f"--k {bad[0]} is outside 1..--samples={args.samples}: pass@k needs at least k samples; "
                          f"raise --samples or lower --k")
    if args.temperature is not None and not (math.isfinite(args.temperature) and args.temperature > 0):
        raise ConfigError(f"--temperature must be a positive number, got {args.temperature}")
    if args.ndigits is not None and min(args.ndigits) < 1:
        raise ConfigError(f"--ndigits takes operand lengths of 1 or more, got {min(args.ndigits)}")
    if args.show < 0 or args.seed < 0:
        raise ConfigError(f"--{'show' if args.show < 0 else 'seed'} must be 0 or more")
    if args.attention_globals and not args.attention_window:
        raise ConfigError("--attention_globals keeps tokens visible through a window; pass --attention_window W too")
    for name, check in (("logn_attention", check_logn_attention), ("attention_window", check_attention_window)):
        if getattr(args, name) is not None:
            try:
                check(getattr(args, name))
            except ValueError as e:
                raise ConfigError(f"--{e}") from None


def load_for_evaluation(path: str, ndigits=None, model_overrides=None):
    """(model on the CPU, {length: environment} to evaluate (None: the task's one length), the snapshot dict)
    of a snapshot or warm start file; ndigits: the lengths asked for (the task of many lengths only);
    model_overrides: GPTConfig settings in place of the file's ({"logn_attention": 24}; None values: the file's)."""
    snap = load_snapshot(path)
    overrides = {k: v for k, v in (model_overrides or {}).items() if v is not None}
    if overrides.pop("attention_globals", None):  # the tokens the window never hides, as a run sets them
        overrides["global_tokens"] = window_global_tokens(snap["model_args"]["vocab_size"])
    if overrides:  # (inference-time changes: the weights are the file's)
        snap = {**snap, "model_args": {**snap["model_args"], **overrides}}
    task = snap.get("task")
    if not isinstance(task, dict):
        raise ConfigError(f"{path} does not say which task it was trained on, so it cannot be evaluated")
    if ndigits and not task.get("rl_ndigits"):
        raise ConfigError(f"--ndigits needs a file of the task of many lengths (rl_ndigits); {path} is "
                          f"{task.get('ndigit')}-digit {task.get('task')} only: leave --ndigits out")
    try:  # the lengths asked for, else those its run evaluated
        lengths = sorted(set(ndigits or parse_lengths((snap.get("config") or {}).get("eval_ndigits") or "")))
        envs = environments(task, lengths)["eval"]
    except (TypeError, ValueError, KeyError) as e:
        raise ConfigError(f"{path} names a task this version cannot build ({e})") from None
    return model_from_snapshot(snap), envs, snap


def check_fits(model, envs: dict, path: str):
    """ConfigError (one line) for an evaluated length whose position ids the model has no embedding for."""
    n_position = model.config.n_position
    for length, env in envs.items():
        if getattr(env, "num_position_ids", 0) > n_position:  # (a fixed-length task's file fits its own model)
            raise ConfigError(f"{length} digits need position ids up to {env.num_position_ids - 1}, but the model "
                              f"of {path} has n_position={n_position}; evaluate shorter lengths")


def evaluate_lengths(model, envs: dict, args: argparse.Namespace, device):
    """evaluate_set on each environment's fixed set: its numbers (with several lengths, their mean and
    "by_length"), and the --show lines (of the longest length)."""
    per_length, shown = {}, []
    for length, env in envs.items():
        a, b = env.eval_operands(args.num, args.split)
        numbers, c, p = evaluate_set(model, env, a, b, args, device)
        per_length[length] = numbers
        shown = show_lines(model, env, a, b, c, p, num_show=args.show, num_samples=args.samples)
    if list(per_length) == [None]:
        return per_length[None], shown
    return {**mean_numbers(list(per_length.values())), "by_length": {str(L): n for L, n in per_length.items()}}, shown


def mean_numbers(parts: list) -> dict:
    """Several lengths' numbers (evaluate_set's) as one: every accuracy and pass@k the mean over the lengths
    (each length alike), a standard error that of that mean, the problems summed."""
    mean = lambda values: sum(values) / len(values) if None not in values else None
    stderr = lambda key, k: math.sqrt(sum(n[key][k]["sampled_stderr"] ** 2 for n in parts)) / len(parts)
    table = lambda key: {k: dict(sampled=mean([n[key][k]["sampled"] for n in parts]), sampled_stderr=stderr(key, k),
                                 exact=mean([n[key][k]["exact"] for n in parts])) for k in parts[0][key]}
    return {"num_problems": sum(n["num_problems"] for n in parts),
            **{key: mean([n[key] for n in parts]) for key in ("greedy_accuracy", "greedy_digit_accuracy",
                                                              "greedy_steps_accuracy", "mean_p_right")},
            "exact_note": parts[0]["exact_note"], "pass_at_k": table("pass_at_k"),
            "pass_at_k_curve": table("pass_at_k_curve")}


def output_paths(args: argparse.Namespace):
    """(JSON path, PNG path); ConfigError now, not after the evaluation, if the folder is not writable."""
    out = args.out or os.path.splitext(args.file)[0] + ".eval.json"
    folder = os.path.dirname(os.path.abspath(out))
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        raise ConfigError(f"cannot write {out}: {folder} is not a writable folder; pass --out elsewhere")
    return out, (out[:-len(".json")] if out.endswith(".json") else out) + ".png"


def evaluate_set(model, env: MathEnvironment, a, b, args: argparse.Namespace, device):
    """Every number of one evaluation set (a, b) (int arrays (N,)): greedy, pass@k sampled and exact
    (exact with show_work=false only: see the module docstring); and per problem, the right samples
    c (N,) and p(right) (N,) (None with show_work), for --show."""
    info = dist.DistInfo(device=device)
    greedy = evaluate(model, env, a, b, info, batch_size=args.batch_size, num_mistakes=0, split=args.split)
    generator = seeding.torch_generator(args.seed, 0, 0, seeding.SAMPLING, device)
    c = count_right_samples(model, env, a, b, num_samples=args.samples, temperature=args.temperature,
                            generator=generator, batch_size=args.batch_size, progress=sys.stderr.isatty())
    p = None if env.show_work else p_right(model, env, a, b, temperature=args.temperature,
                                           batch_size=args.batch_size)
    asked, curve = sorted(set(args.k)), k_grid(args.samples)
    table = pass_at_k_table(sorted(set(asked) | set(curve)), c, args.samples, p)
    numbers = {"num_problems": len(a), "greedy_accuracy": greedy.accuracy,
               "greedy_digit_accuracy": greedy.digit_accuracy, "greedy_steps_accuracy": greedy.steps_accuracy,
               "greedy_digit_errors": greedy.digit_errors, "greedy_end_errors": greedy.end_errors,
               "pass_at_k": {str(k): table[k] for k in asked},
               "mean_p_right": p.mean().item() if p is not None else None,
               "exact_note": None if p is not None else EXACT_NOTE,
               "pass_at_k_curve": {str(k): table[k] for k in curve}}  # what the PNG draws
    return numbers, c, p


EXACT_NOTE = ("exact pass@k not reported: with show_work=true many answers (any shown work) share the right final "
              "answer, so p(right) is not one sequence's probability")


def show_lines(model, env: MathEnvironment, a, b, c: torch.Tensor, p: Optional[torch.Tensor], *, num_show: int,
               num_samples: int) -> list:
    """A line for each of the first num_show problems (a, b) (int arrays (N,)): the prompt, the greedy
    answer as written, the number it means (written least-significant digit first when reverse_answer),
    right or the mistake, p(right) (N,) (None: not shown) and how many of num_samples sampled answers c
    (N,) were right:  "37+48= 580$  (85)  right  p(right)=0.93  15/16 sampled right"."""
    if not num_show:
        return []
    a, b, device = a[:num_show], b[:num_show], next(model.parameters()).device
    prompts, targets = env.encode(a, b)
    was_training = model.training
    model.eval()
    greedy = model.generate(prompts.to(device), env.answer_len, greedy=True, end_token=env.end_token,
                            pad_token=env.pad_token, pos=eval_position_ids(env, len(prompts), device)).cpu()
    model.train(was_training)
    right = exact_match(env, targets, greedy)
    lines = []
    for j in range(len(a)):
        value = env.decode_answer(greedy[j])
        verdict = "right" if right[j] else f"wrong: {env.describe_mistake(operand(a, j), operand(b, j), greedy[j])}"
        exact = f"  p(right)={p[j]:.3g}" if p is not None else ""
        lines.append(f"  {env.decode_text(prompts[j])} {env.decode_text(greedy[j])}  "
                     f"({value if value is not None else 'malformed'})  {verdict}{exact}  "
                     f"{int(c[j])}/{num_samples} sampled right")
    return lines


def report_table(report: dict) -> str:
    """The numbers of `report` (main's JSON) as the lines the command prints."""
    r, step = report, f", step {report['step']}" if report.get("step") is not None else ""
    task = r["task"]
    what = f"lengths {task['rl_ndigits']} in RL" if task.get("rl_ndigits") else f"ndigit={task['ndigit']}"
    lines = [f"{r['file']} ({r['kind']}{step}): {task['task']}, {what}; "
             f"{r['num_problems']} {r['split']} problems; {r['device']}; {r['seconds']:.1f}s" + (
                 f"; attention log-n scaled past {r['logn_attention']} tokens" if r.get("logn_attention") else "") + (
                 f"; attention within {r['attention_window']} position ids" if r.get("attention_window") else "") + (
                 " and to the non-digit tokens" if r.get("attention_globals") else ""),
             f"greedy   accuracy {r['greedy_accuracy']:.4f}   digit accuracy {r['greedy_digit_accuracy']:.4f}" + (
                 f"   steps all right {r['greedy_steps_accuracy']:.4f}" if r["greedy_steps_accuracy"] is not None
                 else ""),
             f"pass@k at temperature {r['temperature']:g} ({r['temperature_from']}), {r['samples']} samples a problem, "
             f"seed {r['seed']}",
             f"  {'k':>5}  {'sampled':>8} {'+/- s.e.':>9}  {'exact':>8}"]
    for k, row in r["pass_at_k"].items():
        exact = f"{row['exact']:8.4f}" if row["exact"] is not None else f"{'-':>8}"
        lines.append(f"  {k:>5}  {row['sampled']:8.4f} {row['sampled_stderr']:9.4f}  {exact}")
    lines.append("  sampled: unbiased estimator from the samples (s.e. over problems); exact: 1 - (1 - p)^k, p = "
                 "p(right answer) from one teacher-forced pass" if r["exact_note"] is None else f"  {r['exact_note']}")
    if r.get("by_length"):  # (the numbers above are the mean over these lengths)
        ks = list(r["pass_at_k"])
        lines.append("by length (the lines above: their mean)   " + "  ".join(f"pass@{k} sampled/exact" for k in ks))
        for L, n in r["by_length"].items():
            cells = "  ".join(f"{n['pass_at_k'][k]['sampled']:.4f}/" + (
                f"{n['pass_at_k'][k]['exact']:.4f}" if n["pass_at_k"][k]["exact"] is not None else "-") for k in ks)
            lines.append(f"  {L:>4} digits: greedy {n['greedy_accuracy']:.4f}   {cells}")
    parts = r.get("by_length") or {None: r}
    lines.append("greedy digits wrong, by fifth of the answer's digits as written (reversed answers: least "
                 "significant first), and answers not ended where they should be")
    lines += [f"  {f'{L} digits' if L else 'all':>10}: {fifths(n['greedy_digit_errors'])}   end "
              f"{n['greedy_end_errors']:.3f}" for L, n in parts.items()]
    return "\n".join(lines)


def fifths(errors: list) -> str:
    """A digit error rate for each fifth of the answer's digits (fewer parts for a shorter answer): per-digit
    shares of wrong answers (EvalResult.digit_errors), averaged within each part."""
    parts = torch.tensor(errors, dtype=torch.float64).tensor_split(min(5, len(errors)))
    return " ".join(f"{part.mean().item():.3f}" for part in parts)


def write_plot(path: str, report: dict) -> Optional[str]:
    """pass@k against k (sampled, with its standard error, and exact) as a PNG; the path, or None
    with one line on stderr when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install -r requirements-tools.txt)", file=sys.stderr)
        return None
    lengths = report.get("by_length")
    fig, axes = plt.subplots(1, 2 if lengths else 1, figsize=(12 if lengths else 6, 4), squeeze=False)
    plot_pass_at_k(axes[0][0], report)
    if lengths:
        plot_lengths(axes[0][1], report)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_lengths(ax, report: dict):
    """Greedy accuracy and each asked pass@k (exact where there is one, else sampled) against operand length."""
    by_length = report["by_length"]
    x = [int(L) for L in by_length]
    ax.plot(x, [n["greedy_accuracy"] for n in by_length.values()], marker="o", label="greedy accuracy")
    for k in report["pass_at_k"]:
        rows = [n["pass_at_k"][k] for n in by_length.values()]
        exact = rows[0]["exact"] is not None
        ax.plot(x, [r["exact"] if exact else r["sampled"] for r in rows], marker=".",
                label=f"pass@{k} ({'exact' if exact else 'sampled'})")
    ax.set(xlabel="operand length (digits)", ylabel="accuracy", ylim=(0, 1.02), title="against length")
    ax.legend()
    ax.grid(alpha=0.3)


def plot_pass_at_k(ax, report: dict):
    """pass@k against k: sampled with its standard error, and exact where there is one."""
    curve = report["pass_at_k_curve"]
    ks = [int(k) for k in curve]
    ax.errorbar(ks, [row["sampled"] for row in curve.values()], [row["sampled_stderr"] for row in curve.values()],
                marker="o", ms=3, capsize=2, label=f"sampled ({report['samples']} a problem)")
    if report["exact_note"] is None:
        ax.plot(ks, [row["exact"] for row in curve.values()], label="exact, 1 - (1 - p)^k")
    ax.set(xscale="log", xlabel="k", ylabel="pass@k", ylim=(0, 1.02), title=(
        f"{os.path.basename(report['file'])}: {report['num_problems']} {report['split']} problems, "
        f"T={report['temperature']:g}"))
    ticks = [k for k in ks if k & (k - 1) == 0]  # powers of 2, written out (a log axis writes 10^0, 10^1)
    ax.set_xticks(ticks, [str(k) for k in ticks])
    ax.minorticks_off()
    ax.legend()
    ax.grid(alpha=0.3)


def main(argv=None) -> int:
    """The command; 0, 2 for bad input (one line on stderr), 1 if the numbers blew up (one line)."""
    argv = sys.argv[1:] if argv is None else argv
    t0 = time.time()
    try:
        args = parse_args(argv)
        if args.help:
            print(args.help_text)
            return 0
        check_args(args)
        model, envs, snap = load_for_evaluation(args.file, args.ndigits, {
            "logn_attention": args.logn_attention, "attention_window": args.attention_window,
            "attention_globals": args.attention_globals})
        check_fits(model, envs, args.file)
        json_path, png_path = output_paths(args)
        try:
            device, _ = dist.pick_device_and_backend(args.device, "auto", 0)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        from_config = (snap.get("config") or {}).get("rl_temperature")
        temperature_from = "--temperature" if args.temperature is not None else (
            "the file's rl_temperature" if from_config is not None else "default")
        args.temperature = args.temperature or from_config or 1.0
        args.num = args.num or (snap.get("config") or {}).get("num_eval") or 1000  # the run's own set, by default
        model.to(device)
        numbers, shown = evaluate_lengths(model, envs, args, device)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    report = {"command": shlex.join(["python", "-m", "rl.evaluate", *argv]), "file": args.file,
              "kind": snap.get("kind"), "step": snap.get("step"), "task": snap["task"], "split": args.split,
              "num": args.num, "samples": args.samples, "temperature": args.temperature,
              "temperature_from": temperature_from, "logn_attention": model.config.logn_attention,
              "attention_window": model.config.attention_window,
              "attention_globals": bool(model.config.attention_window and model.config.global_tokens), "k": args.k,
              "seed": args.seed, "device": str(device),
              "threads": torch.get_num_threads(), **numbers, "seconds": time.time() - t0}
    print(report_table(report))
    for line in shown:
        print(line)
    try:
        write_json(json_path, report)
    except WriteError as e:
        print(f"error: could not write {json_path} ({e})", file=sys.stderr)
        return 2
    plot = write_plot(png_path, report)
    print(f"wrote {json_path}" + (f" and {plot}" if plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
