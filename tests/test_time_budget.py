"""A run whose minutes budget binds: the schedule fits the steps the run actually gets. The issue's case: the `tiny`
preset on 3,000 Multi30k-sized pairs with a budget of about 150 steps used to stay in its 150-step warmup to the
end and validate only once, at the end."""

import random

import pytest
from conftest import tiny_cfg, reverse_pairs

from playground.training import events as ev
from playground.training.checkpoint import load_run, resume_config
from playground.training.estimate import estimate_training
from playground.training.presets import preset_config
from playground.training.schedule import VALIDATIONS_PER_RUN, eval_interval, fit_warmup
from playground.training.inputs import TrainData
from playground.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")
SYLLABLES = "ka lo mi ne tu ra se vi do pa ge li mo fa nu be ri so ta ve".split()


def multi30k_like(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs shaped like Multi30k's (8 to 18 words a side, a vocabulary of a few thousand words, Zipf-like use)."""
    rng = random.Random(seed)
    vocab = [["".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(4000)] for _ in range(2)]
    weights = [1 / (rank + 1) for rank in range(4000)]

    def sentence(side: int) -> str:
        return " ".join(rng.choices(vocab[side], weights, k=rng.randint(8, 18)))

    return [(sentence(0), sentence(1)) for _ in range(n)]


def test_a_short_minutes_budget_leaves_warmup_and_validates_along_the_way(tmp_path):
    pairs = multi30k_like(3000)
    data = TrainData(pairs[:2850], pairs[2850:], "en", "fr")
    cfg = preset_config("tiny", device="cpu", precision="fp32")
    assert cfg.warmup_steps == 150 and cfg.eval_every is None  # the preset validates "auto"
    timing = estimate_training(cfg, seq_len=15)
    # a budget that fits about 150 steps here, validations included
    cfg.max_minutes = (150 * timing.seconds_per_step + VALIDATIONS_PER_RUN * timing.eval_seconds) / 60
    trainer = Trainer(cfg, data, tmp_path / "run")
    events = list(trainer.run())

    done = events[-1]
    assert isinstance(done, ev.Done) and done.reason == "time budget reached", done
    steps = done.summary["steps"]
    evals = [e.step for e in events if isinstance(e, ev.Eval)]
    lrs = trainer.history.lr
    assert lrs.index(max(lrs)) < 0.4 * steps, (lrs.index(max(lrs)), steps)  # a warmup fitted to the run, not 150
    assert max(lrs) == pytest.approx(cfg.lr, rel=0.15), max(lrs)  # the peak was reached: warmup ended ...
    assert lrs[-1] < max(lrs)  # ... and the rate decays after it
    assert len([s for s in evals if s < steps]) >= 3, (evals, steps)  # validations during the run, not only at the end
    assert done.summary["first_plan"] and steps > 20


def test_the_fitted_schedule_is_saved_and_resumed(tmp_path):
    cfg = tiny_cfg(max_steps=None, max_minutes=0.05, warmup_steps=1000, eval_every=None)
    data = TrainData(reverse_pairs(200), reverse_pairs(10, seed=1))
    # stopped half-way (or a chunked run's call ended): the next call goes on where the schedule stood
    trainer = Trainer(cfg, data, tmp_path / "run")
    for event in trainer.run():
        if isinstance(event, ev.Step) and event.step == 20:
            trainer.stop()
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


def test_auto_validations_are_spread_over_the_planned_steps():
    cfg = tiny_cfg(eval_every=None)
    assert eval_interval(cfg, 100) == 20 and eval_interval(cfg, None) is None
    assert eval_interval(tiny_cfg(eval_every=7), 100) == 7
    assert fit_warmup(preset_config("tiny"), 145) == 29 and fit_warmup(preset_config("tiny"), 10_000) == 150


def test_the_form_says_auto_with_a_zero():
    from playground.training.form import build_config, preset_values

    values = preset_values("tiny")
    assert values["eval_every"] == 0  # the field reads "Validate every (steps, 0 = auto)"
    assert build_config(values).eval_every is None and build_config({**values, "eval_every": 50}).eval_every == 50
