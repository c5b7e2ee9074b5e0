"""The learning-rate schedule: the paper's and three others, and how many steps a run plans to take.

The paper's (§5.3, "Optimizer"; named after Noam Shazeer): lrate = d_model^-0.5 · min(step^-0.5, step ·
warmup_steps^-1.5), a linear warmup, then a decay with the inverse square root of the step. The trainer sets the rate
with it at every step; the Train tab's preview draws it. The functions read the few settings they need from any
object that has them (ScheduleSettings: a TrainConfig), so this module imports nothing of the training's own."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from playground.core.model import TransformerConfig


class ScheduleSettings(Protocol):
    """The settings the schedule reads (playground.training.config.TrainConfig has them)."""

    schedule: str
    lr: float
    model: TransformerConfig  # noam scales the rate by its d_model
    warmup_steps: int
    max_steps: int | None
    max_epochs: float | None
    max_minutes: float | None
    eval_every: int | None


VALIDATIONS_PER_RUN = 5  # eval_every not set ("auto"): validations spread over the planned steps, the last one included
WARMUP_SHARE = 0.2  # a run whose minutes budget binds warms up for at most this share of the steps it will get
MIN_WARMUP = 3  # ... and for at least this many steps (when the run has twice as many)
VALIDATION_SHARE = 0.2  # of a minutes budget, kept for validations until one has been timed
MIN_USEFUL_STEPS = 40  # fewer steps than this in a minutes budget leave a small model saying "un un un"


def learning_rate(cfg: ScheduleSettings, step: int, total_steps: int | None = None,
                  warmup: int | None = None) -> float:
    """Learning rate at optimizer step `step` (1-based); `warmup` (a time-budgeted run's fitted one, fit_warmup)
    replaces cfg.warmup_steps."""
    step = max(step, 1)
    warmup = max(cfg.warmup_steps if warmup is None else warmup, 1)
    if cfg.schedule == "noam":  # the paper: d^-0.5 * min(step^-0.5, step * warmup^-1.5)
        return cfg.lr * cfg.model.d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    if cfg.schedule == "inverse_sqrt":
        return cfg.lr * min(step / warmup, math.sqrt(warmup / step))
    if cfg.schedule == "cosine":
        if step < warmup:
            return cfg.lr * step / warmup
        total = max(total_steps or step, warmup + 1)
        progress = min((step - warmup) / (total - warmup), 1.0)
        return cfg.lr * 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.lr  # constant


def steps_that_fit(seconds: float, step_seconds: float, validation_seconds: float) -> int:
    """The steps of `step_seconds` each that fit in `seconds` when validations take `validation_seconds` of them (at
    least one: a run always takes a step). The Trainer's plan (budget.MinutesPlan) and the estimate both count so."""
    return max(1, int((seconds - validation_seconds) / max(step_seconds, 1e-9)))


def planned_steps(cfg: ScheduleSettings, epoch_steps: int | None) -> tuple[int | None, str]:
    """(steps, "steps" or "epochs"): the budget that ends the run first, the one the trainer and the estimate both
    count by (the steps budget on a tie); (None, "minutes") when only the minutes budget, or epochs of unknown size,
    limit it."""
    planned, limited_by = (cfg.max_steps, "steps") if cfg.max_steps else (None, "minutes")
    if cfg.max_epochs and epoch_steps:
        by_epochs = math.ceil(cfg.max_epochs * epoch_steps)
        if planned is None or by_epochs < planned:
            planned, limited_by = by_epochs, "epochs"
    return planned, limited_by


def fit_warmup(cfg: ScheduleSettings, steps: int) -> int:
    """The warmup of a run that will get only `steps` steps (its minutes budget binds): the configured one, but at most
    WARMUP_SHARE of the run, so that a slow machine's short run still leaves warmup and learns; and (a very short
    run) at least MIN_WARMUP steps where half the run holds them, so that the rate still climbs rather than jumps."""
    return min(cfg.warmup_steps, max(1, math.ceil(WARMUP_SHARE * steps), min(MIN_WARMUP, steps // 2)))


def advance(position: float, step: int, planned: int, length: int) -> float:
    """The schedule position of step `step` (1-based) of a run fitted to a minutes budget, from `position`, that of
    the step before: the rest of the schedule's `length` positions spread evenly over the steps left to the planned
    end and one past it (so no planned step gets the cosine's 0). A constant plan moves one position a step; a
    re-planned one only changes the pace, never the position, so the rate follows the schedule's own shape at every
    re-plan instead of jumping to where a longer or shorter plan would be. A run that outlasts its plan halves the
    rest of the way at each step: the rate keeps falling and never reaches 0."""
    return position + (length - position) / max(planned - step + 2, 2)


def eval_interval(cfg: ScheduleSettings, steps: int | None) -> int | None:
    """Steps between validations: eval_every when set, else the planned steps spread over VALIDATIONS_PER_RUN
    validations (None while the plan is unknown: a minutes budget not yet timed)."""
    if cfg.eval_every:
        return cfg.eval_every
    return max(1, math.ceil(steps / VALIDATIONS_PER_RUN)) if steps else None


@dataclass(frozen=True)
class SchedulePreview:
    """The steps the Train tab's learning-rate preview draws, and the warmup over them."""

    steps: int
    caption: str  # where the number of steps comes from, for the chart's title
    fitted: bool  # the steps are what the estimate expects to fit in a binding minutes budget: the run fits its
    # warmup to them (fit_warmup), and so does the preview
    warmup: int


def schedule_preview(cfg: ScheduleSettings, epoch_steps: int | None, estimated: int | None = None) -> SchedulePreview:
    """The preview's steps: the steps budget, epochs x batches per epoch, the steps the estimate expects to fit in
    the minutes budget (`estimated`), or else a few warmups' worth."""
    planned, limited_by = planned_steps(cfg, epoch_steps)
    fitted = False
    if planned:
        steps, caption = planned, f"{limited_by} budget"
    elif cfg.max_minutes and estimated:
        steps, caption, fitted = estimated, "what fits in the minutes", True
    else:
        steps, caption = max(10 * cfg.warmup_steps, 1000), "no step budget: the first steps"
    steps = max(int(steps), 2)
    return SchedulePreview(steps, caption, fitted, fit_warmup(cfg, steps) if fitted else cfg.warmup_steps)
