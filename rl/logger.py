"""Metric sinks: a JSON-lines file in the run folder, and wandb when it is wanted.

`log` raises run_dir.WriteError when the line cannot be written (a full disk); the entry script
stops every rank then (rl/snapshot.py save_on_main).

Only rank 0 builds a real logger; other ranks get one whose methods do nothing, so the training
loop never branches on rank or on wandb. wandb is imported only when used (it is slow to import).
"""

import os

from rl.dist import print0
from rl.run_dir import append_line, metrics_path


class MetricsLogger:
    def __init__(self, jsonl_path: str = None, wandb_run=None):
        self.jsonl_path, self.wandb_run = jsonl_path, wandb_run

    def log(self, metrics: dict, step: int):
        if self.jsonl_path:  # one line in one write: a kill tears at most this line (rl/run_dir.py)
            append_line(self.jsonl_path, {"step": step, **metrics})
        if self.wandb_run is not None:
            self.wandb_run.log(metrics, step=step)

    @property
    def run_id(self):
        return self.wandb_run.id if self.wandb_run is not None else None

    def finish(self):
        if self.wandb_run is not None:
            self.wandb_run.finish()


def wandb_logged_in() -> bool:
    """True if wandb has an API key (env var or `wandb login`); never prompts."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    import wandb
    try:
        return bool(wandb.api.api_key)
    except Exception:
        return False


def make_logger(config, is_main: bool, use_wandb: bool, run_id: str = None) -> MetricsLogger:
    """rank 0: metrics.jsonl in out_dir, plus wandb (offline with a notice when not logged in,
    resuming the same wandb run id after a restart); other ranks: a logger that drops everything."""
    if not is_main:
        return MetricsLogger()
    wandb_run = None
    if use_wandb:
        import wandb
        mode = os.environ.get("WANDB_MODE")
        if mode is None and not wandb_logged_in():
            mode = "offline"
            print0(f"wandb: not logged in, logging offline to {config.out_dir}/wandb "
                   f"(run `wandb login` to sync, or pass --no_wandb)")
        wandb_run = wandb.init(project=config.wandb_project, name=config.wandb_run_name or config.name,
                               config=config.to_dict(), dir=config.out_dir, id=run_id, resume="allow", mode=mode,
                               settings=wandb.Settings(silent=True))
    return MetricsLogger(metrics_path(config.out_dir), wandb_run)
