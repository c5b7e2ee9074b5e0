"""What a newcomer hit the second time round, in a real browser at 1024 px: a value typed outside its range is
refused beside its field (never clamped), and the next-token and Compare tables fit inside their containers.
Uses the browser tests' server (tests/system/conftest.py: the app on a copy of the demo model) and
their helpers (tests/system/browser.py)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from browser import CHROMIUM, SHOTS, expect, no_error_toasts, open_tab, opened

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="no `chromium` on PATH")]


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
