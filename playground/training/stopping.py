"""When a run ends before its next step: a budget spent (steps, epochs, minutes: budget.budget_reached), Stop
pressed, or the end of this call's time (a ZeroGPU call, saved to go on in the next). Rank 0's clock decides for
every rank; the trainer's clock gives the times."""

from __future__ import annotations

import threading

from playground.training.budget import budget_reached
from playground.training.config import TrainConfig
from playground.training.distributed import Ranks, agree
from playground.training.events import StopReason

STOP_EVAL_SENTENCES = 50  # sentences decoded by the last validation of a stopped run


class StopRules:
    """Stop (`requested`, set from any thread) and the call's length (`pause_after_s`, set by whoever runs the call)
    beside the run's budgets."""

    def __init__(self, cfg: TrainConfig, ranks: Ranks):
        self.cfg, self.ranks = cfg, ranks
        self.requested = threading.Event()
        self.pause_after_s: float | None = None  # end this call after so long, saved to resume (ZeroGPU chunks)

    def reason(self, step: int, budget_steps: int | None, elapsed: float, steps_here: int,
               call_seconds: float) -> StopReason | None:
        """Why the run ends before step `step + 1`, if it does, the same on every rank; `elapsed`: seconds of the
        run, its earlier calls included; `call_seconds`: of this call."""
        spent = budget_reached(self.cfg, step, budget_steps, elapsed, steps_here)
        return agree(spent or self.pressed() or self.call_over(steps_here, call_seconds), self.ranks)

    def pressed(self) -> StopReason | None:
        return StopReason.STOPPED if self.requested.is_set() else None

    def call_over(self, steps_here: int, call_seconds: float) -> StopReason | None:
        """The end of this call's time, once it has taken a step."""
        over = self.pause_after_s is not None and steps_here and call_seconds >= self.pause_after_s
        return StopReason.PAUSED if over else None

    def after_pause(self) -> StopReason:
        """A paused call's reason once it has saved: Stop pressed during that save ends the run in this call."""
        return agree(self.pressed(), self.ranks) or StopReason.PAUSED


def last_eval_sentences(reason: StopReason | None) -> int | None:
    """A person pressed Stop: a quick last validation (an untrained model decodes every sentence to its maximum
    length, and 200 of them take seconds on a CPU)."""
    return STOP_EVAL_SENTENCES if reason == StopReason.STOPPED else None
