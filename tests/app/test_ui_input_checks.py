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
    from playground.ui.tabs.translate import decode_options, run_translation

    opts = decode_options("sample", 1.0, 0, 1.0, 2**70, 5, 1.0, 1, 20)
    with pytest.raises(PlaygroundError, match="seed must be a whole number from 0 to 9223372036854775807"):
        run_translation(str(package), ["a b"], opts)


def test_an_unexpected_error_reaches_the_page_without_its_details():
    from playground.ui.handlers import friendly

    @friendly
    def handler():
        raise ValueError(f"Overflow when unpacking long long in {REPO}")

    with pytest.raises(Exception) as shown:
        handler()
    assert "Something went wrong" in str(shown.value) and "Overflow" not in str(shown.value)
    assert str(REPO) not in str(shown.value)
