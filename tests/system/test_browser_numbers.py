"""Every numeric field of the Translate, Attention, Data and Inside tabs in a real browser (the Models and Compare
tabs have none): a value out of its range, typed in, is refused beside the field with the words of
playground.ui.numbers, and every other output keeps what it showed (no toast, no red "Error" badge, no chart
redrawn). One app and one Chromium for the whole file; screenshots at 1400 and 1024 px in tests/screenshots/.
Run it alone with `python -m pytest tests/system/test_browser_numbers.py`."""

from __future__ import annotations

import re

import pytest
from browser import BROWSER_MARKS, choose, expect, no_error_badges, open_tab, opened, shot, wait_idle

pytestmark = BROWSER_MARKS
MODEL = "demo-en-de"  # the server fixture's copy of the demo: 3 layers of 4 heads, 66 positions
BLOCK = "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' block ')][1]"
SEED_TOP = "9,223,372,036,854,775,807"


@pytest.fixture(scope="module")
def page(server):
    with opened(server[0]) as page:
        yield page


def box(page, label: str):
    """A number box: a gr.Number's own, or the one beside a slider."""
    return page.get_by_role("spinbutton", name=label, exact=True).or_(
        page.get_by_role("spinbutton", name=f"number input for {label}", exact=True))


def refused(page, label: str, value, message: str, kept, photo: str = "") -> None:
    """Typing `value` into the field puts `message` beside it (photographed as `photo`), and the outputs read by
    `kept` stay as they were, also once the field is left (Gradio's slider would snap its box into range then,
    drop the message and redraw); then the field gets its value back."""
    before = kept()
    field = box(page, label)
    old = field.input_value()
    field.fill(str(value))
    expect(field.locator(BLOCK)).to_contain_text(f"⚠️ {message}")
    field.press("Tab")
    no_error_badges(page)
    expect(field).to_have_value(str(value))
    expect(field.locator(BLOCK)).to_contain_text(f"⚠️ {message}")
    assert kept() == before, label
    if photo:
        both_widths(page, photo)
    fixed(page, label, old)


def method(page, name: str) -> None:
    """Choose a decoding method and wait, as a person would, for its controls to be shown (typing into them while
    the method's own events still ran lost the message beside the field once on CI; Gradio's page rewrites each
    control's loading status as events end)."""
    page.get_by_role("radio", name=name).check()
    wait_idle(page)


def fixed(page, label: str, value) -> None:
    """A value in range takes the message away (and is what the next action uses)."""
    field = box(page, label)
    field.fill(str(value))
    expect(field.locator(BLOCK)).not_to_contain_text("⚠️")
    wait_idle(page)


def grid_text(page, name: str):
    return lambda: page.get_by_role("grid", name=name).inner_text()


def plot_titles(page, *elem_ids: str):
    js = """ids => ids.map(id => { const el = document.querySelector('#' + id + ' .js-plotly-plot');
        const t = el && el.layout && el.layout.title; return t && (typeof t === 'string' ? t : t.text); })"""
    return lambda: page.evaluate(js, list(elem_ids))


def both_widths(page, name: str) -> None:
    shot(page, f"numbers-{name}-1400")
    page.set_viewport_size({"width": 1024, "height": 1000})
    shot(page, f"numbers-{name}-1024")
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_translate_refuses_each_number_beside_it_and_keeps_the_results(page):
    open_tab(page, "3 · Translate")
    choose(page, "Model", MODEL)
    page.get_by_role("button", name="Translate", exact=True).click()
    results = page.get_by_role("grid", name="Translations")
    expect(results.get_by_role("row")).to_have_count(3, timeout=60_000)  # the model loads first
    wait_idle(page)
    kept = lambda: (grid_text(page, "Translations")(), grid_text(page, "Next-token table")())  # noqa: E731
    refused(page, "Max output tokens (0 = auto)", -5, "Max output tokens must be a whole number from 0 to 65, not -5.",
            kept)
    refused(page, "Table row for the next-token view (1 = first)", 0,
            "Table row must be a whole number from 1 to 2, not 0.", kept)
    refused(page, "Candidates per step", 99, "Candidates per step must be a whole number from 1 to 20, not 99.", kept)
    method(page, "sample")
    for label, value, message in [
            ("Top-k (0 = off)", -3, "Top-k must be a whole number of at least 0, not -3."),
            ("Temperature", 5, "Temperature must be from 0.05 to 2, not 5."),
            ("Top-p", 0, "Top-p must be from 0.05 to 1, not 0."),
            ("Seed", -1, f"Seed must be a whole number from 0 to {SEED_TOP}, not -1."),
            ("samples per sentence", 99, "Samples per sentence must be a whole number from 1 to 8, not 99.")]:
        refused(page, label, value, message, kept)
    before = kept()
    box(page, "Top-k (0 = off)").fill("-3")
    page.get_by_role("button", name="Translate", exact=True).click()  # refused: the message stays, so do the results
    expect(box(page, "Top-k (0 = off)").locator(BLOCK)).to_contain_text("⚠️ Top-k must be")
    no_error_badges(page)
    assert kept() == before
    both_widths(page, "translate")
    fixed(page, "Top-k (0 = off)", 0)
    method(page, "beam")
    for label, value, message in [
            ("Beam size", 0, "Beam size must be a whole number from 1 to 16, not 0."),
            ("Length penalty α", -1, "Length penalty α must be from 0 to 2, not -1.")]:
        refused(page, label, value, message, kept)
    fixed(page, "Beam size", 3)
    refused(page, "n-best", 5, "n-best must be a whole number from 1 to 3, not 5.", kept)
    assert re.search(r"Ein|Eine|Heute", kept()[0])  # still the demo's greedy German


def test_attention_spans_the_models_layers_and_heads_and_refuses_others(page):
    open_tab(page, "4 · Attention")
    choose(page, "Model", MODEL)
    layer, head = (box(page, name).locator(BLOCK) for name in ("Layer", "Head"))
    expect(layer.get_by_test_id("max-value")).to_have_text("2")  # before anything is drawn: the model's own
    expect(head.get_by_test_id("max-value")).to_have_text("3")
    page.get_by_role("textbox", name="Source sentence").fill("Today a student swims.")
    page.get_by_role("button", name="Show attention").click()
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot')?.layout?.title?.text"
                           "?.endsWith('layer 0, head 0')")
    wait_idle(page)
    kept = plot_titles(page, "attention-plot", "attention-probe-plot")
    refused(page, "Head", 99, "Head must be a whole number from 0 to 3, not 99.", kept, photo="attention")
    refused(page, "Layer", 9, "Layer must be a whole number from 0 to 2, not 9.", kept)
    refused(page, "Validation", 99, "Validation must be a whole number from 0 to 2, not 99.", kept)
    fixed(page, "Head", 3)
    fixed(page, "Layer", 2)
    page.wait_for_function("() => document.querySelector('#attention-plot .js-plotly-plot')?.layout?.title?.text"
                           "?.endsWith('layer 2, head 3')")  # what the boxes say is what is drawn
    no_error_badges(page)


def test_data_refuses_a_split_out_of_range_and_keeps_the_summary(page):
    open_tab(page, "1 · Data")
    choose(page, "Built-in dataset", "Mini translation, English to German (mini-translation)")
    page.get_by_role("button", name="Load built-in dataset").click()
    summary = page.locator("#data-summary")
    expect(summary).to_contain_text("5% held out")
    wait_idle(page)
    refused(page, "Validation split", 0.9, "Validation split must be from 0.01 to 0.3, not 0.9.",
            lambda: summary.inner_text(), photo="data")
    fixed(page, "Validation split", 0.1)
    expect(summary).to_contain_text("10% held out")


def test_inside_refuses_each_number_beside_it_and_keeps_its_figures(page):
    open_tab(page, "6 · Inside")
    choose(page, "Model", MODEL)
    wait_idle(page, timeout=60)
    kept = plot_titles(page, "inside-padding-mask", "inside-look-ahead-mask", "inside-batching", "inside-embeddings")
    assert all(kept()), kept()
    for label, value, message in [
            ("Pairs in the batch", 99, "Pairs in the batch must be a whole number from 1 to 8, not 99."),
            ("Which pairs (seed)", -1, f"Which pairs (seed) must be a whole number from 0 to {SEED_TOP}, not -1."),
            ("Pair shown in the square masks", 6, "Pair shown must be a whole number from 1 to 4, not 6."),
            ("Batch tokens (0 = the model's training setting)", -5,
             "Batch tokens must be a whole number of at least 0, not -5."),
            ("Shuffle seed", 0.5, f"Shuffle seed must be a whole number from 0 to {SEED_TOP}, not 0.5."),
            ("Tokens", 10000, "Tokens must be a whole number from 20 to 500, not 10,000.")]:
        refused(page, label, value, message, kept, photo="inside" if label == "Pair shown in the square masks" else "")
