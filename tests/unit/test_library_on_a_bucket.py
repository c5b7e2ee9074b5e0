"""The models folder on a Storage Bucket mounted into a Space: the Library stays correct under the mount's semantics.

The fixture `bucket` imitates them in this process with monkeypatch (hf-mount's README: "no file locking", "files
can be stale for up to 10 s", writes "upload on close", chmod "in-memory only"; its rename sends one add and one
delete per file):
- os.mkdir of an existing folder succeeds (object storage has no exclusive mkdir: no lock can be taken with it);
- os.chmod changes nothing on disk (only remembered);
- os.replace / os.rename copy, then delete: never atomic, and `bucket.cut_next_rename()` makes the next one stop
  after the old target is gone and before the new one is there (a crash in between);
- `bucket.lag = s`: a file or folder younger than s seconds does not exist for exists / is_dir / is_file / iterdir
  (what the server sees of a package another process, ZeroGPU's worker, has just written).
"""

from __future__ import annotations

import os
import time

import pytest
from helpers import ALICE, BOB, shared_library

from playground.errors import PackageError
from playground.packages.names import reserve_name
from playground.packages.store import load_package, save_package
from playground.serving.library import REGISTRY, Library
from playground.serving.mode import lagging_mount

SETTLED = {REGISTRY, ".browser-secret"}  # what a shared models folder keeps beside its packages


def test_the_fixture_is_a_bucket(bucket, tmp_path):
    """What the tests below stand on: mkdir is no lock, chmod does nothing, a young file is not there yet."""
    os.mkdir(tmp_path / "x")
    os.mkdir(tmp_path / "x")  # a second "lock" succeeds
    (tmp_path / "f").write_text("s")
    os.chmod(tmp_path / "f", 0o600)
    assert (tmp_path / "f").stat().st_mode & 0o777 != 0o600
    bucket.lag = 5.0
    assert not (tmp_path / "f").exists() and not list(tmp_path.iterdir())


def test_a_name_is_held_by_one_operation_without_an_exclusive_mkdir(bucket, tmp_path):
    models = tmp_path / "models"
    with reserve_name(models, "run", exact=True):
        with pytest.raises(PackageError, match="being written by another run or upload"):
            with reserve_name(models, "run", exact=True):
                pass
        with reserve_name(models, "run") as other:  # an import of the same name gets the next free one
            assert other.name == "run-2"
    with reserve_name(models, "run", exact=True):  # let go at the end
        pass


def test_packages_save_and_load_with_chmod_in_memory_and_renames_that_copy(bucket, tmp_path, tiny):
    library = shared_library(tmp_path / "models")
    folder = library.add("mine", ALICE, 10_000)
    with library.writing(folder):
        save_package(folder, *tiny)
        save_package(folder, *tiny)  # a second save swaps the first one out
    assert library.names(ALICE)[0] == folder.name and folder.name not in library.names(BOB)
    assert load_package(library.folder(folder.name, ALICE)).model.cfg.d_model == 8
    assert not [p.name for p in folder.parent.iterdir() if p.name.startswith(".") and p.name not in SETTLED]


def test_the_owners_survive_a_registry_rename_cut_in_half(bucket, tmp_path, tiny):
    models = tmp_path / "models"
    library = shared_library(models)
    alices = save_package(library.add("alices", ALICE, 10_000), *tiny).name
    bucket.cut_next_rename()
    with pytest.raises(OSError, match="cut in half"):
        library.add("bobs", BOB, 10_000)  # the process dies while the registry is renamed into place
    assert not (models / REGISTRY).exists()
    restarted = shared_library(models)
    assert alices in restarted.names(ALICE) and alices not in restarted.names(BOB)
    bobs = f"{restarted.name_tag(BOB)}-bobs"
    assert restarted.owners.read()[bobs]["owner"] == BOB.key  # the newest whole copy, not an empty registry
    assert (models / REGISTRY).exists() and not list(models.glob(".owners-*.tmp"))


def test_a_run_that_never_saved_lets_its_name_go_after_the_wait(bucket, tmp_path):
    library = shared_library(tmp_path / "models")
    library.visible_within_s = 0.3
    folder = library.add("failed", ALICE, 10_000)
    with library.writing(folder):
        pass
    assert folder.name in library.pending
    time.sleep(0.6)
    assert folder.name not in library.owners.read() and not library.pending


def test_only_fuse_and_nfs_mounts_lag(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\n"
                      "hf-mount /data fuse.hf-mount rw,nosuid 0 0\n"
                      "server:/x /mnt/nfs\\040share nfs4 rw 0 0\n")
    assert lagging_mount("/data/models", mounts) and lagging_mount("/data", mounts)
    assert lagging_mount("/mnt/nfs share/models", mounts)
    assert not lagging_mount("/datasets", mounts) and not lagging_mount("/home/user/app/models", mounts)
    assert Library(tmp_path / "local", shared=True).visible_within_s == 0  # a local disk: let go at once


def test_everything_written_to_the_models_folder_works_without_hard_links(bucket, tmp_path, tiny):
    """The server's secret, an imported zip, a saved package, its replacement and the registry: no os.link (ENOTSUP
    on the bucket), every rename a copy and a delete, and the secret read back the same after a restart."""
    from playground.packages.zips import export_zip, import_zip
    from playground.serving.visitors import issue_token, server_secret, verify_token

    models = tmp_path / "models"
    models.mkdir()
    with pytest.raises(OSError):
        os.link(__file__, tmp_path / "linked")  # the fixture has no hard links
    secret = server_secret(models)
    assert len(secret) >= 32 and server_secret(models) == secret  # made once, then read back
    token = issue_token(secret)
    assert verify_token(token, server_secret(models))  # a restart still knows the browser
    assert not list(models.glob(".secret-*"))
    (models / ".browser-secret").write_text("short")  # damaged: replaced by a rename that copies
    assert server_secret(models) != secret and len(server_secret(models)) >= 32

    library = shared_library(models)
    saved = save_package(library.add("mine", ALICE, 10_000), *tiny)
    save_package(saved, *tiny)  # swapped in again over itself
    imported = import_zip(export_zip(saved, tmp_path), models, name=library.add("copy", ALICE, 10_000).name)
    assert load_package(imported).model.cfg.d_model == 8 and load_package(saved).model.cfg.d_model == 8
    assert {saved.name, imported.name} <= set(library.names(ALICE))
    assert sorted(p.name for p in models.iterdir() if p.name.startswith(".")) == [".browser-secret", REGISTRY]
