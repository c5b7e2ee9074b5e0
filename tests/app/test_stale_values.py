"""What the page shows follows what the session holds now (issue 34, items 8 and 9): a picker keeps the model just
imported, a running tab says so when Start is pressed again, the Train status knows the data is loaded, the demo's
examples are for the demo, the Models table writes its counts with separators, the sliders span the model."""

from __future__ import annotations

import shutil

import gradio as gr
from helpers import DEMO, tiny_package

from playground.serving.library import Library
from playground.ui.state import Session


def test_the_models_picker_keeps_an_imported_model_and_turns_to_a_run_only_after_it(tmp_path):
    from playground.ui.app import pickers

    library = Library(tmp_path / "models")
    for name in ("trained-here", "imported"):
        tiny_package(library.models_dir / name)
    session = Session(run_dir=str(library.models_dir / "trained-here"))
    chosen = {"translate": None, "attention": None, "models": "imported", "resume": None, "inside": None}
    after_import = pickers(library, session, *chosen.values(), [])
    assert after_import[2]["value"] == "imported"  # not the run of an hour ago
    after_run = pickers(library, session, *chosen.values(), [], after_run=True)
    assert after_run[2]["value"] == after_run[5]["value"] == "trained-here"


def test_start_during_the_tabs_own_run_is_said_beside_the_buttons_and_keeps_its_charts(tmp_path):
    from playground.ui.tabs.train import before_run, busy

    session = Session(trainer=object(), run_dir=str(tmp_path / "first-run"))
    status, note, *charts = before_run("⏳ waiting", session)
    assert status == gr.skip() and all(c == gr.skip() for c in charts)
    assert note.startswith("⚠️ This tab is already training `first-run`")
    verdicts = busy(session, "second", lr=1e-3, dropout=0.1)
    assert len(verdicts) == 4 and verdicts[0] == gr.validate(False, note) and verdicts[1:] == [None] * 3
    session.trainer = None
    status, note, *charts = before_run("⏳ waiting", session)
    assert (status, note) == ("⏳ waiting", "")
    assert not any(isinstance(c, dict) for c in charts)  # the last run's charts and samples cleared, not skipped
    assert busy(session, "second")[0]["is_valid"]


def test_the_train_status_says_the_data_is_loaded_and_leaves_a_runs_line():
    from playground.data.builtin import read_builtin
    from playground.ui import texts
    from playground.ui.tabs.train import ready_line

    session = Session()
    assert ready_line(session, texts.TRAIN_START) == texts.TRAIN_START
    session.data, session.description = read_builtin("numbers", 64), "Built-in: numbers"
    ready = ready_line(session, texts.TRAIN_START)
    assert ready.startswith("Your data: **Built-in: numbers**") and "Load data" not in ready
    assert ready_line(session, ready) == ready
    assert ready_line(session, "✅ Trained `x` for 30 steps") == gr.skip()


def test_the_demo_examples_show_for_the_demo_only():
    from playground.ui.pickers import DEMO_MODEL
    from playground.ui.tabs.translate import demo_examples

    assert demo_examples(DEMO_MODEL)["visible"] and not demo_examples("my-model")["visible"]


def test_the_models_table_writes_counts_with_separators_and_keeps_numbers(tmp_path):
    from playground.ui.tabs.models import models_table

    models = tmp_path / "models"
    shutil.copytree(DEMO, models / DEMO.name, ignore=shutil.ignore_patterns("resume.*"))
    shown = gr.Dataframe(interactive=False).postprocess(models_table(Library(models), None))
    row = dict(zip(shown.headers, shown.data[0], strict=True))
    display = dict(zip(shown.headers, shown.metadata["display_value"][0], strict=True))
    assert isinstance(row["parameters"], int) and display["parameters"] == f"{row['parameters']:,}"
    assert "," in display["parameters"] and display["steps"] == f"{row['steps']:,}"
    assert display["final BLEU"] == f"{row['final BLEU']:g}"


def test_the_attention_sliders_span_the_models_layers_and_heads_before_any_maps():
    from playground.ui.tabs.attention import map_shape, sliders

    shape = {"n_encoder_layers": 2, "n_decoder_layers": 3, "n_heads": 4}
    assert map_shape(None, "cross", shape) == (3, 4) and map_shape(None, "encoder", shape) == (2, 4)
    layer, head = sliders(None, "encoder", 2, 3, shape)
    assert (layer["maximum"], layer["value"], head["maximum"], head["value"]) == (1, 1, 3, 3)
    assert sliders(None, "cross", 0, 0) == (gr.update(), gr.update())  # nothing known: left as they are
