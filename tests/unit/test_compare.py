"""Runs side by side in the core: the settings that differ and the scores (playground.insight.compare), and
`python -m playground compare`."""

from __future__ import annotations

import json

import pytest

from playground.cli.main import main
from playground.errors import PackageError
from playground.insight.compare import differing_settings, load_runs


def test_differing_settings_and_scores(two_runs):
    runs = load_runs([two_runs / "slow", two_runs / "fast"])
    assert differing_settings(runs) == {"lr": [1e-3, 3e-3]}
    for run in runs:
        training = json.loads((two_runs / run.name / "training.json").read_text())
        assert run.scores["steps"] == 8 and run.scores["bleu"] == training["last"]["bleu"]
        assert run.steps == list(range(1, 9)) and [e["step"] for e in run.evals] == [4, 8]
        assert run.lr[-1] != 0 and len(run.elapsed) == 8 and run.elapsed == sorted(run.elapsed)
        assert run.seconds_at(8) == run.elapsed[-1] <= training["wall_s"] + 0.001  # recorded to the ms


def test_the_learning_rate_on_a_log_axis_draws_its_positive_values_only():
    from playground.insight import plots
    from playground.training.config import TrainConfig
    from playground.training.schedule import learning_rate

    cfg = TrainConfig.of(schedule="cosine", lr=5e-3, warmup_steps=4, max_steps=40)
    steps = list(range(1, 41))
    cosine = [learning_rate(cfg, step, 40) for step in steps]
    assert cosine[-1] == 0  # a cosine schedule's last step: on a log axis it took the axis down to 1e-10
    series = [("cosine", steps, cosine), ("from zero", [0, *steps], [0.0, *cosine])]
    fig = plots.overlay_figure(series, "Learning rate", "step", "learning rate", log_y=True)
    for trace in fig.data:
        assert list(trace.x) == steps[:-1] and list(trace.y) == cosine[:-1] and min(trace.y) > 0
    linear = plots.overlay_figure(series, "Learning rate", "step", "learning rate")
    assert list(linear.data[1].y) == [0.0, *cosine]  # a linear axis draws the zeros too


def test_refusals(two_runs):
    with pytest.raises(PackageError, match="at least two"):
        load_runs([two_runs / "slow"])
    with pytest.raises(PackageError, match="once"):
        load_runs([two_runs / "slow", two_runs / "slow"])
    with pytest.raises(PackageError, match="no-such"):
        load_runs([two_runs / "slow", two_runs / "no-such"])


def test_cli_prints_the_differences_and_json(two_runs, capsys):
    assert main(["compare", str(two_runs / "slow"), str(two_runs / "fast")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["setting", "slow", "fast"]
    assert out.splitlines()[1].split() == ["learning", "rate", "(lr)", "0.001", "0.003"]
    assert "BLEU" in out and "val loss" in out
    assert main(["compare", str(two_runs / "slow"), str(two_runs / "fast"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["runs"] == ["slow", "fast"] and result["differing_settings"] == {"lr": [0.001, 0.003]}
    assert main(["compare", str(two_runs / "slow")]) == 2
    assert "at least two" in capsys.readouterr().err


