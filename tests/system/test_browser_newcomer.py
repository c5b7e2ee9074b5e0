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
from browser import CHROMIUM, SHOTS, expect, no_error_badges, no_error_toasts, open_tab, opened, wait_idle

from playground.training.form import FIELDS

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH")]
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
    inside_its_container(page, "Settings that differ")
    inside_its_container(page, "Scores (the final validation of each run)")
    page.screenshot(path=str(SHOTS / "i27-compare-1024.png"), full_page=True)
