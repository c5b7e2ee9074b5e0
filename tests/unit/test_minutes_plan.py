"""The plan of a 30-minute run (the small preset, bench/quality.py), driven as the Trainer drives it on a clock the
test moves: a step timed before the first one, re-plans from the measured speed, validations when due. The issue's
regression: a step that took longer than the timed forward and backward passes (they leave out the optimizer's
update) pulled the plan down, the validations followed the plan (a fifth of it apart) and came early and more often,
and each decoded its sentences in chunks of 16 on one thread: 6% fewer steps in the same 30 minutes."""

from types import SimpleNamespace

import pytest

from playground.training import evaluation
from playground.training.budget import MinutesPlan
from playground.training.presets import preset_config
from playground.training.schedule import VALIDATIONS_PER_RUN

MINUTES = 30.0
SETUP_S = 20.0  # the tokenizer and the encoding, before the first step


def thirty_minutes(step_s: float, timed_s: float, validation_s: float) -> dict:
    """A 30-minute run whose steps take `step_s` after a step timed at `timed_s`, and whose validations take
    `validation_s`: when each validation came (run seconds), the steps taken and the plan's first and last guess."""
    plan = MinutesPlan(preset_config("small", max_minutes=MINUTES))
    assert plan.needs_timing(None)
    elapsed = SETUP_S
    plan.fit(0, None, elapsed, timed_s)
    step = steps_here = 0
    train_time = planned_at = last_eval_end = 0.0
    validations, first_plan = [], plan.planned
    while elapsed < MINUTES * 60:
        plan.position = plan.next_position(step)
        step, steps_here, elapsed, train_time = step + 1, steps_here + 1, elapsed + step_s, train_time + step_s
        if plan.replan_due(steps_here, planned_at, elapsed - SETUP_S):
            plan.replan(step, None, elapsed, steps_here, train_time)
            planned_at = elapsed - SETUP_S
        if plan.validation_due(step, validations[-1][0] if validations else 0, elapsed, last_eval_end):
            validations.append((step, elapsed))
            elapsed += validation_s
            plan.eval_seconds.append(validation_s)
            last_eval_end = elapsed
    return {"validations": validations, "steps": step, "first_plan": first_plan, "plan": plan.planned}


@pytest.mark.parametrize("slower", [1.0, 1.25, 1.6])
def test_validations_come_at_each_fifth_of_the_minutes_however_the_plan_moves(slower):
    run = thirty_minutes(step_s=0.44 * slower, timed_s=0.44, validation_s=20.0)
    period = MINUTES * 60 / VALIDATIONS_PER_RUN
    times = [at for _, at in run["validations"]]
    # four within the minutes (the fifth is the final one, after them), each just after its share began; before, a
    # fifth of the plan apart, they came at 317, 676, 1035, 1394 and 1754 s: five within the minutes, six in all
    assert len(times) == VALIDATIONS_PER_RUN - 1, run["validations"]
    for share, at in enumerate(times, start=1):
        assert share * period <= at < share * period + 1.0, run["validations"]


def test_a_slow_validation_does_not_bring_the_next_one_forward():
    run = thirty_minutes(step_s=0.44, timed_s=0.44, validation_s=400.0)  # longer than a fifth of the minutes
    times = [at for _, at in run["validations"]]
    assert all(b - a >= 400.0 for a, b in zip(times, times[1:])), run["validations"]
    assert len(times) < VALIDATIONS_PER_RUN - 1


@pytest.mark.parametrize("slower", [1.0, 1.25])
def test_the_plan_ends_near_the_steps_the_minutes_hold(slower):
    step_s = 0.44 * slower
    run = thirty_minutes(step_s=step_s, timed_s=0.44, validation_s=20.0)
    steps_that_fit = (MINUTES * 60 - SETUP_S - (VALIDATIONS_PER_RUN - 1) * 20.0) / step_s
    assert run["steps"] == pytest.approx(steps_that_fit, rel=0.01)
    assert run["plan"] == pytest.approx(run["steps"], rel=0.02)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_a_timed_validation_decodes_in_whole_batches_once_its_time_allows(monkeypatch):
    clock, chunks = Clock(), []

    def translate(model, tokenizer, sources, opts, bounds):  # 1/8 s a sentence
        chunks.append(len(sources))
        clock.now += 0.125 * len(sources)
        return [SimpleNamespace(text=source) for source in sources]

    monkeypatch.setattr(evaluation, "time", clock)
    monkeypatch.setattr(evaluation, "translate", translate)
    pairs = [(f"a {i}", f"a {i}") for i in range(300)]
    scores, _ = evaluation.translation_scores(None, None, pairs, "cpu", "fp32", seconds=1000.0)
    # the first chunk is small (an untrained model's outputs are long), the rest are the search's batches: chunks of
    # 16 decoded at half the speed on one CPU thread
    assert chunks[0] == evaluation.DECODE_CHUNK and scores["sentences"] == 300
    assert set(chunks[1:-1]) == {evaluation.DECODE_BATCH}, chunks
    chunks.clear()
    scores, _ = evaluation.translation_scores(None, None, pairs, "cpu", "fp32", seconds=6.0)
    assert chunks == [16, 32] and scores["sentences"] == 48  # 2 s, then what the 4 s left hold
