"""The Models tab's export downloads and Hub push, driven through Gradio like a browser (gradio_client)."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
import pytest  # noqa: E402
from conftest import free_port, refusal_of  # noqa: E402
from gradio_client import Client  # noqa: E402

from playground.sharing import Library  # noqa: E402
from playground.ui import hub_panel  # noqa: E402
from playground.ui.state import Session  # noqa: E402
from test_hub import DEMO, RecordingApi  # noqa: E402


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("models")
    shutil.copytree(DEMO, models_dir / DEMO.name)
    with gr.Blocks() as demo:
        model = gr.Dropdown([DEMO.name], value=DEMO.name)
        hub_panel.build(gr.State(Session()), Library(models_dir), model)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    demo.close()


def test_export_zips(client):
    names = zipfile.ZipFile(client.predict(DEMO.name, api_name="/export_transformers")[0]).namelist()
    assert {"demo-en-de-transformers/config.json", "demo-en-de-transformers/tokenizer.json",
            "demo-en-de-transformers/model.safetensors"} <= set(names)
    names = zipfile.ZipFile(client.predict(DEMO.name, "int8", api_name="/export_ctranslate2")[0]).namelist()
    assert {"demo-en-de-ct2-int8/model.bin", "demo-en-de-ct2-int8/tokenizer.json"} <= set(names)


def test_repeated_exports_replace_each_other(client):
    """Each download used to leave its own folder in /tmp for 10 minutes: a loop could fill the disk."""
    import tempfile

    from playground.package import temp_prefix

    def ours() -> set:
        return set(Path(tempfile.gettempdir()).glob(temp_prefix("package") + "*"))

    client.predict(DEMO.name, "int8", api_name="/export_ctranslate2")
    before = ours()
    for _ in range(3):
        client.predict(DEMO.name, "int8", api_name="/export_ctranslate2")
    assert ours() == before


def test_push_needs_a_token_then_uploads(client, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert "Sign in" in refusal_of(client.predict(DEMO.name, "someone/demo", True, False, "", api_name="/push_to_hub"))
    api = RecordingApi()
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    monkeypatch.setattr("huggingface_hub.HfApi", lambda token: api if token == "hf_env" else None)
    status = client.predict(DEMO.name, "someone/demo", True, False, "apache-2.0", api_name="/push_to_hub")
    assert "https://huggingface.co/someone/demo" in status
    assert api.repo["repo_id"] == "someone/demo" and "model.safetensors" in api.files
    assert "license: apache-2.0" in api.files["README.md"].decode()


def test_shared_app_refuses_an_anonymous_push_with_the_operators_token(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_operator")
    monkeypatch.setattr("huggingface_hub.HfApi", lambda token: pytest.fail("an upload was attempted"))
    with gr.Blocks() as demo:
        model = gr.Dropdown([DEMO.name], value=DEMO.name)
        hub_panel.build(gr.State(Session()), Library(tmp_path, shared=True), model)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    try:
        refused = Client(f"http://127.0.0.1:{port}/", verbose=False).predict(
            DEMO.name, "operator-user/operator-model", False, False, "", api_name="/push_to_hub")
        assert "Sign in" in refusal_of(refused)
    finally:
        demo.close()
