"""What the page says about a run and its data: the progress line only moves forward, and notes mark what no
longer matches what was asked."""

import re

import pytest
from helpers import DEMO

from playground.training import events as ev
from playground.training.presets import preset_config


def test_the_progress_line_only_moves_forward_and_says_what_the_run_does():
    from playground.ui.tabs.train_progress import Progress

    cfg = preset_config("tiny", max_minutes=1.0)
    progress = Progress("first", cfg)  # a minutes budget: no steps budget
    # a re-fitted plan going 47 -> 52 -> 49 -> 50 used to show as the total, and the share went 47% -> 46%
    steps = [ev.Step(step, 0.1, 5.0, 1e-3, 1.0, 1000.0, elapsed, 10.0, planned)
             for step, elapsed, planned in [(22, 28.0, 47), (24, 29.5, 52), (25, 29.0, 49), (26, 31.0, 50)]]
    lines = [progress.line(e, None) for e in steps]
    shares = [progress.share(e) for e in steps]
    assert shares == sorted(shares) and shares[-1] == pytest.approx(31 / 60)
    assert not any(f"/{e.planned_steps}" in line for e, line in zip(steps, lines)), lines
    assert "of 1:00" in lines[0]
    assert progress.line(steps[-1], None, doing="validating").startswith("🔎 Validating `first` at step 26")
    assert progress.line(steps[-1], None, doing="saving").startswith("💾 Saving `first`")
    resumed = Progress("more", preset_config("tiny", max_minutes=None, max_steps=100), budget_steps=100)
    assert "step **40**/100" in resumed.line(steps[0].__class__(40, 1, 5.0, 1e-3, 1.0, 1.0, 60.0, 1.0, 100), None)


def test_what_the_page_shows_is_marked_when_it_is_no_longer_what_was_asked(tmp_path):
    from playground.packages.store import load_package
    from playground.serving.work import about
    from playground.ui.state import Session
    from playground.ui.tabs.data import forget_files, load_builtin, load_files
    from playground.ui.tabs.inside import language_warning

    session = Session()
    load_builtin(session, "mini-translation")
    loaded = session.description
    # a file that cannot be read on its own: the refusal says the stats below are still the earlier data's
    (tmp_path / "one.en").write_text("hello world\n", encoding="utf-8")
    with pytest.raises(Exception, match=re.escape(f"still the data loaded before ({loaded})")):
        load_files(session, [str(tmp_path / "one.en")])
    # the upload box cleared: the summary says its pairs stay loaded
    summary = forget_files(session)
    assert summary.startswith(f"### {loaded}") and "The upload box was cleared; these pairs stay loaded" in summary
    # a model of another language pair than the data is said before any Inside view
    demo = about(load_package(DEMO, "cpu"))  # what a worker answers about a model (playground.serving.work)
    assert language_warning(session, demo) == ""  # the demo's en -> de, the mini-translation data's too
    session.tgt_lang = "fr"
    assert "translates `en` → `de`, your data is `en` → `fr`" in language_warning(session, demo)
