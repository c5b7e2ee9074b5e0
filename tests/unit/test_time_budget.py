"""A run whose minutes budget binds: the schedule fits the steps the run actually gets. The issue's case: the `tiny`
preset on 3,000 Multi30k-sized pairs with a budget of about 150 steps used to stay in its 150-step warmup to the
end and validate only once, at the end."""

import time

import pytest
from helpers import DATA, reverse_pairs, tiny_cfg

from playground.training import events as ev
from playground.training import trainer as trainer_module
from playground.training.budget import used_up
from playground.training.checkpoint import load_run, resume_config
from playground.training.inputs import TrainData
from playground.training.presets import preset_config
from playground.training.schedule import eval_interval, fit_warmup
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


class HandClock:
    """The trainer's clock, moved by hand: the run's time is what the test says, whatever the machine's load. It starts
    at the real clock (the deadlines the trainer derives from it are compared with time.perf_counter() in the
    validations), floored to a whole second so that the durations it measures are exact: perf_counter()'s value + 20
    - that value can come out a hair under 20."""

    def __init__(self) -> None:
        self.now = float(int(time.perf_counter()))

    def perf_counter(self) -> float:
        return self.now


def test_the_fitted_schedule_is_saved_and_resumed(tmp_path, monkeypatch):
    cfg = tiny_cfg(max_steps=None, max_minutes=0.05, warmup_steps=1000, eval_every=None)
    data = TrainData(reverse_pairs(200), reverse_pairs(10, seed=1))
    # stopped half-way (or a chunked run's call ended): the next call goes on where the schedule stood. The run's
    # clock stands still, so that Stop, not a busy machine's slow steps, ends it at step 20
    with monkeypatch.context() as patched:
        patched.setattr(trainer_module, "time", HandClock())
        trainer = Trainer(cfg, data, tmp_path / "run")
        for event in trainer.run():
            if isinstance(event, ev.Step) and event.step == 20:
                trainer.stop()
    assert trainer.step == 20
    plan = trainer.budget
    assert plan.planned and plan.first_plan and 1 <= plan.warmup < 1000  # fitted: a fifth of the run at most
    _, state, _ = load_run(tmp_path / "run", trainer.device)
    fitted = (plan.planned, plan.warmup, plan.schedule_steps, plan.position)
    assert (state.planned_steps, state.warmup_steps, state.schedule_steps, state.schedule_position) == fitted
    resumed = Trainer(cfg, data, tmp_path / "run", resume_from=tmp_path / "run")
    plan = resumed.budget
    assert (plan.planned, plan.warmup, plan.schedule_steps, plan.position) == fitted
    # a run whose minutes were spent, resumed with more: a new schedule over the added minutes, from warmup
    list(Trainer(cfg, data, tmp_path / "spent").run())
    more = Trainer(resume_config(tmp_path / "spent", {"max_minutes": 0.05}), data, tmp_path / "spent",
                   resume_from=tmp_path / "spent")
    assert more.budget.planned is None and more.budget.position == 0.0
    list(more.run())
    assert more.budget.schedule_steps and more.history.lr[-1] > 0


def test_a_run_that_ends_on_its_minutes_right_after_a_validation_is_saved_as_used_up(tmp_path, monkeypatch):
    clock = HandClock()
    monkeypatch.setattr(trainer_module, "time", clock)
    validate = Trainer.validate

    def validation_past_the_budget(self, *args, **kwargs):  # the validation after step 1 takes the whole minute
        record = validate(self, *args, **kwargs)
        clock.now += 61
        return record

    monkeypatch.setattr(Trainer, "validate", validation_past_the_budget)
    cfg = tiny_cfg(max_steps=None, max_minutes=1, eval_every=1)
    trainer = Trainer(cfg, DATA, tmp_path / "run")
    done = [event for event in trainer.run() if isinstance(event, ev.Done)]
    assert trainer.step == 1 and done[0].reason == ev.StopReason.TIME
    package, state, _ = load_run(tmp_path / "run", trainer.device)
    # saved with the time the validation took: its minutes used up, not the 0 s before the validation
    assert state.elapsed_s >= 60 and used_up(package.training, state)
    assert package.training["wall_s"] >= 60
    # so a resume with more minutes plans a new schedule over them, rather than going on with the spent one
    more = Trainer(resume_config(tmp_path / "run", {"max_minutes": 2}), DATA, tmp_path / "run",
                   resume_from=tmp_path / "run")
    assert more.budget.planned is None and more.budget.position == 0.0


def test_a_call_that_pauses_right_after_a_validation_saves_the_time_it_took(tmp_path, monkeypatch):
    clock = HandClock()
    monkeypatch.setattr(trainer_module, "time", clock)
    validate = Trainer.validate

    def validation_of_20_s(self, *args, **kwargs):
        record = validate(self, *args, **kwargs)
        clock.now += 20
        return record

    monkeypatch.setattr(Trainer, "validate", validation_of_20_s)
    trainer = Trainer(tiny_cfg(max_steps=None, max_minutes=1, eval_every=1), DATA, tmp_path / "run")
    trainer.stop_rules.pause_after_s = 10  # a GPU call's share: over once the validation after step 1 ends
    assert not any(isinstance(event, ev.Done) for event in trainer.run())
    _, state, _ = load_run(tmp_path / "run", trainer.device)
    assert trainer.step == 1 and state.elapsed_s >= 20  # the next call goes on with 40 s of the minute, not 60


def test_auto_validations_are_spread_over_the_planned_steps():
    cfg = tiny_cfg(eval_every=None)
    assert eval_interval(cfg, 100) == 20 and eval_interval(cfg, None) is None
    assert eval_interval(tiny_cfg(eval_every=7), 100) == 7
    assert fit_warmup(preset_config("tiny"), 145) == 29 and fit_warmup(preset_config("tiny"), 10_000) == 150


