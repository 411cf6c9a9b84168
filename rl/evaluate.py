"""Held-out evaluation: greedy decoding on the fixed test set, exact-match and per-digit accuracy.

Every accuracy this project reports comes from `evaluate`. The evaluation set is split across
ranks and the counts are summed, so 1 and N processes report the same number.
"""

from dataclasses import dataclass, field

import torch

from rl import dist
from rl.math_env import MathEnvironment


@dataclass
class EvalResult:
    accuracy: float  # share of problems answered exactly (all digits and the end token)
    digit_accuracy: float  # share of answer digit positions that are right
    num_problems: int
    mistakes: list = field(default_factory=list)  # a few "claims 12+34=47, truth 46" lines (rank 0's share)

    def summary(self) -> str:
        return f"held-out accuracy {self.accuracy:.4f} ({self.num_problems} problems, greedy), digit accuracy {self.digit_accuracy:.4f}"


@torch.no_grad()
def evaluate(model, env: MathEnvironment, a, b, info: dist.DistInfo, batch_size: int = 500,
             num_mistakes: int = 3) -> EvalResult:
    """Greedy answers for the held-out pairs (a, b) (int arrays (N,)); model may be DDP-wrapped."""
    model = dist.unwrap(model)
    was_training = model.training
    model.eval()
    a, b = a[info.rank::info.world_size], b[info.rank::info.world_size]
    counts = torch.zeros(3, dtype=torch.float64)  # exact, right digits, problems
    mistakes = []
    for i in range(0, len(a), batch_size):
        prompts, targets = env.encode(a[i:i + batch_size], b[i:i + batch_size])
        generated = model.generate(prompts.to(info.device), env.answer_len, greedy=True,
                                   end_token=env.end_token, pad_token=env.pad_token).cpu()
        exact = (generated == targets).all(dim=1)
        counts += torch.tensor([exact.sum().item(), (generated[:, :-1] == targets[:, :-1]).sum().item(), len(exact)],
                               dtype=torch.float64)
        for j in torch.nonzero(~exact).flatten().tolist()[: num_mistakes - len(mistakes)]:
            mistakes.append(env.describe_mistake(int(a[i + j]), int(b[i + j]), generated[j]))
    model.train(was_training)
    exact, digits, n = dist.all_reduce_sum(counts.to(info.device)).tolist()
    return EvalResult(exact / n, digits / (n * env.answer_digits), int(n), mistakes)
