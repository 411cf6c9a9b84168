"""Held-out evaluation: greedy decoding on a fixed evaluation set, scored by the rule rewards.

Every accuracy this project reports comes from `evaluate`, on the test split; the warm start's
stopping rule (and any other choice) calls it on the validation split. "Right" is the same
definition as the reward's (rl/math_reward.py): `accuracy` is final-answer exact match,
`steps_accuracy` the share of answers whose shown work is all right (None when no work is shown).
The evaluation set is split across ranks and the counts are summed, so 1 and N processes report
the same number. An answer decoded from non-finite logits (weights that overflowed) is no answer:
evaluation then raises TrainingError on every rank instead of reporting a number.

Beyond greedy accuracy, how often sampling finds the right answer (pass@k): the chance that at least
one of k answers sampled at a temperature is right, averaged over problems, estimated two ways:
`pass_at_k_unbiased` from n sampled answers per problem (`count_right_samples`; Chen et al. 2021), and
`exact_pass_at_k` from the probability p that one sample is right, which one teacher-forced pass gives
exactly (`answer_probability`), since the right answer is one token sequence: no sampling noise. With
show_work=true many answers (any shown work) share the right final answer, so p is not one sequence's
probability.
"""

from dataclasses import dataclass, field
from typing import Optional

import torch
from tqdm import tqdm

from rl import dist
from rl.algorithms import answer_logits, answer_mask, masked, token_logprobs
from rl.errors import TrainingError  # (re-exported: from rl.evaluate import TrainingError keeps working)
from rl.math_env import MathEnvironment
from rl.math_reward import digit_match, exact_match, steps_match


@dataclass
class EvalResult:
    accuracy: float  # share of problems whose final answer is exactly right
    digit_accuracy: float  # share of final-answer digits that are right
    steps_accuracy: Optional[float]  # share whose shown work is all right; None without show_work
    num_problems: int
    split: str = "test"
    mistakes: list = field(default_factory=list)  # a few "claims 12+34=47, truth 46" lines (rank 0's share)

    def summary(self) -> str:
        name = "held-out" if self.split == "test" else self.split
        steps = f", steps all right {self.steps_accuracy:.4f}" if self.steps_accuracy is not None else ""
        return (f"{name} accuracy {self.accuracy:.4f} ({self.num_problems} problems, greedy), "
                f"digit accuracy {self.digit_accuracy:.4f}{steps}")

    def metrics(self, prefix: str = "eval") -> dict:
        out = {f"{prefix}/accuracy": self.accuracy, f"{prefix}/digit_accuracy": self.digit_accuracy}
        if self.steps_accuracy is not None:
            out[f"{prefix}/steps_accuracy"] = self.steps_accuracy
        return out


@torch.no_grad()
def evaluate(model, env: MathEnvironment, a, b, info: dist.DistInfo, *, batch_size: int = 500,
             num_mistakes: int = 3, split: str = "test") -> EvalResult:
    """Greedy answers for the pairs (a, b) (int arrays (N,)) of `split`; model may be DDP-wrapped."""
    model = dist.unwrap(model)
    was_training = model.training
    model.eval()
    a, b = a[info.rank::info.world_size], b[info.rank::info.world_size]
    counts = torch.zeros(5, dtype=torch.float64)  # exact, right digits, steps all right, problems, non-finite
    mistakes = []
    for i in range(0, len(a), batch_size):
        prompts, targets = env.encode(a[i:i + batch_size], b[i:i + batch_size])
        generated, nonfinite = model.generate(prompts.to(info.device), env.answer_len, greedy=True,
                                              end_token=env.end_token, pad_token=env.pad_token, with_nonfinite=True)
        generated = generated.cpu()
        exact = exact_match(env, targets, generated)
        counts += torch.tensor([exact.sum().item(), digit_match(env, targets, generated).sum().item(),
                                steps_match(env, targets, generated).sum().item(), len(exact),
                                nonfinite.sum().item()], dtype=torch.float64)
        for j in torch.nonzero(exact == 0).flatten().tolist()[: num_mistakes - len(mistakes)]:
            mistakes.append(env.describe_mistake(int(a[i + j]), int(b[i + j]), generated[j]))
    model.train(was_training)
    exact, digits, steps, n, nonfinite = dist.all_reduce_sum(counts.to(info.device)).tolist()
    if nonfinite:  # the same sum on every rank: every rank raises
        raise TrainingError(f"non-finite logits in greedy evaluation on the {split} split ({nonfinite:.0f} of {n:.0f} "
                            f"problems): the policy's weights have overflowed; lower learning_rate (sft_learning_rate "
                            f"in the warm start), keep grad_clip on, or check the file init_from loaded")
    return EvalResult(exact / n, digits / n, steps / n if env.show_work else None, int(n), split, mistakes)


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
    logits = answer_logits(model, torch.cat([prompts, targets], dim=1), env.prompt_len, temperature)  # (B, A, V)
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
                                              num_samples=num_samples, with_nonfinite=True)
        if nonfinite.any():
            raise TrainingError(f"non-finite logits while sampling at temperature {temperature} "
                                f"({int(nonfinite.sum())} answers): raise --temperature, or check the file's weights")
        right = exact_match(env, targets.repeat_interleave(num_samples, dim=0), generated.cpu())  # (B * n,)
        counts.append(right.view(-1, num_samples).sum(dim=1).long())
    model.train(was_training)
    return torch.cat(counts)
