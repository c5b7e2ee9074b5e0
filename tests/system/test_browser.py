"""The web app in a real browser: Playwright drives Debian's Chromium through every tab the way a person would
(load a built-in dataset, train a tiny model and watch its loss chart grow, translate with the demo model greedily
and with beam search, look at cross-attention, find the new package on the Models tab) and saves a numbered
screenshot at each stage in tests/screenshots/ (gitignored).

Needs the `playwright` Python package (requirements-test.txt) and a `chromium` on PATH (`.ci/run` installs
Debian's); no `playwright install` is needed, the system browser is used. Skipped, with the reason, without them.
Run it alone with `python -m pytest -m browser`."""

from __future__ import annotations

import re
import time
import warnings
from pathlib import Path

import pytest
from browser import (
    BROWSER_MARKS,
    CHROMIUM,
    CHROMIUM_ARGS,
    PLOT_TRACES,
    RECORD_LOSS_CHART,
    SHOTS,
    choose,
    expect,
    key_column_visible,
    new_page,
    no_error_badges,
    no_error_toasts,
    open_tab,
    refused,
    shot,
    sync_api,
    traces,
    type_number,
    wait_idle,
)

pytestmark = BROWSER_MARKS
MODEL = "browser-run"
# held out (assets/datasets/mini-translation/test.tsv, absent from train.tsv); the demo model gets both exactly
# right, greedy and beam (checked on its step-1000 and step-1500 checkpoints; pick others if it is retrained)
HELD_OUT = {"Today a student swims.": "Heute schwimmt ein Student.",
            "She follows a child.": "Sie folgt einem Kind."}
STEPS = 480  # 3-8 s of training on two CPU cores: long enough to photograph the chart half-way, short enough for CI
# what a person types in the Advanced accordion for a run of a few seconds on two busy CPU cores
TINY_FORM = {"Encoder layers": 1, "Decoder layers": 1, "d_model": 32,
             "Feed-forward size (d_ff)": 64, "Max tokens per sentence": 32, "Vocabulary size": 200,
             "Warmup steps": 20, "Batch tokens": 512, "Max steps": STEPS, "Max minutes": 0,
             "Validate every (steps, 0 = auto)": STEPS // 3, "Sentences decoded per validation": 16}
TINY_CHOICES = {"Device": "cpu", "Precision": "fp32"}



@pytest.fixture(scope="module")
def page(server):
    SHOTS.mkdir(exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        page = new_page(browser)
        page.js_errors = []
        page.on("pageerror", lambda err: page.js_errors.append(str(err)))
        page.goto(server[0])
        yield page
        browser.close()


def test_a_newcomer_is_refused_politely_and_sees_the_key_columns(page, server, tmp_path):
    expect(page.get_by_role("heading", name="Transformer Playground")).to_be_visible(timeout=60_000)
    wait_idle(page)

    # first visit: the Translate tab holds sentences the demo knows; one click translates them
    open_tab(page, "3 · Translate")
    expect(page.get_by_role("textbox", name="Source sentences (one per line)")).to_have_value(
        "\n".join(list(HELD_OUT)))
    page.get_by_role("button", name="Translate", exact=True).click()
    results = page.get_by_role("grid", name="Translations")
    for german in HELD_OUT.values():  # the first translation loads the model: 8-11 s on two busy cores
        expect(results).to_contain_text(german, timeout=60_000)
    key_column_visible(page, "Translations", "translation")
    shot(page, "n17-01-translate-first-visit")
    # the Attention tab starts from the sentence just translated
    open_tab(page, "4 · Attention")
    expect(page.get_by_role("textbox", name="Source sentence")).to_have_value(next(iter(HELD_OUT)))

    # Start with no data
    open_tab(page, "2 · Train")
    page.get_by_role("button", name="▶ Start training").click()
    refused(page, "#train-status", "Load data on the Data tab first")
    shot(page, "n17-02-train-without-data")

    # one side of two aligned files, then the other: the second upload is added to the first
    open_tab(page, "1 · Data")
    (tmp_path / "corpus.en").write_text("hello world\ngood morning\nthank you\n", encoding="utf-8")
    (tmp_path / "corpus.de").write_text("hallo welt\nguten morgen\ndanke\n", encoding="utf-8")
    (tmp_path / "more.tsv").write_text("a\tb\n", encoding="utf-8")
    upload = page.locator("input[type=file]").first
    upload.set_input_files(str(tmp_path / "corpus.en"))
    refused(page, "#data-note", "upload the other side now")
    upload.set_input_files(str(tmp_path / "corpus.de"))
    expect(page.get_by_text("3 pairs kept")).to_be_visible()
    preview = page.get_by_role("grid", name="First 20 pairs")
    expect(preview.get_by_role("columnheader", name="target (de)")).to_be_visible()
    no_error_badges(page)
    # a third file (added to the two in the box) is refused; the loaded data stays on the page, usable
    upload.set_input_files(str(tmp_path / "more.tsv"))
    refused(page, "#data-note", "3 files were uploaded")
    expect(preview).to_contain_text("guten morgen")
    shot(page, "n17-03-data-third-file")

    # Delete without ticking the box
    open_tab(page, "5 · Models")
    page.get_by_role("button", name="🗑 Delete").click()
    refused(page, "#models-status", "Tick")
    expect(page.get_by_role("grid", name=re.compile("^Model packages"))).to_contain_text("demo-en-de")
    shot(page, "n17-04-delete-unticked")

    # at 1024 px the key column of each table is still in sight
    page.set_viewport_size({"width": 1024, "height": 900})
    try:
        key_column_visible(page, "Model packages (click a row)", "name", min_width=60)
        open_tab(page, "1 · Data")
        key_column_visible(page, "First 20 pairs", "target (de)")
        shot(page, "n17-05-data-1024")
        open_tab(page, "3 · Translate")
        key_column_visible(page, "Translations", "translation")
        shot(page, "n17-06-translate-1024")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
    assert not page.js_errors, page.js_errors
    page.goto(server[0])  # a fresh session for the next test


# ----------------------------------------------------------------------------------------------------------
# A person clicks through every tab: one test per stage, on the same page (one browser session), so that each failure
# shows on its own; the Models and Compare stages need the Train stage's package and are skipped without it


@pytest.fixture(scope="module")
def timings():
    """Seconds per stage, printed after the last one."""
    seconds = {}
    yield seconds
    print("stage seconds:", {k: round(v, 1) for k, v in seconds.items()})


def load_reverse(page) -> None:
    """1 · Data: the reversal toy task loaded (the Train stage needs data whether or not the Data stage passed)."""
    open_tab(page, "1 · Data")
    choose(page, "Built-in dataset", "Sequence reversal (reverse)")
    page.get_by_role("button", name="Load built-in dataset").click()
    expect(page.get_by_text(re.compile(r"pairs kept"))).to_be_visible()


def trained_here(models_dir: Path) -> None:
    if not (models_dir / MODEL / "model.safetensors").is_file():
        pytest.skip(f"the Train stage saved no {MODEL} (see its failure)")


def test_the_start_page_draws_the_default_data(page, timings):
    start = time.monotonic()
    expect(page.get_by_role("heading", name="Transformer Playground")).to_be_visible(timeout=60_000)
    page.wait_for_function(f"() => ({PLOT_TRACES})('Sentence lengths') !== null")
    wait_idle(page)
    shot(page, "00-start-page")
    timings["start"] = time.monotonic() - start


def test_data_tab_loads_a_builtin_dataset(page, timings):
    # 1 · Data: pick the reversal toy task, see its summary, preview and length histogram
    start = time.monotonic()
    load_reverse(page)
    expect(page.get_by_text("Built-in: Sequence reversal")).to_be_visible()
    preview = page.get_by_role("grid", name="First 20 pairs")
    expect(preview.get_by_role("columnheader", name="source (seq)")).to_be_visible()
    expect(preview.get_by_role("columnheader", name="target (rev)")).to_be_visible()
    first_pair = preview.get_by_role("row").nth(1).get_by_role("gridcell")
    src, tgt = first_pair.nth(0).inner_text().strip(), first_pair.nth(1).inner_text().strip()
    assert src.split() == tgt.split()[::-1] and len(src.split()) > 1, (src, tgt)
    assert page.get_by_role("textbox", name="Source language").input_value() == "seq"
    expect(page.get_by_role("spinbutton", name="number input for Validation split")).to_have_value("0.05")
    hist = traces(page, "Sentence lengths")
    assert hist and sum(t["n"] for t in hist) > 0, hist
    no_error_toasts(page)
    shot(page, "01-data-reverse-loaded")
    timings["data"] = time.monotonic() - start


def test_train_tab_trains_a_tiny_model_and_its_loss_chart_grows(page, server, timings):
    # 2 · Train: a tiny configuration in the Advanced accordion, Start, watch the loss chart grow, wait for Done
    models_dir = server[1]
    load_reverse(page)
    t0 = time.monotonic()
    open_tab(page, "2 · Train")
    page.get_by_role("textbox", name=re.compile("^Model name")).fill(MODEL)
    page.get_by_role("button", name=re.compile("Advanced: every hyperparameter")).click()
    for label, value in TINY_FORM.items():
        type_number(page, label, value)
    for label, option in TINY_CHOICES.items():
        choose(page, label, option)
    params = page.get_by_text(re.compile(r"[\d,]+ parameters \("))
    expect(params).to_contain_text(re.compile(r"^\s*[1-9]\d?,\d{3} parameters"))  # tens of thousands, not 1M
    shot(page, "02-train-tiny-config")
    page.get_by_role("button", name=re.compile("Advanced: every hyperparameter")).click()  # fold it away again
    assert sum(t["n"] for t in traces(page, "Loss") or []) == 0  # the empty chart before any training
    page.evaluate(RECORD_LOSS_CHART)
    timings["train form"] = time.monotonic() - t0
    page.get_by_role("button", name="▶ Start training").click()
    status = page.locator("#train-status")
    page.wait_for_function("() => window.__lossSeen.some(([n, drawn]) => n > 0 && drawn > 0)", timeout=60_000)
    running = status.inner_text()
    shot(page, "03-train-running")
    if "Done" in running:  # a fast machine: the run ended before the picture (the recorder above still saw it grow)
        warnings.warn(f"03-train-running.png shows the finished run: {running!r}")
    expect(status).to_contain_text("Done", timeout=90_000)
    timings["train run"] = time.monotonic() - t0 - timings["train form"]
    wait_idle(page)
    # the recorder saw the last points drawn (it reads the chart every 25 ms)
    page.wait_for_function("n => window.__lossSeen.some(([points, drawn]) => points === n && drawn > 0)", arg=STEPS)
    page.evaluate("() => clearInterval(window.__lossTimer)")
    seen = [s for s in page.evaluate("() => window.__lossSeen") if s[0] > 0]
    final = traces(page, "Loss")
    shot(page, "04-train-done")
    page.set_viewport_size({"width": 1024, "height": 900})
    try:
        key_column_visible(page, "Sample translations at the last validation", "model output")
        shot(page, "04b-train-done-1024")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})
    # the chart grew while the run went on: several partial curves were drawn on screen, each longer than the last
    points, drawn = [n for n, _ in seen], [d for _, d in seen]
    assert len(set(points)) >= 3 and points == sorted(points) and points[-1] == final[0]["n"] == STEPS, (seen, running)
    assert all(d > 0 for d in drawn) and drawn[-1] > drawn[0], seen
    assert [t["n"] > 0 for t in final] == [True, True, True], final  # raw, EMA and validation curves drawn
    assert traces(page, "Validation loss")[0]["n"] == 3
    assert len(traces(page, "BLEU / chrF")) >= 2
    expect(status).to_contain_text(re.compile(rf"Done.*{STEPS} steps"))
    expect(status).to_contain_text(f"Saved as {MODEL}")
    samples = page.get_by_role("grid", name="Sample translations at the last validation")
    expect(samples.get_by_role("row")).to_have_count(6)  # header + the 5 samples of the last validation
    expect(samples.get_by_role("row").nth(1).get_by_role("gridcell").first).to_have_text(str(STEPS))
    assert (models_dir / MODEL / "model.safetensors").is_file()
    no_error_toasts(page)
    timings["train"] = time.monotonic() - t0



def test_translate_tab_greedy_and_beam_with_the_demo(page, timings):
    # 3 · Translate: the demo model, two held-out sentences, greedy then beam search
    t0 = time.monotonic()
    open_tab(page, "3 · Translate")
    choose(page, "Model", "demo-en-de")
    expect(page.get_by_text(re.compile(r"`?en`? → `?de`? · [\d,]+ parameters"))).to_be_visible()
    page.get_by_role("textbox", name="Source sentences (one per line)").fill("\n".join(HELD_OUT))
    page.get_by_role("button", name="Translate", exact=True).click()
    results = page.get_by_role("grid", name="Translations")
    expect(page.get_by_text(re.compile(r"2 sentences with demo-en-de .*greedy"))).to_be_visible()
    for german in HELD_OUT.values():
        expect(results).to_contain_text(german)
    expect(results.get_by_role("row")).to_have_count(3)
    shot(page, "05-translate-greedy")
    page.get_by_role("radio", name="beam").check()
    expect(page.get_by_role("spinbutton", name="number input for Beam size")).to_be_visible()
    wait_idle(page)  # the method's own events first (its controls, its checks), as a person would
    page.get_by_role("button", name="Translate", exact=True).click()
    expect(page.get_by_text(re.compile(r"2 sentences with demo-en-de .*beam.*log p / length"))).to_be_visible()
    for german in HELD_OUT.values():
        expect(results).to_contain_text(german)
    rows = results.get_by_role("row")
    expect(rows).to_have_count(3)
    for row in (1, 2):  # length penalty 1: the beam score is the mean log-probability per token
        cells = rows.nth(row).get_by_role("gridcell")
        assert float(cells.nth(4).inner_text()) == pytest.approx(float(cells.nth(5).inner_text()), abs=2e-3)
    no_error_toasts(page)
    shot(page, "06-translate-beam")
    timings["translate"] = time.monotonic() - t0



def test_attention_tab_shows_cross_attention_of_the_demos_translation(page, timings):
    # 4 · Attention: cross-attention of the demo model's own translation of a held-out sentence
    t0 = time.monotonic()
    open_tab(page, "4 · Attention")
    choose(page, "Model", "demo-en-de")
    source, german = next(iter(HELD_OUT.items()))
    page.get_by_role("textbox", name="Source sentence").fill(source)
    page.get_by_role("button", name="Show attention").click()
    expect(page.get_by_role("textbox", name=re.compile("^Target"))).to_have_value(german)
    title = "Cross-attention (decoder → encoder): layer 0, head 0"
    page.wait_for_function(f"() => ({PLOT_TRACES})({title!r}) !== null")
    heat = traces(page, title)
    # a column per source token (with <eos>), a row per target input (from <bos>), position-prefixed labels
    assert heat[0]["type"] == "heatmap" and heat[0]["n"] >= 5 and heat[0]["m"] >= 5, heat
    assert heat[0]["x"][0].startswith("0:") and heat[0]["x"][-1].endswith("<eos>"), heat
    expect(page.get_by_text(re.compile(r"demo-en-de · \d+ source tokens"))).to_be_visible()
    no_error_toasts(page)
    shot(page, "07-attention-cross")
    timings["attention"] = time.monotonic() - t0



def test_models_tab_lists_the_new_package_and_its_card(page, server, timings):
    # 5 · Models: the new package is listed next to the demo; its model card shows
    trained_here(server[1])
    t0 = time.monotonic()
    open_tab(page, "5 · Models")
    table = page.get_by_role("grid", name=re.compile("^Model packages"))
    expect(table).to_contain_text(MODEL)
    expect(table).to_contain_text("demo-en-de")
    table.get_by_role("gridcell", name=MODEL, exact=True).click()
    expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value(MODEL)
    expect(page.get_by_role("heading", name=MODEL, exact=True)).to_be_visible()
    card = page.get_by_role("listitem")
    expect(card.filter(has_text="d_model 32, 4 heads, 1+1 layers")).to_be_visible()
    expect(card.filter(has_text=re.compile(rf"^{STEPS} steps, "))).to_be_visible()
    no_error_toasts(page)
    shot(page, "08-models-new-package")
    timings["models"] = time.monotonic() - t0



def test_compare_tab_overlays_the_new_run_and_the_demo(page, server, timings):
    # 7 · Compare: the new run beside the demo, curves overlaid, the settings that differ, translations side by side
    trained_here(server[1])
    t0 = time.monotonic()
    open_tab(page, "7 · Compare")
    picker = page.get_by_label("Models to compare")
    for name in (MODEL, "demo-en-de"):
        picker.click()
        page.get_by_role("option", name=name, exact=True).click()
    page.get_by_role("button", name="Compare", exact=True).click()
    settings = page.get_by_role("grid", name=re.compile("^Settings that differ"))
    expect(settings).to_contain_text("d_model")
    expect(settings.get_by_role("columnheader", name=MODEL)).to_be_visible()
    wait_idle(page)
    assert [t["name"] for t in traces(page, "Training loss (EMA 0.9)")] == [MODEL, "demo-en-de"]
    page.get_by_role("button", name="Translate with each").click()
    side_by_side = page.get_by_role("grid", name=re.compile("^Greedy translations"))
    expect(side_by_side.get_by_role("columnheader", name="demo-en-de")).to_be_visible()
    no_error_badges(page)
    shot(page, "09-compare")
    # text nobody can break (a pasted address; an untrained model's "Eineeeeeee…") stays inside its column: Gradio
    # sizes a column to its unbroken text, which pushed the other models' columns out of the table
    unbroken = "https://example.org/" + "x" * 150
    page.get_by_label("Sentences to translate with each model (one per line)").fill(unbroken)
    page.get_by_role("button", name="Translate with each").click()
    expect(side_by_side).to_contain_text("x" * 20)

    def cut_off() -> list[str]:
        table = side_by_side.bounding_box()
        return [name for name in ("source", MODEL, "demo-en-de")
                if (column := side_by_side.get_by_role("columnheader", name=name).bounding_box())["x"]
                + column["width"] > table["x"] + table["width"] + 1]

    wait_idle(page)  # the widths follow the table in an event of their own
    assert not cut_off(), f"columns cut off: {cut_off()}"
    shot(page, "09b-compare-unbroken-text")
    timings["compare"] = time.monotonic() - t0



def test_every_other_tab_opens_without_errors(page, timings):
    # tabs added after this test was written (a person clicks them too): they open without errors
    known = {"1 · Data", "2 · Train", "3 · Translate", "4 · Attention", "5 · Models", "7 · Compare"}
    others = [name for name in page.get_by_role("tab").all_inner_texts() if name.strip() not in known]
    for number, name in enumerate(others, start=10):
        t0 = time.monotonic()
        open_tab(page, name.strip())
        wait_idle(page)
        no_error_toasts(page)
        panel = page.get_by_role("tabpanel").first
        assert "Something went wrong" not in panel.inner_text()
        shot(page, f"{number:02d}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}")
        timings[name.strip()] = time.monotonic() - t0

    assert not page.js_errors, page.js_errors
