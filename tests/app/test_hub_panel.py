"""The Models tab's export downloads and Hub push, driven through Gradio like a browser (gradio_client)."""

from __future__ import annotations

import contextlib
import shutil
import time
import zipfile
from pathlib import Path

import gradio as gr
import pytest
from helpers import DEMO, REPO, RecordingApi, client_of, launched, refusal_of

from playground.serving.library import Library
from playground.ui.state import Session
from playground.ui.tabs import hub_panel


@contextlib.contextmanager
def panel(library: Library):
    """The Hub panel alone, over `library`, served on loopback: a client for it."""
    with gr.Blocks() as demo:
        model = gr.Dropdown([DEMO.name], value=DEMO.name)
        hub_panel.build(gr.State(Session()), library, model)
    with launched(demo) as url:
        yield client_of(url)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    models_dir = tmp_path_factory.mktemp("models")
    shutil.copytree(DEMO, models_dir / DEMO.name)
    with panel(Library(models_dir)) as client:
        yield client


def test_export_zips(client):
    names = zipfile.ZipFile(client.predict(DEMO.name, api_name="/export_transformers")[0]).namelist()
    assert {"demo-en-de-transformers/config.json", "demo-en-de-transformers/tokenizer.json",
            "demo-en-de-transformers/model.safetensors"} <= set(names)
    names = zipfile.ZipFile(client.predict(DEMO.name, "int8", api_name="/export_ctranslate2")[0]).namelist()
    assert {"demo-en-de-ct2-int8/model.bin", "demo-en-de-ct2-int8/tokenizer.json"} <= set(names)


def test_an_export_without_a_weight_type_is_refused_beside_the_button(client):
    """A Radio lets a client send no value: that was a crash of the handler (a folder named after None), an error
    with no sentence in the page."""
    _, note = client.predict(DEMO.name, None, api_name="/export_ctranslate2")
    assert "Unknown quantization None: choose one of float32, int8" in note


def test_repeated_exports_replace_each_other_and_are_stored_once(client):
    """Each download used to leave its own folder in /tmp for 10 minutes: a loop could fill the disk. And Gradio copied
    each into its cache: a download took its size twice."""
    import tempfile

    from gradio.utils import get_upload_folder

    from playground.packages.sweep import temp_prefix

    def ours() -> set:
        return set(Path(get_upload_folder()).glob(temp_prefix("download") + "*"))

    started = time.time()
    first = client.predict(DEMO.name, "int8", api_name="/export_ctranslate2")[0]
    before = ours()
    second = client.predict(DEMO.name, "int8", api_name="/export_ctranslate2")[0]  # each in a process of its own
    assert ours() == before

    def made_since(path: Path) -> bool:
        try:
            return path.stat().st_mtime >= started
        except FileNotFoundError:  # another test's server swept it meanwhile
            return False

    # the server keeps one copy, the one it made, in its folder of Gradio's cache; the client (this process) saved
    # its own copies there too, and earlier runs theirs (a copy keeps its original's time: shutil.copy2)
    made = {p for p in Path(get_upload_folder()).glob(f"*/{Path(first).name}") if made_since(p)}
    kept = made - {Path(first), Path(second)}
    assert len(kept) == 1 and kept.pop().parent in before
    assert not list(Path(tempfile.gettempdir()).glob(temp_prefix("download") + "*"))


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
    with panel(Library(tmp_path, shared=True)) as client:
        refused = client.predict(DEMO.name, "operator-user/operator-model", False, False, "", api_name="/push_to_hub")
        assert "Sign in" in refusal_of(refused)


def front_matter_scopes() -> list[str]:
    import yaml

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return yaml.safe_load(readme.split("---\n")[1])["hf_oauth_scopes"]


class HubError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status} {message}")
        self.response = type("Response", (), {"status_code": status})()


class FakeHub:
    """The Hub as an OAuth token sees it (huggingface.co/docs/hub/oauth): write-repos writes existing repos only;
    contribute-repos creates repos and writes those this app created; manage-repos creates and writes any; all of them
    only in the token's own account. Records which token created which repo."""

    def __init__(self, tokens: dict[str, tuple[str, str]]):
        self.tokens, self.repos, self.requests = tokens, {}, []  # token -> (user, scopes); repo -> creating token

    def api(self, token: str):
        hub = self
        user, scopes = self.tokens[token]
        scopes = set(scopes.split())

        class Api:
            def create_repo(self, repo_id, repo_type, private, exist_ok):
                hub.requests.append(("create_repo", repo_id, token))
                if repo_id.split("/")[0] != user:
                    raise HubError(403, "You don't have the rights to create a repo under this namespace")
                if repo_id in hub.repos:
                    return
                if not scopes & {"contribute-repos", "manage-repos"}:
                    raise HubError(401, "Invalid credentials: the token may not create repos")
                hub.repos[repo_id] = token

            def upload_folder(self, repo_id, repo_type, folder_path, commit_message):
                hub.requests.append(("upload_folder", repo_id, token))
                created_here = hub.repos.get(repo_id) is not None and "contribute-repos" in scopes
                if not (scopes & {"write-repos", "manage-repos"} or created_here):
                    raise HubError(403, "This token may not write to this repo")

        return Api()


@pytest.fixture
def signed_in_space(tmp_path, monkeypatch):
    """A shared app whose visitor signed in as alice with the scopes the README's front matter asks for."""
    import time

    session = {"scope": "openid profile " + " ".join(front_matter_scopes())}
    monkeypatch.setattr("gradio.oauth._get_valid_oauth_info_from_session", lambda _: {
        "access_token": "hf_alice", "scope": session["scope"], "expires_at": time.time() + 3600,
        "userinfo": {"preferred_username": "alice", "name": "Alice", "profile": "", "picture": ""}})
    hub = FakeHub({"hf_alice": ("alice", session["scope"])})
    monkeypatch.setattr("huggingface_hub.HfApi", lambda token: hub.api(token))
    monkeypatch.setenv("HF_TOKEN", "hf_operator")  # never used by a shared app
    with panel(Library(tmp_path, shared=True)) as client:
        yield client, hub, session


def test_the_front_matter_asks_for_the_narrowest_scope_that_creates_a_repo():
    scopes = front_matter_scopes()
    assert "contribute-repos" in scopes and not {"write-repos", "manage-repos"} & set(scopes)


def test_a_signed_in_visitor_pushes_to_a_new_repo_in_their_account(signed_in_space):
    client, hub, _ = signed_in_space
    status = client.predict(DEMO.name, "my-demo", True, False, "", api_name="/push_to_hub")
    assert "https://huggingface.co/alice/my-demo" in status
    assert hub.repos == {"alice/my-demo": "hf_alice"}  # created with the visitor's token, in their account
    assert hub.requests == [("create_repo", "alice/my-demo", "hf_alice"),
                            ("upload_folder", "alice/my-demo", "hf_alice")]
    client.predict(DEMO.name, "alice/my-demo", True, False, "", api_name="/push_to_hub")  # again: a repo it created
    assert hub.requests[-1] == ("upload_folder", "alice/my-demo", "hf_alice")
    hub.repos["alice/made-elsewhere"] = None  # the visitor's own repo, which this app did not create
    message = refusal_of(client.predict(DEMO.name, "made-elsewhere", True, False, "", api_name="/push_to_hub"))
    assert "403" in message and "choose a new repo name" in message


def test_a_sign_in_that_cannot_create_repos_is_refused_before_any_request(signed_in_space):
    client, hub, session = signed_in_space
    session["scope"] = "openid profile write-repos"  # the scope this README used to ask for: the Hub answered 401
    message = refusal_of(client.predict(DEMO.name, "my-demo", True, False, "", api_name="/push_to_hub"))
    assert "contribute-repos" in message and "hf_oauth_scopes" in message and not hub.requests


def test_a_failed_export_leaves_nothing_in_the_served_cache(monkeypatch):
    """The export runs in a job process that writes into the download folder, which Gradio serves: a failed or
    timed-out job's half-written tree is removed, not left there for the cache's hour, and the zip another export
    left there is kept."""
    from playground.errors import PlaygroundError
    from playground.ui.handlers import download_dir

    made = []

    def failing_job(package, fmt, quantization, scratch, dest):
        made.append((Path(scratch), Path(dest)))
        (Path(scratch) / "demo-en-de-ct2-int8").mkdir()  # what the job had written when it failed
        raise PlaygroundError("The export ran out of time.")

    monkeypatch.setattr(hub_panel, "exported_in_job", failing_job)
    # the folder every visitor's export of the demo shares, with the zip an earlier export left
    shared = download_dir(str(DEMO.resolve()), "ctranslate2", "int8", empty=False)
    (shared / "demo-en-de-ct2-int8.zip").write_bytes(b"an earlier export")
    before = sorted(shared.iterdir())
    with pytest.raises(PlaygroundError, match="out of time"):
        hub_panel.export_zip(DEMO, "ctranslate2", "int8")
    [(scratch, dest)] = made
    assert dest == shared and scratch.parent == dest and not scratch.exists()
    assert sorted(dest.iterdir()) == before and (dest / "demo-en-de-ct2-int8.zip").read_bytes() == b"an earlier export"
