"""Fetching a Marian checkpoint from the Hub (playground.serving.hub_fetch) with the Hub client replaced, as the push
is: only the files the import reads are downloaded, their sizes checked from the Hub's metadata first, the
architecture and the parameters from config.json before the weights; offline, a clear refusal; the result an
ordinary package named after the repo. Marian zips (playground.packages.zips): the same import from an upload."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import HubStandIn
from marian_checkpoints import make_marian_checkpoint

from playground.errors import PackageError
from playground.packages.marian import MARIAN_FILES
from playground.packages.store import load_package
from playground.packages.zips import import_zip
from playground.serving.hub_fetch import OFFLINE, checkpoint_on_hub, fetch_marian, import_hub_checkpoint

REPO = "Helsinki-NLP/opus-mt-en-de"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    folder = make_marian_checkpoint(tmp_path_factory.mktemp("hub") / "opus-mt-en-de")
    (folder / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# opus-mt-en-de\n", encoding="utf-8")
    return folder


def no_check(folder: Path) -> None:
    load_package(folder)


def convert_here(checkpoint: Path, package: Path, origin: str) -> None:
    from playground.packages.marian import import_marian

    import_marian(checkpoint, package, origin=origin)


def test_only_the_needed_files_are_fetched_and_the_result_is_a_package(checkpoint, tmp_path):
    api = HubStandIn(checkpoint, extra={"pytorch_model.bin": 10**9, "tf_model.h5": 10**9, "rust_model.ot": 10**9})
    hub = checkpoint_on_hub(f"  {REPO} ", api=api)
    assert set(hub.sizes) == {*MARIAN_FILES, "README.md"} and api.downloads == []  # metadata only, so far
    assert hub.default_name == "opus-mt-en-de"
    heard = []
    folder = import_hub_checkpoint(hub, tmp_path / "models", hub.default_name, check=no_check, convert=convert_here,
                                   api=api, progress=lambda share, what: heard.append((share, what)))
    assert api.downloads[0] == "config.json" and sorted(api.downloads) == sorted(hub.sizes)
    package = load_package(folder)
    assert folder.name == "opus-mt-en-de" and package.config["imported"]["origin"] == REPO
    assert (package.config["src_lang"], package.config["tgt_lang"]) == ("en", "de")
    assert [share for share, _ in heard] == sorted(share for share, _ in heard) and heard[-1][0] == 1.0
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")]  # the staging folder is gone


@pytest.mark.parametrize("extra, config, message", [
    ({"model.safetensors": None}, None, "only as pytorch_model.bin"),
    ({"model.safetensors": 4 * 10**9}, None, "Choose a smaller model"),
    ({}, {"model_type": "bart", "d_model": 16}, "not a Marian one.*opus-mt-en-de"),
])
def test_what_the_import_cannot_use_is_refused_before_the_weights_are_fetched(checkpoint, tmp_path, extra, config,
                                                                              message):
    api = HubStandIn(checkpoint, config=config)
    if extra.get("model.safetensors", 0) is None:  # a repo with the pickle alone
        api.folder = tmp_path / "pickled"
        api.folder.mkdir()
        for name in MARIAN_FILES:
            if name != "model.safetensors":
                shutil.copyfile(checkpoint / name, api.folder / name)
        api.extra = {"pytorch_model.bin": 300 * 10**6}
    elif extra:
        api.extra = extra
    with pytest.raises(PackageError, match=message):
        hub = checkpoint_on_hub(REPO, api=api)
        fetch_marian(hub, tmp_path / "fetched", api=api)
    assert "model.safetensors" not in api.downloads


def test_a_model_over_the_parameter_limit_is_refused_after_its_config_alone(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_PARAMETERS", "1000")
    api = HubStandIn(checkpoint)
    with pytest.raises(PackageError, match="this app loads models of at most 0 M"):
        fetch_marian(checkpoint_on_hub(REPO, api=api), tmp_path / "fetched", api=api)
    assert api.downloads == ["config.json"]


@pytest.mark.parametrize("repo_id", ["", "opus-mt-en-de", "a/b/c", "../../etc/passwd"])
def test_a_repo_id_is_checked_before_the_hub_is_asked(repo_id, checkpoint):
    api = HubStandIn(checkpoint, fail=AssertionError("the Hub was asked"))
    with pytest.raises(PackageError, match="is not a Hub model id: write it as owner/name"):
        checkpoint_on_hub(repo_id, api=api)


def test_offline_is_a_clear_refusal(checkpoint):
    from huggingface_hub.errors import OfflineModeIsEnabled, RepositoryNotFoundError

    for error in (OSError("Name or service not known"), OfflineModeIsEnabled("offline mode is enabled")):
        with pytest.raises(PackageError) as refused:
            checkpoint_on_hub(REPO, api=HubStandIn(checkpoint, fail=error))
        assert str(refused.value) == OFFLINE and "upload the zip" in OFFLINE
    missing = RepositoryNotFoundError("404", response=SimpleNamespace(status_code=404, headers={}, request=None))
    with pytest.raises(PackageError, match="There is no model Helsinki-NLP/opus-mt-en-de on the Hub"):
        checkpoint_on_hub(REPO, api=HubStandIn(checkpoint, fail=missing))


def zipped(folder: Path, dest: Path, skip: tuple = (), extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.iterdir()):
            if f.is_file() and f.name not in skip:
                zf.write(f, f"{folder.name}/{f.name}")
        for name, data in (extra or {}).items():
            zf.writestr(f"{folder.name}/{name}", data)
    return dest


def test_a_marian_zip_is_imported_as_a_package_and_other_files_are_left_out(checkpoint, tmp_path):
    path = zipped(checkpoint, tmp_path / "opus-mt-en-de.zip", extra={"special_tokens_map.json": b"{}",
                                                                    "tf_model.h5": b"\0" * 1000})
    folder = import_zip(path, tmp_path / "models", check=no_check, convert=convert_here)
    package = load_package(folder)
    assert folder.name == "opus-mt-en-de" and package.config["imported"]["origin"] == "opus-mt-en-de"
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["opus-mt-en-de"]


def test_a_marian_zip_with_a_pickle_alone_is_refused_naming_the_file_needed(checkpoint, tmp_path):
    path = zipped(checkpoint, tmp_path / "pickled.zip", skip=("model.safetensors",),
                  extra={"pytorch_model.bin": b"not read"})
    with pytest.raises(PackageError, match="only as pytorch_model.bin.*Save them as model.safetensors"):
        import_zip(path, tmp_path / "models", check=no_check, convert=convert_here)
    assert not list((tmp_path / "models").iterdir())


def test_a_marian_zip_member_past_its_size_is_refused_before_extraction(checkpoint, tmp_path, monkeypatch):
    path = zipped(checkpoint, tmp_path / "big.zip")
    monkeypatch.setattr("playground.packages.marian.MAX_JSON_BYTES", 1)
    with pytest.raises(PackageError, match="a Marian checkpoint's config.json is at most 1 here"):
        import_zip(path, tmp_path / "models", check=no_check, convert=convert_here)
    assert not list((tmp_path / "models").iterdir())
