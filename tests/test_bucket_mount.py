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
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sharing import ALICE, BOB, tiny  # noqa: F401 (tiny: a fixture)

from playground.errors import PackageError
from playground.packages.names import reserve_name
from playground.packages.store import load_package, save_package
from playground.serving.library import REGISTRY, Library
from playground.serving.mode import lagging_mount
from playground.serving.quotas import Quotas

REPO = Path(__file__).resolve().parent.parent


class Bucket:
    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.lag, self.cut, self.modes = 0.0, False, {}
        real_mkdir, real_unlink, real_stat = os.mkdir, os.unlink, os.stat
        real_copy2, real_copytree, real_rmtree = shutil.copy2, shutil.copytree, shutil.rmtree
        real_exists, real_is_dir, real_is_file, real_iterdir = Path.exists, Path.is_dir, Path.is_file, Path.iterdir

        def mkdir(path, mode=0o777, *, dir_fd=None):
            if not os.path.isdir(path):
                real_mkdir(path, mode)

        def chmod(path, mode, *args, **kwargs):
            self.modes[os.fspath(path)] = mode

        def replace(src, dst, *args, **kwargs):
            src, dst = os.fspath(src), os.fspath(dst)
            if os.path.isdir(src):
                if os.path.isdir(dst):
                    if os.listdir(dst):
                        raise OSError(39, "Directory not empty", dst)
                    os.rmdir(dst)
                real_copytree(src, dst, copy_function=real_copy2)
                real_rmtree(src)
                return
            if os.path.exists(dst):
                real_unlink(dst)
            if self.cut:
                self.cut = False
                raise OSError(5, "rename cut in half (the process died)", dst)
            real_copy2(src, dst)
            real_unlink(src)

        def young(path: Path) -> bool:
            try:
                return self.lag > 0 and time.time() - real_stat(path).st_ctime < self.lag
            except OSError:
                return False

        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "chmod", chmod)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "rename", replace)
        monkeypatch.setattr(Path, "exists", lambda p, **kw: real_exists(p, **kw) and not young(p))
        monkeypatch.setattr(Path, "is_dir", lambda p, **kw: real_is_dir(p, **kw) and not young(p))
        monkeypatch.setattr(Path, "is_file", lambda p, **kw: real_is_file(p, **kw) and not young(p))
        monkeypatch.setattr(Path, "iterdir", lambda p: (c for c in real_iterdir(p) if not young(c)))

    def cut_next_rename(self) -> None:
        self.cut = True


@pytest.fixture
def bucket(monkeypatch) -> Bucket:
    return Bucket(monkeypatch)


def shared(models: Path) -> Library:
    return Library(models, shared=True, quotas=Quotas())


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
    library = shared(tmp_path / "models")
    folder = library.add("mine", ALICE, 10_000)
    with library.writing(folder):
        save_package(folder, *tiny)
        save_package(folder, *tiny)  # a second save swaps the first one out
    assert library.names(ALICE)[0] == "mine" and "mine" not in library.names(BOB)
    assert load_package(library.folder("mine", ALICE)).model.cfg.d_model == 8
    assert not [p.name for p in folder.parent.iterdir() if p.name.startswith(".") and p.name != REGISTRY]


def test_the_owners_survive_a_registry_rename_cut_in_half(bucket, tmp_path, tiny):
    models = tmp_path / "models"
    library = shared(models)
    save_package(library.add("alices", ALICE, 10_000), *tiny)
    bucket.cut_next_rename()
    with pytest.raises(OSError, match="cut in half"):
        library.add("bobs", BOB, 10_000)  # the process dies while the registry is renamed into place
    assert not (models / REGISTRY).exists()
    restarted = shared(models)
    assert "alices" in restarted.names(ALICE) and "alices" not in restarted.names(BOB)
    assert restarted.owners.read()["bobs"]["owner"] == BOB.key  # the newest whole copy, not an empty registry
    assert (models / REGISTRY).exists() and not list(models.glob(".owners-*.tmp"))


def test_a_package_another_process_wrote_stays_its_owners_while_the_mount_shows_it_late(bucket, tmp_path, tiny):
    """ZeroGPU: the worker process writes the run's package; the server sees it seconds later. The old forget() saw
    no folder at the end of the run and gave the name up, so the finished package belonged to nobody."""
    models = tmp_path / "models"
    library = shared(models)
    library.visible_within_s = 3.0  # a tmp folder is no FUSE mount; a bucket's gets VISIBLE_WITHIN_S
    done = tmp_path / "done"
    save_package(done, *tiny)
    bucket.lag = 1.5
    folder = library.add("run", ALICE, 10_000)
    with library.writing(folder):
        subprocess.run([sys.executable, "-c", f"import shutil; shutil.copytree({str(done)!r}, {str(folder)!r})"],
                       check=True, cwd=REPO, timeout=60)
        assert "run" not in library.names(ALICE)  # not visible yet
    assert library.owners.read()["run"]["owner"] == ALICE.key and "run" in library.pending
    time.sleep(1.6)
    assert "run" in library.names(ALICE) and "run" not in library.names(BOB)
    time.sleep(1.6)  # past visible_within_s: looked at again, and kept
    assert library.owners.read()["run"]["owner"] == ALICE.key and "run" not in library.pending


def test_a_run_that_never_saved_lets_its_name_go_after_the_wait(bucket, tmp_path):
    library = shared(tmp_path / "models")
    library.visible_within_s = 0.3
    folder = library.add("failed", ALICE, 10_000)
    with library.writing(folder):
        pass
    assert "failed" in library.pending
    time.sleep(0.6)
    assert "failed" not in library.owners.read() and not library.pending


def test_only_fuse_and_nfs_mounts_lag(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\n"
                      "hf-mount /data fuse.hf-mount rw,nosuid 0 0\n"
                      "server:/x /mnt/nfs\\040share nfs4 rw 0 0\n")
    assert lagging_mount("/data/models", mounts) and lagging_mount("/data", mounts)
    assert lagging_mount("/mnt/nfs share/models", mounts)
    assert not lagging_mount("/datasets", mounts) and not lagging_mount("/home/user/app/models", mounts)
    assert Library(tmp_path / "local", shared=True).visible_within_s == 0  # a local disk: let go at once
