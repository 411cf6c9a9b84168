"""Held-out evaluation: greedy decoding on a fixed evaluation set, scored by the rule rewards.

Every accuracy this project reports comes from `evaluate`, on the test split; the warm start's
stopping rule (and any other choice) calls it on the validation split. "Right" is the same
definition as the reward's (rl/math_reward.py): `accuracy` is final-answer exact match,
`steps_accuracy` the share of answers whose shown work is all right (None when no work is shown).
The evaluation set is split across ranks and the counts are summed, so 1 and N processes report
the same number. An answer decoded from non-finite logits (weights that overflowed) is no answer:
evaluation then raises TrainingError on every rank instead of reporting a number.
"""

from dataclasses import dataclass, field
from typing import Optional

import torch

from rl import dist
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
