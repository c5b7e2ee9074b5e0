"""The web UI end to end: launch the Gradio app in-process and drive it with gradio_client, the way a browser or
an API user would: load data, train a tiny model, translate three ways, look at attention, manage packages."""

from __future__ import annotations

import json
import re
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from gradio_client import Client, handle_file
from gradio_client.exceptions import ValidationError
from helpers import client_of, launched, refusal_of

from playground.ui.app import build_app

MODEL = "tiny-test"
# a model small enough to train in a second or two on two busy CPU cores
TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
            max_sentence_tokens=32, batch_tokens=512, max_steps=30, max_minutes=0, max_epochs=0, eval_every=15,
            eval_sentences=16, warmup_steps=10, lr=3e-3, schedule="inverse_sqrt", precision="fp32", device="cpu")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def app(models_dir):
    # one intra-op thread: these models are far too small to gain from two, and on a shared 2-core machine two
    # OpenMP threads competing with a neighbour's process can make every step 10x slower
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with launched(build_app(models_dir)) as url:
        yield url
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def client(app) -> Client:
    """One client = one browser session: its gr.State (data, run, last results) persists across calls."""
    return client_of(app)


@pytest.fixture(scope="module")
def trained(client, models_dir) -> list:
    """Load the built-in reversal data and train MODEL; returns every UI update the run streamed."""
    summary = client.predict("reverse", 0.05, api_name="/load_builtin")[0]
    assert "pairs kept" in summary and "`seq` → `rev`" in summary
    job = client.submit(model_name=MODEL, api_name="/train", **TINY)
    updates = list(job)
    job.result()
    assert (models_dir / MODEL / "model.safetensors").is_file()
    return updates


# every endpoint an API client may call, and no other: a step the page runs privately (the visitor's welcome token,
# first estimates, pickers, notes) answers direct calls too, so one that became public by mistake must fail here, and
# a new public endpoint is a decision written down here
PUBLIC_API = {
    "/load_builtin", "/load_files", "/swap_direction", "/set_languages", "/set_val_fraction",
    "/train", "/stop", "/resume", "/estimate", "/apply_preset", "/start_from", "/lr_preview",
    "/translate", "/translate_models", "/next_tokens",
    "/attention", "/attention_models", "/attention_view", "/attention_probe", "/export_attention_html",
    "/inside_models", "/decode_steps", "/positional_encoding", "/masks", "/batching", "/embeddings",
    "/compare", "/compare_translate",
    "/list_models", "/model_card", "/export_model", "/import_model", "/import_from_hub", "/delete_model",
    "/export_transformers", "/export_ctranslate2", "/push_to_hub",
}


def test_api_names(client):
    api = client.view_api(print_info=False, return_format="dict")  # the app's /info route
    assert set(api["named_endpoints"]) == PUBLIC_API
    assert not api["unnamed_endpoints"]


def test_training_streams_status_charts_and_samples(trained, models_dir):
    statuses = [u[0] for u in trained]
    assert statuses[0].startswith("⏳ Preparing")
    assert any("step **15**/30" in s or "step **30**/30" in s for s in statuses), statuses
    final = trained[-1]
    assert final[0].startswith("✅ **Done**") and MODEL in final[0]
    loss_chart = final[1]
    assert loss_chart["type"] == "plotly" and "train (EMA" in loss_chart["plot"]
    samples = [u[5] for u in trained if isinstance(u[5], dict) and u[5].get("data")]
    assert samples and samples[-1]["headers"] == ["step", "source", "reference", "model output"]
    assert len(statuses) < 30  # throttled: not one update per step


def test_translate_with_every_method(client, trained):
    text = "a b c d\n1 2 3"
    greedy = client.predict(MODEL, text, "greedy", api_name="/translate")
    assert [row[0] for row in greedy[0]["data"]] == [1, 2]
    assert "greedy" in greedy[1] and "✂️" not in greedy[1]
    long = client.predict(MODEL, "a b\n" + "a b c d " * 12, "greedy", api_name="/translate")  # 48 tokens, 32 read
    assert "✂️ Line 2 has more tokens than this model reads (32): only its first 32 tokens were translated" in long[1]
    sample = client.predict(MODEL, text, "sample", temperature=0.8, top_k=10, top_p=0.9, seed=3, nbest=2,
                            api_name="/translate")
    assert len(sample[0]["data"]) == 4  # two samples per sentence
    beam = client.predict(MODEL, text, "beam", beam_size=3, length_penalty=0.6, nbest=2, api_name="/translate")
    rows = beam[0]["data"]
    assert len(rows) == 4 and [r[1] for r in rows] == [1, 2, 1, 2]
    assert rows[0][4] >= rows[1][4]  # n-best sorted by score
    plot, table, _ = client.predict(2, 4, api_name="/next_tokens")  # row 2: the 2nd beam of sentence 1
    assert plot["type"] == "plotly" and table["headers"][:2] == ["step", "chosen token"]
    assert all(len(r[3].split(", ")) == 4 for r in table["data"])


def test_attention_views_and_export(client, trained):
    plot, target, note, layer, head = client.predict(MODEL, "a b c d", api_name="/attention", target="")
    assert plot["type"] == "plotly" and '"type":"heatmap"' in plot["plot"].replace(" ", "")
    assert "0:" in plot["plot"]  # position-prefixed token labels
    assert MODEL in note
    plot, *_ = client.predict(MODEL, "a b c d", "my target (teacher-forced)", "d c b a", "decoder",
                              "all heads (layers × heads)", api_name="/attention")
    assert "head 1" in plot["plot"]
    html, _ = client.predict("encoder", "mean over heads", 0, 0, api_name="/export_attention_html")
    page = Path(html).read_text(encoding="utf-8")
    assert page.lower().lstrip().startswith("<!doctype html>") and "cdn.plot.ly" in page
    assert Path(html).stat().st_size < 100_000  # plotly.js is loaded when opened, not copied into each file
    offline, _ = client.predict("encoder", "mean over heads", 0, 0, True, api_name="/export_attention_html")
    assert Path(offline).stat().st_size > 1_000_000 and 'src="https://cdn.plot.ly' not in Path(offline).read_text()
    probe = client.predict(MODEL, 1, api_name="/attention_probe")
    assert "validation 2 of 2" in probe["plot"]


def test_inside_views_of_the_model_trained_here(client, trained):
    """Every "see inside" view on the model this session trained, with this session's data (the reversal task)."""
    heatmap, _, dims, note = client.predict(MODEL, api_name="/positional_encoding")
    assert heatmap["type"] == "plotly" and dims["value"] == [0, 2, 4, 8] and "sinusoidal" in note
    *_, look_ahead, note = client.predict(MODEL, 5, 1, 5, api_name="/masks")
    assert "5 pairs" in note and "Pair 5" in look_ahead["plot"]
    _, note = client.predict(MODEL, api_name="/batching")
    assert "up to 512 tokens" in note  # the model's own training budget
    _, note = client.predict(MODEL, 30, api_name="/embeddings")
    assert "most frequent tokens of your data" in note
    for method in ("greedy", "sample", "beam"):
        plot, table, note = client.predict(MODEL, "a b c d", method, beam_size=3, api_name="/decode_steps")
        assert plot["type"] == "plotly" and table["data"] and MODEL in plot["plot"]
    probe = json.loads(client.predict(MODEL, 0, api_name="/attention_probe")["plot"])
    assert len(probe["data"]) == TINY["n_decoder_layers"] and "step 15" in probe["layout"]["title"]["text"]


def test_lr_preview_follows_the_settings(client):
    _, chart = client.predict(api_name="/lr_preview", **{**TINY, "schedule": "noam", "warmup_steps": 7, "lr": 2.0})
    figure = json.loads(chart["plot"])
    lrs = figure["data"][0]["y"]
    assert "noam over 30 steps (steps budget)" in figure["layout"]["title"]["text"]
    assert np.argmax(lrs) == 6 and max(lrs) == pytest.approx(2.0 * 32**-0.5 * 7**-0.5)  # peak at the warmup's end


def test_models_tab_lists_cards_exports_imports_and_deletes(client, trained, models_dir):
    table, picker = client.predict(api_name="/list_models")
    row = dict(zip(table["headers"], table["data"][0], strict=True))
    assert row["name"] == MODEL and row["steps"] >= 30 and row["architecture"].startswith("1+1 layers, d_model 32")
    card, config = client.predict(MODEL, api_name="/model_card")
    assert card.startswith(f"# {MODEL}") and config["name"] == MODEL
    zip_path, _ = client.predict(MODEL, api_name="/export_model")
    members = {Path(n).name for n in zipfile.ZipFile(zip_path).namelist()}
    assert members >= {"config.json", "model.safetensors"} and not members & {"resume.json", "resume.safetensors"}
    with_state, _ = client.predict(MODEL, True, api_name="/export_model")
    assert {Path(n).name for n in zipfile.ZipFile(with_state).namelist()} >= {"resume.json", "resume.safetensors"}
    status, table, picker, _ = client.predict(handle_file(zip_path), api_name="/import_model")
    assert f"{MODEL}-2" in status and (models_dir / f"{MODEL}-2").is_dir()
    assert "Tick" in refusal_of(client.predict(f"{MODEL}-2", False, api_name="/delete_model"))
    assert (models_dir / f"{MODEL}-2").is_dir()
    client.predict(f"{MODEL}-2", True, api_name="/delete_model")
    assert not (models_dir / f"{MODEL}-2").exists()


def test_resume_adds_the_budget_to_the_saved_run(client, trained, models_dir):
    result = client.predict(MODEL, api_name="/resume", **{**TINY, "max_steps": 10})
    assert result[0].startswith("✅ **Done**") and "40 steps" in result[0]
    training = json.loads((models_dir / MODEL / "training.json").read_text(encoding="utf-8"))
    assert training["steps"] == 40 and training["history"]["steps"][0] == 1  # the charts keep the first 30 steps


def test_estimate_times_the_configuration_here(client, trained):
    text, lr_chart = client.predict(api_name="/estimate", **TINY)
    assert lr_chart["type"] == "plotly" and "steps budget" in lr_chart["plot"]
    assert "parameters" in text and "Estimated duration" in text and "30 steps" in text


def wait_for_steps(job, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any("step **" in str(o[0]) for o in job.outputs()):
            return
        time.sleep(0.1)
    raise AssertionError(f"no training progress within {timeout} s: {job.outputs()}")


def endless_run(app, dataset: str, name: str):
    """A new session training `name` on a built-in dataset with no budget in sight, once its first steps show."""
    client = client_of(app)
    client.predict(dataset, 0.05, api_name="/load_builtin")
    job = client.submit(model_name=name, api_name="/train", **{**TINY, "max_steps": 10**6, "eval_every": 10**6})
    wait_for_steps(job)
    return client, job


@pytest.mark.slow
def test_stop_ends_the_run_cleanly(app, models_dir):
    client, job = endless_run(app, "numbers", "stopped")
    # Start again during the run: refused before it is queued (queued, it would start once this run ends)
    with pytest.raises(ValidationError, match="This tab is already training `stopped`"):
        client.predict(model_name="second", api_name="/train", **TINY)
    pressed = time.monotonic()
    assert "Stopping…" in client.predict(api_name="/stop")  # said at once, not when the run has ended
    result = job.result(timeout=60)
    assert "stopped by the user" in result[0]
    assert time.monotonic() - pressed < 15  # the current step, a quick last validation and the save
    assert (models_dir / "stopped" / "model.safetensors").is_file()


@pytest.mark.slow
def test_closing_the_tab_keeps_the_work_done(app, models_dir):
    client, job = endless_run(app, "reverse", "closed")
    job.cancel()  # what Gradio does when the browser tab goes away: the handler's generator is closed
    training = models_dir / "closed" / "training.json"
    deadline = time.monotonic() + 30
    while not training.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert json.loads(training.read_text(encoding="utf-8"))["steps"] > 0
    # the session is free again: a new run starts instead of "already training"
    result = client.predict(model_name="after-close", api_name="/train", **TINY)
    assert result[0].startswith("✅ **Done**")


def test_errors_are_readable(client, trained, tmp_path):
    assert "Invalid model name" in refusal_of(client.predict(model_name="../escape", api_name="/train", **TINY))
    assert re.search("must be divisible|divisible by n_heads", refusal_of(
        client.predict(model_name="bad", api_name="/train", **{**TINY, "d_model": 30, "n_heads": 4})))
    assert re.search("no model package|There is no model", refusal_of(
        client.predict("does-not-exist", "hello", api_name="/translate")))
    bad = tmp_path / "not-a-package.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("weights.pt", b"pickle")
    assert "not part of a model package" in refusal_of(client.predict(handle_file(str(bad)), api_name="/import_model"))


def test_upload_two_aligned_files_and_swap(app, tmp_path):
    client = client_of(app)  # a second browser session: its own data
    (tmp_path / "corpus.en").write_text("hello world\ngood morning\nthank you\n", encoding="utf-8")
    (tmp_path / "corpus.de").write_text("hallo welt\nguten morgen\ndanke\n", encoding="utf-8")
    summary, preview, dropped, lengths, src, tgt, files, note = client.predict(
        [handle_file(str(tmp_path / "corpus.en")), handle_file(str(tmp_path / "corpus.de"))], 0.3,
        api_name="/load_files")
    assert (src, tgt) == ("en", "de") and "3 pairs kept" in summary and len(files) == 2 and note == ""
    assert preview["data"][0] == ["hello world", "hallo welt"]
    summary, preview, *_, src, tgt, _ = client.predict(api_name="/swap_direction")
    assert (src, tgt) == ("de", "en") and preview["data"][0] == ["hallo welt", "hello world"]
    (tmp_path / "one.txt").write_text("just one column\nand another\n", encoding="utf-8")
    assert re.search("not a two-column file|Accepted formats", refusal_of(
        client.predict([handle_file(str(tmp_path / "one.txt"))], 0.05, api_name="/load_files")))
    assert preview["data"][0] == ["hallo welt", "hello world"]  # the loaded data stays


def test_training_without_data_says_what_to_do(app):
    client = client_of(app)
    assert "Load data" in refusal_of(client.predict(model_name="nodata", api_name="/train", **TINY))


