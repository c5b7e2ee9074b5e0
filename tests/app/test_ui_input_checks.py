"""Untrusted input met by the UI's handlers: a broken training record shown on the Models tab, a card bomb,
session data capped and released when the tab closes, a huge seed, an unexpected error without its details."""

from __future__ import annotations

import os
import re
import time

import pytest
from helpers import DEMO, REPO, client_of, edit_json, launched, peak_rss, refusal_of, zip_claiming, zip_folder

from playground.errors import PackageError, PlaygroundError
from playground.packages.format import CARD, TRAINING
from playground.packages.store import load_package, package_info, remove_package, save_package
from playground.packages.zips import import_zip
from playground.serving.library import Library


def test_a_mistyped_training_record_is_refused_at_import_and_shown_broken_on_disk(package, tmp_path):
    from playground.ui.app import build_app
    from playground.ui.tabs.models import models_frame

    models = tmp_path / "models"
    good = load_package(package)
    save_package(models / "good", good.model, good.tokenizer, src_lang="en", tgt_lang="de")
    edit_json(package / TRAINING, lambda t: t.update(last={"bleu": "high"}))
    with pytest.raises(PackageError, match=r"training\.json in .* is invalid: last\.bleu: must be a number"):
        import_zip(zip_folder(package, tmp_path / "bad.zip"), models)
    assert sorted(p.name for p in models.iterdir()) == ["good"]  # nothing written, no leftovers
    # the same package copied into models/ by hand: its own row says broken, the others list, the app starts
    os.rename(package, models / "tiny")
    frame = models_frame(Library(models), None)
    rows = {row["name"]: row for _, row in frame.iterrows()}
    assert rows["tiny"]["direction"] == "⚠️ broken" and "last.bleu" in rows["tiny"]["architecture"]
    assert rows["good"]["direction"] == "en → de"
    build_app(models).close()


def test_a_card_bomb_is_refused_and_no_reader_reads_past_its_limit(package, tmp_path, monkeypatch):
    from playground.ui import caches
    from playground.ui.tabs.models import card

    bomb = zip_claiming(package, tmp_path / "bomb.zip", CARD, 1_500_000_000)
    with pytest.raises(PackageError, match=r"README\.md in the zip expands to 1,500,000,000 bytes; at most 262,144"):
        import_zip(bomb, tmp_path / "models")
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())

    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    os.rename(package, models / "tiny")
    with open(models / "tiny" / CARD, "r+b") as f:  # a sparse gigabyte: it takes no disk, and must take no memory
        f.truncate(1 << 30)
    before = peak_rss()
    with pytest.raises(PackageError, match=r"README\.md in tiny is larger than the 262,144 bytes allowed"):
        card(Library(models), None, "tiny")
    assert peak_rss() - before < 100e6
    # training.json over its limit: refused by name, not read whole
    monkeypatch.setenv("PLAYGROUND_MAX_TRAINING_BYTES", "100")
    with pytest.raises(PackageError, match="PLAYGROUND_MAX_TRAINING_BYTES"):
        package_info(models / "tiny")
    monkeypatch.delenv("PLAYGROUND_MAX_TRAINING_BYTES")
    (models / "tiny" / CARD).write_text("# tiny")
    # the UI's JSON cache: a deleted package's training record does not stay in memory
    caches.package_info(models / "tiny")
    assert (str(models / "tiny"), "summary") in caches.INFO.items
    remove_package(models / "tiny")
    demo = load_package(DEMO)
    save_package(models / "other", demo.model, demo.tokenizer)
    caches.package_info(models / "other")
    assert (str(models / "tiny"), "summary") not in caches.INFO.items


def test_session_data_is_capped_and_released_when_the_tab_closes(tmp_path, monkeypatch):
    import httpx
    from gradio_client import handle_file

    from playground.ui.app import build_app

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("".join(f"sentence number {i} here\tSatz Nummer {i} hier\n" for i in range(40_000)))
    monkeypatch.setenv("PLAYGROUND_MAX_SESSION_DATA_MB", "1")
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")  # the server notices a closed tab within a beat
    demo = build_app(tmp_path / "models")
    with launched(demo) as url:
        client = client_of(url)
        refused = refusal_of(client.predict([handle_file(str(corpus))], 0.05, api_name="/load_files"))
        assert re.search(r"pairs\) is too large: 2\.\d MB in memory; the limit is 1\.0 MB per session\. ", refused)
        assert "PLAYGROUND_" not in refused  # the operator's variable is for the operator, not the page
        assert "pairs kept" in client.predict("reverse", 0.05, api_name="/load_builtin")[0]
        stored = demo.state_holder.session_data[client.session_hash].state_data
        assert any(getattr(v, "data", None) is not None for v in stored.values())
        # a browser tab holds a heartbeat stream open; closing the tab ends it, and the unload hook frees the data
        with httpx.stream("GET", f"{url}gradio_api/heartbeat/{client.session_hash}") as beat:
            next(beat.iter_lines())
        deadline = time.monotonic() + 10
        while any(getattr(v, "data", None) is not None for v in stored.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(getattr(v, "data", None) is not None for v in stored.values())


def test_a_huge_decoding_seed_is_refused_with_a_message(package):
    from playground.serving.work import translations
    from playground.ui.tabs.translate import decode_options

    opts = decode_options("sample", 1.0, 0, 1.0, 2**70, 5, 1.0, 1, 20)
    with pytest.raises(PlaygroundError, match="seed must be a whole number from 0 to 9223372036854775807"):
        translations(str(package), ["a b"], opts)


def test_an_unexpected_error_reaches_the_page_without_its_details():
    from playground.ui.handlers import readable

    @readable
    def handler():
        raise ValueError(f"Overflow when unpacking long long in {REPO}")

    with pytest.raises(Exception) as shown:
        handler()
    assert "Something went wrong" in str(shown.value) and "Overflow" not in str(shown.value)
    assert str(REPO) not in str(shown.value)


# ----------------------------------------------------------------------------------------------------------
# Numbers out of their range, through the API: refused with the words shown beside the control, nothing changed


def test_a_range_says_what_is_wrong_in_the_same_words_for_every_control():
    from playground.ui.numbers import Range

    top_k, split = Range("Top-k", 0, 20, whole=True), Range("Validation split", 0.01, 0.3)
    assert top_k.problem(-3) == "⚠️ Top-k must be a whole number from 0 to 20, not -3."
    assert top_k.problem(2.5) == "⚠️ Top-k must be a whole number from 0 to 20, not 2.5."
    assert top_k.problem(None) == "⚠️ Top-k must be a whole number from 0 to 20; the box is empty."
    assert top_k.problem("many") == "⚠️ Top-k must be a whole number from 0 to 20, not 'many'."
    assert top_k.upto(None).problem(float("inf")) == "⚠️ Top-k must be a whole number of at least 0, not 'inf'."
    assert split.problem(0.9) == "⚠️ Validation split must be from 0.01 to 0.3, not 0.9."
    assert top_k.problem(20) == split.problem(0.3) == "" and top_k.check(20.0) == 20
    with pytest.raises(PlaygroundError, match=r"^Top-k must be a whole number from 0 to 20, not 10,000\.$"):
        top_k.check(10_000)


@pytest.fixture(scope="module")
def numbers_app(tmp_path_factory):
    """The app on a copy of the demo model (3 layers of 4 heads, 66 positions, 3 validations recorded)."""
    import shutil

    from playground.ui.app import build_app

    models = tmp_path_factory.mktemp("numbers-models")
    shutil.copytree(DEMO, models / DEMO.name, ignore=shutil.ignore_patterns("resume.*"))
    with launched(build_app(models)) as url:
        yield url


def refused_with(client, message: str, *args, **kwargs) -> None:
    """The call is refused before its handler runs, with `message` for the parameter that is out of range."""
    from gradio_client.exceptions import ValidationError

    with pytest.raises(ValidationError) as refusal:
        client.predict(*args, **kwargs)
    assert f"⚠️ {message}" in str(refusal.value), str(refusal.value)


def test_translate_refuses_numbers_out_of_range_and_keeps_its_results(numbers_app):
    client = client_of(numbers_app)
    model, text = DEMO.name, "Today a student swims.\nShe follows a child."
    table, _, _, _, next_table = client.predict(model, text, "beam", beam_size=3, nbest=2, api_name="/translate")
    rows = len(table["data"])
    for message, settings in [
            ("Top-k must be a whole number of at least 0, not -3.", dict(method="sample", top_k=-3)),
            ("Temperature must be from 0.05 to 2, not 5.", dict(method="sample", temperature=5)),
            ("Top-p must be from 0.05 to 1, not 0.", dict(method="sample", top_p=0)),
            ("Seed must be a whole number from 0 to 9,223,372,036,854,775,807, not -1.",
             dict(method="sample", seed=-1)),
            ("Samples per sentence must be a whole number from 1 to 8, not 99.", dict(method="sample", nbest=99)),
            ("Beam size must be a whole number from 1 to 16, not 0.", dict(method="beam", beam_size=0)),
            ("Length penalty α must be from 0 to 2, not -1.", dict(method="beam", length_penalty=-1)),
            ("n-best must be a whole number from 1 to 3, not 5.", dict(method="beam", beam_size=3, nbest=5)),
            ("Max output tokens must be a whole number from 0 to 65, not 10,000.", dict(max_output_tokens=10_000)),
            ("Max output tokens must be a whole number from 0 to 65, not -5.", dict(max_output_tokens=-5))]:
        refused_with(client, message, model, text, **settings, api_name="/translate")
    # a hidden method's setting is neither checked nor used
    assert client.predict(model, text, "greedy", top_k=-3, beam_size=0, api_name="/translate")[0]["data"]
    client.predict(model, text, "beam", beam_size=3, nbest=2, api_name="/translate")
    refused_with(client, f"Table row must be a whole number from 1 to {rows}, not {rows + 1}.", rows + 1, 5,
                 api_name="/next_tokens")
    refused_with(client, f"Table row must be a whole number from 1 to {rows}, not 0.", 0, 5, api_name="/next_tokens")
    refused_with(client, "Candidates per step must be a whole number from 1 to 20, not 99.", 1, 99,
                 api_name="/next_tokens")
    refused_with(client, "Max output tokens must be a whole number from 0 to 65, not 99.", model, text,
                 max_output_tokens=99, api_name="/decode_steps")
    # the last results are the session's still: row 1's view is the one the translation drew
    assert client.predict(1, 5, api_name="/next_tokens")[1]["data"] == next_table["data"]


def test_attention_refuses_a_layer_or_head_the_maps_do_not_have_and_keeps_them(numbers_app):
    import json

    client = client_of(numbers_app)
    model = DEMO.name
    refused_with(client, "Head must be a whole number from 0 to 3, not 99.", model, "a b", head=99,
                 target="", api_name="/attention")  # before any maps are drawn: the model's own heads
    plot, *_ = client.predict(model, "Today a student swims.", layer=2, head=3, api_name="/attention", target="")
    assert json.loads(plot["plot"])["layout"]["title"]["text"].endswith("layer 2, head 3")
    refused_with(client, "Layer must be a whole number from 0 to 2, not 9.", "cross", "one head", 9, 0,
                 api_name="/attention_view")
    refused_with(client, "Head must be a whole number from 0 to 3, not -1.", "encoder", "one head", 0, -1,
                 api_name="/attention_view")
    refused_with(client, "Layer must be a whole number from 0 to 2, not 1.5.", "cross", "one head", 1.5, 0, False,
                 api_name="/export_attention_html")
    refused_with(client, "Validation must be a whole number from 0 to 2, not 99.", model, 99,
                 api_name="/attention_probe")
    drawn = client.predict("cross", "one head", 2, 3, api_name="/attention_view")
    assert json.loads(drawn["plot"]) == json.loads(plot["plot"])  # the maps of the session are those drawn


def test_inside_and_data_refuse_numbers_out_of_range_and_keep_the_data(numbers_app):
    client = client_of(numbers_app)
    model = DEMO.name
    summary = client.predict("mini-translation", 0.05, api_name="/load_builtin")[0]
    for message, args, endpoint in [
            ("Pairs in the batch must be a whole number from 1 to 8, not 99.", (model, 99, 0, 1), "/masks"),
            ("Which pairs (seed) must be a whole number from 0 to 9,223,372,036,854,775,807, not -1.",
             (model, 4, -1, 1), "/masks"),
            ("Pair shown must be a whole number from 1 to 4, not 6.", (model, 4, 0, 6), "/masks"),
            ("Batch tokens must be a whole number of at least 0, not -5.", (model, -5, 0), "/batching"),
            ("Shuffle seed must be a whole number from 0 to 9,223,372,036,854,775,807, not 0.5.",
             (model, 0, 0.5), "/batching"),
            ("Tokens must be a whole number from 20 to 500, not 10,000.", (model, 10_000), "/embeddings"),
            ("Validation split must be from 0.01 to 0.3, not 0.9.", ("numbers", 0.9), "/load_builtin"),
            ("Validation split must be from 0.01 to 0.3, not 0.", (0,), "/set_val_fraction")]:
        refused_with(client, message, *args, api_name=endpoint)
    assert client.predict(0.05, api_name="/set_val_fraction") == summary  # the data and its split are as loaded
    assert "5% held out" in summary
