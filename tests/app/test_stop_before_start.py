"""Stop pressed while a Train tab run has not begun training: queued behind another session's run (Gradio's queue
holds it, the tab has no trainer yet) or being prepared (tokenizer and model being built). Stop must still end it,
not answer "nothing is training" and let it start minutes later."""

from __future__ import annotations

from helpers import tiny_cfg

from playground.serving.library import Library
from playground.ui.state import Session
from playground.ui.tabs import train, train_run
from playground.ui.tabs.data import load_builtin
from playground.ui.tabs.train_progress import STOPPED_PENDING, STOPPING_PENDING


def started(session: Session) -> None:
    """What pressing Start does at once, before the run is queued."""
    train.before_run("⏳ waiting", session)


def test_stop_while_queued_keeps_the_run_from_starting(tmp_path):
    library, session = Library(tmp_path / "models"), Session()
    load_builtin(session, "reverse")
    started(session)
    assert train.stop_training(session) == STOPPING_PENDING
    updates = list(train_run.start_run(session, library, "never", tiny_cfg()))  # its turn in the queue comes
    assert updates[0][0] == STOPPED_PENDING and len(updates) == 1
    assert not (tmp_path / "models" / "never").exists()  # nothing reserved, nothing written
    assert not session.run_pending and not session.stop_asked
    started(session)  # the next Start is not stopped by the old press
    assert not session.stop_asked


def test_stop_while_the_run_is_prepared_ends_it_before_it_trains(tmp_path):
    library, session = Library(tmp_path / "models"), Session()
    load_builtin(session, "reverse")
    started(session)
    build = train_run.make_trainer

    def stop_pressed_while_building(*args, **kwargs):
        assert train.stop_training(session) == STOPPING_PENDING  # no trainer yet: Stop is noted
        return build(*args, **kwargs)

    train_run.make_trainer = stop_pressed_while_building
    try:
        updates = list(train_run.start_run(session, library, "prepared", tiny_cfg(max_steps=10**6)))
    finally:
        train_run.make_trainer = build
    assert updates[-1][0] == STOPPED_PENDING  # not "Done … Saved as prepared" with nothing saved
    assert not (tmp_path / "models" / "prepared").exists()
    assert session.trainer is None and not session.run_pending and not session.stop_asked
