"""One mechanism for refused actions (playground.ui.handlers.said_beside): a person's mistake is said beside the control
that caused it and leaves every other output as it was; only an unexpected failure is a gr.Error."""

import gradio as gr
import pytest

from playground.errors import DataError
from playground.ui.handlers import said_beside

SKIP = gr.skip()


def handler(x: str):
    if x == "bad":
        raise DataError("a header like en<TAB>de names the languages")
    if x == "bug":
        raise RuntimeError("an unexpected failure")
    return x.upper(), len(x)


def stream(x: str):
    yield "preparing", SKIP
    yield handler(x)


def test_a_refusal_goes_to_the_note_and_skips_every_other_output():
    with gr.Blocks():
        text, number, note = gr.Textbox(), gr.Number(), gr.Markdown()
    bound = said_beside(handler, [text, number], note)
    assert bound["outputs"] == [text, number, note]  # the note is added, last
    assert bound["fn"]("ok") == ("OK", 2, "")  # success clears an earlier refusal
    assert bound["fn"]("bad") == (SKIP, SKIP, "⚠️ a header like en&lt;TAB>de names the languages")
    with pytest.raises(gr.Error, match="Something went wrong on the server") as unexpected:
        bound["fn"]("bug")
    assert "an unexpected failure" not in str(unexpected.value)  # the details stay in the server log


def test_a_note_among_the_outputs_and_a_single_output():
    with gr.Blocks():
        status, chart = gr.Markdown(), gr.Plot()
    bound = said_beside(stream, [status, chart], status)
    assert bound["outputs"] == [status, chart]
    assert list(bound["fn"]("ok")) == [("preparing", SKIP), ("OK", 2)]
    assert list(bound["fn"]("bad")) == [("preparing", SKIP), ("⚠️ a header like en&lt;TAB>de names the languages",
                                                               SKIP)]
    alone = said_beside(lambda x: handler(x)[0], [status], status)
    assert alone["fn"]("ok") == "OK" and alone["fn"]("bad").startswith("⚠️ a header")  # one output: a bare value
