"""Importing a Marian checkpoint in the app, as strangers on a shared Space do: a zip uploaded on the Models tab and a
Hub repo id (the Hub client replaced, as the push's tests do), converted in a worker process; each import is the
visitor's, counted in their quotas and refused before downloading when it cannot fit; offline, a clear refusal."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from gradio_client import handle_file
from helpers import HubStandIn, client_of, named, refusal_of
from marian_checkpoints import make_marian_checkpoint
from test_shared_space import serving

from playground.serving.hub_fetch import OFFLINE

pytestmark = pytest.mark.sessions
REPO = "Helsinki-NLP/opus-mt-en-de"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return make_marian_checkpoint(tmp_path_factory.mktemp("hub") / "opus-mt-en-de")


@pytest.fixture(scope="module")
def marian_zip(checkpoint, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("zip") / "opus-mt-en-de.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(checkpoint.iterdir()):
            zf.write(f, f"opus-mt-en-de/{f.name}")
    return path


def names(client) -> list[str]:
    table, _ = client.predict(api_name="/list_models")
    return [row[0] for row in table["data"]]


def test_a_visitor_imports_a_zip_and_a_repo_id_and_translates(tmp_path, checkpoint, marian_zip, monkeypatch):
    api = HubStandIn(checkpoint)
    monkeypatch.setattr("huggingface_hub.HfApi", lambda *a, **k: api)
    with serving(tmp_path / "models", True) as url:
        alice, bob = client_of(url), client_of(url)
        status = alice.predict(handle_file(str(marian_zip)), api_name="/import_model")[0]
        assert status.startswith("✅ Imported **opus-mt-en-de** from opus-mt-en-de: translates en → de"), status
        zipped = named(names(alice), "opus-mt-en-de")
        status = alice.predict(REPO, api_name="/import_from_hub")[0]
        assert status.startswith(f"✅ Imported **opus-mt-en-de-2** from {REPO}: translates en → de"), status
        assert api.downloads[0] == "config.json"
        fetched = named(names(alice), "opus-mt-en-de-2")
        for name in (zipped, fetched):
            table, note, *_ = alice.predict(name, "the small cat", "greedy", api_name="/translate")
            assert f"**{name}**" in note and len(table["data"]) == 1
            assert name not in names(bob)
            card = alice.predict(name, api_name="/model_card")[0]
            assert "## Origin" in card and "imported from" in card


def test_an_import_that_does_not_fit_is_refused_before_anything_is_downloaded(tmp_path, checkpoint, marian_zip,
                                                                              monkeypatch):
    api = HubStandIn(checkpoint)
    monkeypatch.setattr("huggingface_hub.HfApi", lambda *a, **k: api)
    with serving(tmp_path / "models", True, PLAYGROUND_MAX_VISITOR_MB="0.01") as url:
        carol = client_of(url)
        message = refusal_of(carol.predict(REPO, api_name="/import_from_hub"))
        assert "this Space keeps at most 0 MB per visitor" in message and api.downloads == []
        message = refusal_of(carol.predict(handle_file(str(marian_zip)), api_name="/import_model"))
        assert "this Space keeps at most 0 MB per visitor" in message
        assert not [p for p in (tmp_path / "models").iterdir() if p.name.endswith("opus-mt-en-de")]

        monkeypatch.setattr("huggingface_hub.HfApi", lambda *a, **k: HubStandIn(checkpoint, fail=OSError("offline")))
        assert refusal_of(carol.predict(REPO, api_name="/import_from_hub")) == f"⚠️ {OFFLINE}"
