"""MultiplierRLConfig (2-digit) and Multiplier3RLConfig (3-digit): multiplication, showing the work."""

from dataclasses import dataclass

from configs.base import BaseRLConfig


@dataclass
class MultiplierRLConfig(BaseRLConfig):
    task: str = "multiplier"
    ndigit: int = 2
    show_work: bool = True
    """write the partial products first: held-out pairs then need only sub-problems that training pairs also
    contain (the bare product, --show_work=false, is memorised instead: docs/results.md)"""
    num_eval: int = 2000
    """more than either held-out split has: every one of the 1,023 test and 516 validation pairs is evaluated (> 0)"""
    sft_target_accuracy: float = 0.8
    """RL starts from a policy that gets most but not all products right. Measured on validation (seed 0, replay):
    from 0.70, RL reached 0.99 at step 150; from 0.83, at step 75, and the 33 warm start steps between cost 40 s
    (supervised training alone levels off near 0.93 here: docs/results.md "Showing the work") (in [0, 1])"""
    sft_eval_interval: int = 5
    """the warm start climbs about 0.05 every 10 steps here: checking every 5 stops it nearer the target (> 0)"""
    sft_num_eval: int = 600
    """every one of the 516 validation pairs, so the stopping rule is not a noisy sample (> 0)"""
    learning_rate: float = 1e-4
    """measured on validation: 2e-4 and 3e-4 first unlearn (0.75 -> 0.69 at step 25), 1e-4 climbs steadily (> 0)"""
    rl_batch_size: int = 64
    """measured: 32 prompts reached the same validation accuracy later in seconds here (> 0)"""
    rl_train_steps: int = 150
    """without refill rounds a step costs 1.2-1.9 s here: on validation (seed 0) 0.959 at step 75 and 0.979 at 100,
    still climbing, in 166 s of RL (>= 0)"""
    problem_sampler: str = "replay"
    """the problems still wrong come back: on validation (seed 0, warm start at 0.70, 100 steps) replay ended at
    0.950, uniform draws at 0.940 and prioritized at 0.928 (docs/results.md "Problem selection")"""
    replay_share: float = 0.75
    """three quarters of each step from the buffer: at 0.75 validation reached 0.975 at step 100 against 0.950 at 0.5
    (seed 0, one refill round against two) (in [0, 1])"""
    dynamic_sampling_max_rounds: int = 0
    """no refill rounds: late in a run they drew 256 fresh problems a step, nearly all solved, for 2,560 answers and
    4-5 s a step; without them a step samples 512 answers and trains on the 200-330 that are informative, and
    validation climbed faster per second (0.979 at 166 s of RL against 0.961 with one round) (>= 0)"""
    eval_interval: int = 25
    """an evaluation decodes all 1,539 held-out pairs, 14 answer tokens each: 2.7x the tokens of an adder one (> 0)"""


@dataclass
class Multiplier3RLConfig(MultiplierRLConfig):
    """3-digit multiplication: 10^6 ordered pairs, far too many to memorise, 31 answer tokens."""
    ndigit: int = 3
    sft_target_accuracy: float = 0.9
    """the supervised climb is steep here (0.63 -> 0.84 on validation in 28 steps), so 0.9 costs little: on validation
    (seed 0) RL from 0.9 ended at 0.952 with 200 steps in 25 minutes, from 0.84 at 0.917 with 150 (in [0, 1])"""
    num_eval: int = 1000
    """1000 of the 100,953 test pairs, and of the validation pairs (> 0)"""
    sft_max_steps: int = 3000
    """an upper bound: the stopping rule ends the warm start long before (>= 0)"""
    sft_eval_interval: int = 25
    """a check decodes 31 answer tokens a problem, 2.2x the 2-digit preset's, so check less often while far off (> 0)"""
    sft_num_eval: int = 250
    """the first 250 validation pairs (standard error about 0.03 at 0.7), a quarter of the cost of 1000 (> 0)"""
    rl_train_steps: int = 200
    """on validation (seed 0) RL was still rising at step 200 (0.952 with replay draws); 200 steps of 2-3.5 s keep
    the whole run within 30 minutes (>= 0)"""
    problem_sampler: str = "uniform"
    """measured on validation (3 seeds, the same warm starts): replay dipped first (0.88 -> 0.80-0.94 at step 100)
    and ended at 0.968 (0.952-0.969), uniform draws did not dip (0.917-0.963 at step 100) and ended at 0.969
    (0.964-0.974). Replay's buffer held only a few dozen of the ~850,000 training products, and three quarters of
    every step came from them (docs/results.md "3-digit multiplication")"""
    eval_interval: int = 25
    """an evaluation decodes 2,000 held-out answers of 31 tokens (> 0)"""


@dataclass
class ScarceMultiplierRLConfig(MultiplierRLConfig):
    """2-digit multiplication where the warm start sees the worked answers of only 256 training pairs, and
    RL learns from every training problem with the final-answer reward alone (docs/results.md "What RL adds")."""
    sft_worked_examples: int = 256
    """the shown work of 256 of the 8,461 training pairs; --sft_worked_examples=768 is where RL ends near 0.99
    and supervised training on the pool stays below 0.91, 1024 where supervised alone nears 0.95
    (docs/results.md) (>= 0)"""
    sft_target_accuracy: float = 1.0
    """not the stopping rule here (supervised training on a small pool stops short of any fixed target): the
    warm start runs for as long as validation improves (sft_patience) (in [0, 1])"""
    sft_patience: int = 100
    """20 checks of every validation pair without a better one: past the best, the pool is being memorised (>= 0)"""
    sft_max_steps: int = 600
    """a bound on its seconds (about 16 minutes here): on validation (seed 0, K = 256) the training loss was near 0
    by step 175 while validation accuracy still crept up, 0.13 at step 200 and 0.15 at 350, too slowly for
    patience to end it (>= 0)"""
    sft_eval_interval: int = 10
    """516 validation pairs per check: every 10 steps keeps checks near a tenth of the warm start (> 0)"""
    rl_train_steps: int = 600
    """RL starts far lower than the 2-digit preset's 0.8 here: on validation (seed 0, K = 256, uniform draws) it was
    still climbing at step 600, 0.172 -> 0.308 at step 300 -> 0.395, about 0.9 s a step (>= 0)"""
    problem_sampler: str = "uniform"
    """at 15% right answers replay's buffer fills with problems the policy gets all wrong, and three quarters of a
    step came from them: on validation (seed 0, K = 256) replay was at 0.225 after 300 s of RL (it first unlearnt,
    0.172 -> 0.097), uniform draws at 0.308 after 266 s, prioritized at 0.304 after 273 s (docs/results.md
    "What RL adds")"""
