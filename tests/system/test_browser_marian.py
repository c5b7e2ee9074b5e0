"""A real translation model inside, in a real browser (issue 35): a 🤗 transformers Marian checkpoint, built here
with transformers (tiny, random weights, SentencePiece models trained in the test: tests/marian_checkpoints.py),
uploaded as a zip on the Models tab, translates, shows its cross-attention, and is fine-tuned from the Train tab's
"Start from". Screenshots of the Models tab's import controls at 1400 and 1024 px go to tests/screenshots/."""

from __future__ import annotations

import re
import zipfile

import pytest
from browser import (
    BROWSER_MARKS,
    PLOT_TRACES,
    SHOTS,
    choose,
    expect,
    no_error_toasts,
    open_tab,
    opened,
    shot,
    traces,
    type_number,
    wait_idle,
)
from marian_checkpoints import make_marian_checkpoint

pytestmark = BROWSER_MARKS
NAME = "opus-mt-en-de"


@pytest.fixture(scope="module")
def marian_zip(tmp_path_factory):
    folder = make_marian_checkpoint(tmp_path_factory.mktemp("checkpoint") / NAME)
    path = tmp_path_factory.mktemp("zip") / f"{NAME}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, f"{NAME}/{f.name}")
    return path


@pytest.fixture(scope="module")
def page(server):
    with opened(server[0]) as page:
        yield page


def test_a_marian_zip_is_imported_translates_shows_attention_and_is_fine_tuned(page, server, marian_zip):
    models_dir = server[1]
    # 5 · Models: the zip uploaded, converted, listed
    open_tab(page, "5 · Models")
    expect(page.locator("#models-hub-repo")).to_be_visible()
    for width in (1400, 1024):
        page.set_viewport_size({"width": width, "height": 1000})
        page.locator("#models-upload").scroll_into_view_if_needed()
        page.locator("#models-upload").screenshot(path=str(SHOTS / f"marian-import-controls-{width}.png"))
        page.locator("#models-hub-fetch").first.screenshot(path=str(SHOTS / f"marian-hub-box-{width}.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.locator("#models-upload input[type=file]").set_input_files(str(marian_zip))
    status = page.locator("#models-status")
    expect(status).to_contain_text(re.compile(rf"Imported {NAME} from {NAME}: translates en → de"), timeout=60_000)
    assert (models_dir / NAME / "model.safetensors").is_file()
    expect(page.get_by_role("grid", name=re.compile("^Model packages"))).to_contain_text(NAME)
    shot(page, "marian-01-imported")

    # 3 · Translate: the imported model translates (random weights: some German-side pieces)
    open_tab(page, "3 · Translate")
    choose(page, "Model", NAME)
    page.get_by_role("textbox", name="Source sentences (one per line)").fill("the small cat sees a house")
    page.get_by_role("button", name="Translate", exact=True).click()
    expect(page.get_by_text(re.compile(rf"1 sentence with {NAME} .*greedy"))).to_be_visible()
    expect(page.get_by_role("grid", name="Translations").get_by_role("row")).to_have_count(2)

    # 4 · Attention: its cross-attention drawn
    open_tab(page, "4 · Attention")
    choose(page, "Model", NAME)
    page.get_by_role("textbox", name="Source sentence").fill("the small cat sees a house")
    page.get_by_role("button", name="Show attention").click()
    title = "Cross-attention (decoder → encoder): layer 0, head 0"
    page.wait_for_function(f"() => ({PLOT_TRACES})({title!r}) !== null")
    assert traces(page, title)[0]["type"] == "heatmap"
    shot(page, "marian-02-attention")

    # 2 · Train: Start from the imported model: the fine-tune preset, its model settings locked; a short run
    open_tab(page, "1 · Data")
    choose(page, "Built-in dataset", "Sequence reversal (reverse)")
    page.get_by_role("button", name="Load built-in dataset").click()
    expect(page.get_by_text(re.compile(r"pairs kept"))).to_be_visible()
    open_tab(page, "2 · Train")
    page.get_by_role("textbox", name=re.compile("^Model name")).fill("tuned")
    choose(page, "Start from", NAME)
    expect(page.get_by_role("radio", name="fine-tune")).to_be_checked()
    wait_idle(page)  # the fine-tune preset writes the form in events of its own: typing meanwhile was overwritten
    page.get_by_role("button", name=re.compile("Advanced: every hyperparameter")).click()
    expect(page.get_by_role("spinbutton", name="d_model", exact=True)).to_be_disabled()
    expect(page.get_by_role("spinbutton", name="d_model", exact=True)).to_have_value("16")
    for label, value in {"Max steps": 4, "Max minutes": 0, "Sentences decoded per validation": 4}.items():
        type_number(page, label, value)
    for label, option in {"Device": "cpu", "Precision": "fp32"}.items():
        choose(page, label, option)
    shot(page, "marian-03-fine-tune-form")
    page.get_by_role("button", name="▶ Start training").click()
    expect(page.locator("#train-status")).to_contain_text(re.compile(r"Done.*4 steps"), timeout=60_000)
    card = (models_dir / "tuned" / "README.md").read_text(encoding="utf-8")
    assert f"fine-tuned from **{NAME} (from {NAME}; license: " in card
    no_error_toasts(page)
    shot(page, "marian-04-fine-tuned")
