"""What a newcomer hit the second and third time round, in a real browser at 1024 px: a value typed outside its range
is refused beside its field (never clamped, every number field of the Train tab, a vocabulary of 10^9 with its cost)
while the rest of the page keeps its values, and the next-token and Compare tables fit inside their containers.
Uses the browser tests' server (tests/system/conftest.py: the app on a copy of the demo model) and
their helpers (tests/system/browser.py)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from browser import (
    BROWSER_MARKS,
    SHOTS,
    expect,
    no_error_badges,
    no_error_toasts,
    open_tab,
    opened,
    wait_idle,
)

from playground.training.form import FIELDS

pytestmark = BROWSER_MARKS
NUMBERS = [name for name, s in FIELDS.items() if s.kind in (int, float)]  # the Train form's number fields


@pytest.fixture(scope="module")
def narrow_page(server):
    with opened(server[0], 1024, 900) as page:
        yield page


def inside_its_container(page, grid: str) -> None:
    """Every column header of the table lies within the table's own box (no column cut or scrolled away)."""
    table = page.get_by_role("grid", name=grid)
    outer = table.bounding_box()
    headers = table.get_by_role("columnheader")
    assert headers.count() >= 2
    for i in range(headers.count()):
        box = headers.nth(i).bounding_box()
        assert outer["x"] - 1 <= box["x"] and box["x"] + box["width"] <= outer["x"] + outer["width"] + 1, \
            (grid, headers.nth(i).inner_text(), box, outer)
    assert outer["x"] + outer["width"] <= page.viewport_size["width"]


def test_a_dropout_out_of_range_is_refused_beside_it_and_nothing_starts(narrow_page):
    page = narrow_page
    open_tab(page, "2 · Train")
    page.get_by_text("Advanced: every hyperparameter").click()
    dropout = page.get_by_role("spinbutton", name="Dropout", exact=True)
    dropout.fill("1.5")
    dropout.press("Tab")
    # said under the field's own label, the value left as typed
    block = page.locator("label", has=dropout)
    expect(block).to_contain_text("Dropout must be from 0 to below 1, not 1.5")
    expect(dropout).to_have_value("1.5")
    page.get_by_role("button", name="▶ Start training").click()
    status = page.locator("#train-status")
    expect(status).to_contain_text("Dropout must be from 0 to below 1, not 1.5")
    expect(status).not_to_contain_text("Training `")
    expect(dropout).to_have_value("1.5")
    no_error_toasts(page)
    page.screenshot(path=str(SHOTS / "i27-dropout-refused-1024.png"), full_page=True)
    dropout.fill("0.1")
    dropout.press("Tab")
    expect(block).not_to_contain_text("must be from")


def out_of_range(name: str) -> str:
    s = FIELDS[name]
    return "-1" if s.optional or s.low <= 0 else str(int(s.low) - 1)


def page_state(page) -> dict:
    """What the Train tab shows besides the form's notes: every field's value, the status and the LR chart."""
    values = {name: page.get_by_role("spinbutton", name=FIELDS[name].label, exact=True).input_value()
              for name in NUMBERS}
    lr_chart = page.evaluate("""() => { const el = document.querySelector('#train-lr-plot .js-plotly-plot');
                                        return el ? JSON.stringify(el.data.map(d => d.y.length)) : null; }""")
    return {"values": values, "status": page.locator("#train-status").inner_text(), "lr chart": lr_chart}


def advanced_form(page):
    """The Train tab with its Advanced accordion open."""
    open_tab(page, "2 · Train")
    if not page.get_by_role("spinbutton", name="Dropout", exact=True).is_visible():
        page.get_by_text("Advanced: every hyperparameter").click()
    wait_idle(page)
    return page


def test_a_vocabulary_of_a_billion_and_the_issue_s_values_are_refused_as_typed(narrow_page):
    page = advanced_form(narrow_page)
    for label, typed, words in [
        ("Vocabulary size", "1000000000", "not 1,000,000,000: training its tokenizer alone would reserve about "
                                          "67.1 GB; that is a model of"),
        ("Max tokens per sentence", "999999", "must be from 1 to 4,094, not 999,999"),
        ("Seed", "-1", "must be from 0 to 9,223,372,036,854,775,807, not -1"),
        ("Learning rate", "-1", "Learning rate must be above 0, not -1"),
    ]:
        box = page.get_by_role("spinbutton", name=label, exact=True)
        old = box.input_value()
        box.fill(typed)
        box.press("Tab")
        expect(page.locator("label", has=box)).to_contain_text(words)
        if label == "Vocabulary size":
            page.screenshot(path=str(SHOTS / "i34-vocabulary-refused.png"), full_page=True)
        box.fill(old)
        box.press("Tab")
        expect(page.locator("label", has=box)).not_to_contain_text("⚠️")
    no_error_badges(page)


def test_each_number_out_of_range_is_refused_beside_it_and_nothing_else_changes(narrow_page):
    page = advanced_form(narrow_page)
    before = page_state(page)
    typed = {name: out_of_range(name) for name in NUMBERS}
    for name, value in typed.items():
        box = page.get_by_role("spinbutton", name=FIELDS[name].label, exact=True)
        box.fill(value)
        box.press("Tab")
    for name, value in typed.items():  # each refused beside itself, in the words the CLI uses
        box = page.get_by_role("spinbutton", name=FIELDS[name].label, exact=True)
        words = re.escape(f"⚠️ {FIELDS[name].label} must be") + r".*not " + re.escape(value)
        expect(page.locator("label", has=box)).to_contain_text(re.compile(words))
    wait_idle(page)
    after = page_state(page)
    assert after["values"] == {**before["values"], **typed}  # as typed, never clamped; no other field moved
    assert (after["status"], after["lr chart"]) == (before["status"], before["lr chart"])  # the run panel as it was
    no_error_badges(page)
    page.screenshot(path=str(SHOTS / "i34-every-number-refused.png"), full_page=True)
    box = page.get_by_role("spinbutton", name=FIELDS["lr"].label, exact=True)
    box.fill(before["values"]["lr"])  # a value put right loses its note at once
    box.press("Tab")
    expect(page.locator("label", has=box)).not_to_contain_text("⚠️")


def fresh_form(page):
    """The Advanced form with the tiny preset's values (another preset, then tiny: a preset writes every field)."""
    page = advanced_form(page)
    for preset in ("small", "tiny"):
        page.get_by_role("radio", name=preset, exact=True).check()
        wait_idle(page, timeout=60)
    expect(page.get_by_role("spinbutton", name="d_model", exact=True)).to_have_value("128")
    expect(page.locator("#train-summary")).not_to_contain_text("⚠️")
    return page


def typed(page, label: str, value: str):
    box = page.get_by_role("spinbutton", name=label, exact=True)
    box.fill(value)
    box.press("Tab")
    return box


def test_heads_that_do_not_divide_d_model_are_said_beside_both_while_another_field_is_refused(narrow_page):
    page = fresh_form(narrow_page)
    vocabulary = typed(page, "Vocabulary size", "1000000000")  # another field out of range: the heads still say it
    heads = typed(page, "Attention heads", "3")
    words = "Attention heads must divide d_model: 3 does not divide 128 (2 or 4 heads would, or d_model 126 or 129)"
    expect(page.locator("label", has=heads)).to_contain_text(f"⚠️ {words}")
    d_model = page.get_by_role("spinbutton", name="d_model", exact=True)
    expect(page.locator("label", has=d_model)).to_contain_text(words)
    page.screenshot(path=str(SHOTS / "walk-heads-refused-1024.png"), full_page=True)
    typed(page, "Vocabulary size", "3000")
    expect(page.locator("label", has=vocabulary)).not_to_contain_text("⚠️")
    expect(page.locator("label", has=heads)).to_contain_text(words)  # alone now: still said, only beside the two
    expect(page.locator("label", has=vocabulary)).not_to_contain_text("divide")
    typed(page, "Attention heads", "4")
    expect(page.locator("label", has=heads)).not_to_contain_text("⚠️")
    expect(page.locator("label", has=d_model)).not_to_contain_text("⚠️")
    no_error_badges(page)


def test_the_summary_gives_each_refused_field_its_own_line(narrow_page):
    page = fresh_form(narrow_page)
    typed(page, "Vocabulary size", "1000000000")
    typed(page, "Learning rate", "-1")
    summary = page.locator("#train-summary")
    expect(summary).to_contain_text("Learning rate must be above 0, not -1.")
    wait_idle(page)  # else Gradio's timer ("0.0s") may still sit over the summary
    lines = [line.strip() for line in summary.inner_text().splitlines() if line.strip()]
    assert lines[0].startswith("⚠️ Vocabulary size must be from 8 to 1,000,000, not 1,000,000,000"), lines
    assert lines[1] == "Learning rate must be above 0, not -1.", lines
    assert lines[2] == "Change them above, then start again.", lines
    typed(page, "Vocabulary size", "3000")
    typed(page, "Learning rate", "0.005")
    expect(summary).not_to_contain_text("⚠️")


def test_typed_values_stay_through_an_estimate_a_dataset_and_other_tabs(narrow_page):
    """Only choosing a preset writes the form: typing during an estimate, loading a dataset and going to other tabs
    and back leave what was typed."""
    page = fresh_form(narrow_page)
    values = {"Learning rate": "0.0123", "Vocabulary size": "2500", "Warmup steps": "77"}
    page.get_by_role("button", name="⏱ Estimate duration").click()
    for label, value in values.items():  # typed while it times the configuration (an edit drops that timing)
        page.get_by_role("spinbutton", name=label, exact=True).fill(value)
    wait_idle(page, timeout=60)
    open_tab(page, "1 · Data")
    page.get_by_role("button", name="Load built-in dataset").click()
    expect(page.locator("#data-summary")).to_contain_text("held out", timeout=60_000)
    for tab in ("3 · Translate", "2 · Train", "5 · Models", "2 · Train"):
        open_tab(page, tab)
        wait_idle(page, timeout=60)
    for label, value in values.items():
        box = page.get_by_role("spinbutton", name=label, exact=True)
        expect(box).to_have_value(value)
        expect(page.locator("label", has=box)).not_to_contain_text("⚠️")
    expect(page.locator("#train-summary")).to_contain_text("parameters")
    no_error_badges(page)
    for label, value in (("Learning rate", "0.005"), ("Vocabulary size", "3000"), ("Warmup steps", "150")):
        typed(page, label, value)


def test_the_next_token_and_compare_tables_fit_at_1024_px(narrow_page, server):
    page, models_dir = narrow_page, server[1]
    # a second package to compare the demo with: the same weights, another learning rate on record
    other = models_dir / "demo-en-de-lower-lr"
    shutil.copytree(models_dir / "demo-en-de", other, dirs_exist_ok=True)
    training = json.loads((other / "training.json").read_text())
    training["config"]["lr"] = training["config"]["lr"] / 3
    (other / "training.json").write_text(json.dumps(training))
    page.reload()

    open_tab(page, "3 · Translate")
    page.get_by_role("button", name="Translate", exact=True).click()
    expect(page.get_by_role("grid", name="Translations")).to_contain_text("Heute")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_role("grid", name="Next-token table")).to_contain_text("Heute (")
    wait_idle(page)  # a table's columns are fitted in an event of their own
    inside_its_container(page, "Next-token table")
    inside_its_container(page, "Translations")
    page.screenshot(path=str(SHOTS / "i27-next-token-1024.png"), full_page=True)

    open_tab(page, "7 · Compare")
    picker = page.get_by_label("Models to compare")
    for name in ("demo-en-de", "demo-en-de-lower-lr"):
        picker.click()
        page.get_by_role("option", name=name, exact=True).click()
    page.get_by_role("button", name="Compare", exact=True).click()
    settings = page.get_by_role("grid", name="Settings that differ")
    expect(settings).to_contain_text(re.compile(r"learning rate \(lr\)"))
    wait_idle(page)
    inside_its_container(page, "Settings that differ")
    inside_its_container(page, "Scores (the final validation of each run)")
    page.screenshot(path=str(SHOTS / "i27-compare-1024.png"), full_page=True)
