"""The budgets of a run: which one ends it (budget_reached), and the steps it plans to take, which under a binding
minutes budget are fitted from a timed step and re-planned from the measured speed (MinutesPlan)."""

from __future__ import annotations

import time

from playground.packages.format import saved_config
from playground.training.checkpoint import RunState
from playground.training.config import TrainConfig
from playground.training.events import StopReason
from playground.training.schedule import (
    VALIDATION_SHARE,
    VALIDATIONS_PER_RUN,
    advance,
    eval_interval,
    fit_warmup,
    steps_that_fit,
)

FIRST_TIMING_STEPS = 2  # a fitted plan is first re-planned once this many steps have been timed ...
REPLAN_SHARE = 0.05  # ... and again each time this share of the budget has passed (the machine's speed changes)
MAX_PACE_CHANGE = 1.5  # a re-plan changes the steps left by at most this factor: the rate's slope changes gently
FINAL_GRACE, FINAL_GRACE_S = 0.05, 10.0  # a time-capped run's last validation may run this share of the cap past it


def budget_reached(cfg: TrainConfig, step: int, budget_steps: int | None, elapsed: float,
                   steps_here: int) -> StopReason | None:
    """The budget that ends the run at `step`, if one does; `budget_steps`: the steps or epochs budget in steps."""
    if budget_steps is not None and step >= budget_steps:
        return StopReason.STEPS if cfg.max_steps == budget_steps else StopReason.EPOCHS
    # the time counts the setup too; a setup that took it all still gets one step, so a package comes out
    if cfg.max_minutes and elapsed >= cfg.max_minutes * 60 and steps_here:
        return StopReason.TIME
    return None


def last_eval_deadline(cfg: TrainConfig, cap_end: float | None) -> float | None:
    """Under a time cap (`cap_end`, a time.perf_counter() deadline) the package's scores still need a last
    validation: a short grace past the cap for it."""
    if cap_end is None:
        return None
    return max(cap_end, time.perf_counter()) + max(FINAL_GRACE_S, FINAL_GRACE * cfg.max_minutes * 60)


class MinutesPlan:
    """The steps a run plans to take (`planned`) and the schedule it follows: the plain one, counted in steps, or,
    when a minutes budget binds, one fitted to the planned steps (its own warmup and length, and a position that
    advances at the pace of the plan: schedule.advance)."""

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.planned: int | None = None  # the steps the run plans to take; a binding minutes budget fits them (fit)
        self.warmup = cfg.warmup_steps
        self.schedule_steps: int | None = None  # a fitted schedule's length; None: the schedule counts steps
        self.position = 0.0  # where a fitted schedule stands after the last step (schedule.advance)
        self.keep_plain = False  # a resumed call of a run whose steps or epochs budget ends it first: no timing
        self.first_plan: int | None = None  # the first steps-for-the-minutes guess of this call, for the summary
        self.eval_seconds: list[float] = []  # the validations of this call, timed for the plan

    def resume(self, training: dict | None, state: RunState) -> None:
        """Go on with the saved schedule (the next call of a chunked run, or after a Stop): a fitted one where it
        stood, a plain one without timing again; one whose minutes were used up starts a new one over the added
        minutes, from warmup."""
        if not (self.cfg.max_minutes and state.planned_steps) or used_up(training, state):
            return
        self.keep_plain = state.schedule_steps is None
        if state.schedule_steps:
            self.planned, self.warmup, self.schedule_steps, self.position = (
                state.planned_steps, state.warmup_steps, state.schedule_steps, state.schedule_position)

    def saved(self) -> dict:
        """The RunState fields that keep the plan."""
        return {"planned_steps": self.planned, "warmup_steps": self.warmup, "schedule_steps": self.schedule_steps,
                "schedule_position": self.position}

    @property
    def fitted(self) -> bool:
        return self.schedule_steps is not None

    @property
    def length(self) -> int | None:
        """The schedule's length for the learning rate: a fitted one's, or the planned steps."""
        return self.schedule_steps or self.planned

    def needs_timing(self, budget_steps: int | None) -> bool:
        """Start a call's plan from the steps or epochs budget; whether a minutes budget must then time a step."""
        if self.planned is not None:  # a fitted schedule saved by the call before
            return False
        self.planned = budget_steps
        return bool(self.cfg.max_minutes) and not self.keep_plain

    def fit(self, step: int, budget_steps: int | None, elapsed: float, seconds: float) -> None:
        """Before the first step of a minutes budget, a step timed at `seconds`: plan the steps the budget holds
        (keeping VALIDATION_SHARE of it for validations until one is timed) and fit the schedule to them, warmup
        included. A steps or epochs budget that ends the run first keeps the plain schedule."""
        remaining = self.cfg.max_minutes * 60 - elapsed
        fitted = step + steps_that_fit(remaining, seconds, VALIDATION_SHARE * remaining)
        if budget_steps is not None and budget_steps <= fitted:
            return
        self.planned = self.first_plan = fitted
        self.schedule_steps = fitted - step + 1  # one past the last planned step: none of them gets lr 0
        self.warmup = fit_warmup(self.cfg, fitted - step)
        self.position = 0.0

    def replan(self, step: int, budget_steps: int | None, elapsed: float, steps_here: int,
               train_time: float) -> None:
        """Fit the plan to the steps the rest of the minutes budget holds at the speed measured so far in this call,
        once the validations still to come have had the time they took (or their allowance until one ran). Only the
        pace of the fitted schedule changes (schedule.advance), so the rate never jumps."""
        per_eval = (sum(self.eval_seconds) / len(self.eval_seconds) if self.eval_seconds
                    else self.validation_allowance() or 0.0)
        training_left = self.cfg.max_minutes * 60 - elapsed - self.validations_left(step, elapsed) * per_eval
        left, fitted = self.planned - step, max(training_left, 0.0) / (train_time / max(steps_here, 1))
        if left > 0:
            fitted = min(max(fitted, left / MAX_PACE_CHANGE), left * MAX_PACE_CHANGE)
        planned = step + max(1, round(fitted))
        self.planned = min(planned, budget_steps) if budget_steps is not None else planned

    def validations_left(self, step: int, elapsed: float) -> int:
        """The validations still due before the minutes run out (the last one runs after them, in its grace: see
        last_eval_deadline)."""
        if self.cfg.eval_every:
            return max(self.planned - step, 0) // self.cfg.eval_every
        return max(VALIDATIONS_PER_RUN - 1 - int(elapsed // self.validation_period()), 0)

    def validation_period(self) -> float:
        """Seconds between the validations of a fitted schedule: the minutes in VALIDATIONS_PER_RUN equal shares."""
        return self.cfg.max_minutes * 60 / VALIDATIONS_PER_RUN

    def validation_due(self, step: int, last_eval: int, elapsed: float, last_eval_end: float) -> bool:
        """Whether a validation is due after step `step` (`last_eval`: the last validated step, `last_eval_end`: the
        run's seconds when that validation ended). eval_every when set; on a fitted schedule, each time the run's
        clock enters the next of VALIDATIONS_PER_RUN equal shares of the minutes (the last share's validation is the
        final one), so neither a plan that is re-fitted nor a slow validation adds or moves one; else the planned
        steps spread over VALIDATIONS_PER_RUN validations, counted from the last one (not as multiples: a re-planned
        interval would skip the next one)."""
        if self.fitted and not self.cfg.eval_every:
            period = self.validation_period()
            return elapsed < self.cfg.max_minutes * 60 and elapsed // period > last_eval_end // period
        every = eval_interval(self.cfg, self.planned)
        return bool(every) and step - last_eval >= every

    def replan_due(self, steps_here: int, last_plan_time: float, run_time: float) -> bool:
        if not self.schedule_steps or steps_here < FIRST_TIMING_STEPS:
            return False
        return run_time - last_plan_time >= REPLAN_SHARE * self.cfg.max_minutes * 60

    def next_position(self, step: int) -> float:
        """The schedule position of step `step` + 1: the step itself, or on a fitted schedule schedule.advance."""
        if self.schedule_steps is None:
            return step + 1
        return advance(self.position, step + 1, self.planned, self.schedule_steps)

    def eta(self, step: int, elapsed: float, steps_done_here: int, run_time: float) -> float | None:
        estimates = []
        if self.planned is not None and steps_done_here:
            estimates.append((self.planned - step) * run_time / steps_done_here)
        if self.cfg.max_minutes:
            estimates.append(self.cfg.max_minutes * 60 - elapsed)
        return max(min(estimates), 0.0) if estimates else None

    def validation_allowance(self) -> float | None:
        """Seconds a fitted run's validation may spend decoding: its share of the minutes (an untrained model's
        outputs run to their length limit and must not eat the budget); None on a plain schedule."""
        if not self.schedule_steps:
            return None
        return VALIDATION_SHARE * self.cfg.max_minutes * 60 / VALIDATIONS_PER_RUN


def used_up(training: dict | None, state: RunState) -> bool:
    """Whether the saved run ended because its minutes budget was spent (not paused between calls or stopped)."""
    minutes = saved_config(training).get("max_minutes")
    return bool(minutes) and state.elapsed_s >= minutes * 60

