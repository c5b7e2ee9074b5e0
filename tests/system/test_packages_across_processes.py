"""Packages and their names across processes: another process's package on a lagging mount, a forked child's
reservations, and the sweep of what a dead process left."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from helpers import ALICE, BOB, REPO, shared_library

from playground.packages.names import reserve_name
from playground.packages.store import load_package, package_info, remove_package, save_package
from playground.packages.sweep import sweep_downloads, sweep_leftovers


def test_a_package_another_process_wrote_stays_its_owners_while_the_mount_shows_it_late(bucket, tmp_path, tiny):
    """ZeroGPU: the worker process writes the run's package; the server sees it seconds later. The old forget() saw
    no folder at the end of the run and gave the name up, so the finished package belonged to nobody."""
    models = tmp_path / "models"
    library = shared_library(models)
    library.visible_within_s = 3.0  # a tmp folder is no FUSE mount; a bucket's gets VISIBLE_WITHIN_S
    done = tmp_path / "done"
    save_package(done, *tiny)
    bucket.lag = 1.5
    folder = library.add("run", ALICE, 10_000)
    run = folder.name
    with library.writing(folder):
        subprocess.run([sys.executable, "-c", f"import shutil; shutil.copytree({str(done)!r}, {str(folder)!r})"],
                       check=True, cwd=REPO, timeout=60)
        assert run not in library.names(ALICE)  # not visible yet
    assert library.owners.read()[run]["owner"] == ALICE.key and run in library.pending
    time.sleep(1.6)
    assert run in library.names(ALICE) and run not in library.names(BOB)
    time.sleep(1.6)  # past visible_within_s: looked at again, and kept
    assert library.owners.read()[run]["owner"] == ALICE.key and run not in library.pending


def test_reservations_live_in_the_process_and_a_fork_can_take_its_own(tmp_path):
    """Nothing on disk (a bucket mount has no exclusive mkdir); a child forked while a thread of the parent held the
    reservations' lock (ZeroGPU forks its worker from the server) gets a lock of its own instead of a deadlock."""
    import threading

    from playground.packages import names as package_module
    with reserve_name(tmp_path, "x", exact=True):
        assert not any(tmp_path.iterdir())
    held, release = threading.Event(), threading.Event()

    def hold():
        with package_module.RESERVING:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's verdict is its exit status
        os._exit(0 if package_module.RESERVING.acquire(timeout=5) else 1)
    release.set()
    holder.join()
    assert os.waitpid(child, 0)[1] == 0


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_download_folders_are_swept_at_their_age_or_when_their_process_is_gone(tmp_path):
    """The app serves its downloads from Gradio's cache, which ages files out after an hour: its folders there are
    kept that long (a visitor's link works as long as Gradio's own copies did), and other folders are left alone."""
    hour, now = 3600, time.time()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live app's process
    gone = tmp_path / f"download-{dead_pid()}-aa"
    fresh, old, older = (tmp_path / f"download-{server.pid}-{key}" for key in ("bb", "cc", "dd"))
    others = [tmp_path / "download-notes.txt", tmp_path / f"package-{dead_pid()}-ee"]
    try:
        for path, age in ((gone, 0), (fresh, hour - 60), (old, hour + 60), (older, 2 * hour)):
            path.mkdir()
            os.utime(path, (now - age, now - age))
        others[0].write_text("not a download folder")
        others[1].mkdir()  # another program's
        assert sorted(sweep_downloads(tmp_path, hour)) == sorted([gone, old, older])
        assert sweep_downloads(tmp_path, 600) == [fresh]
    finally:
        server.kill()
        server.wait()
    assert sorted(tmp_path.iterdir()) == sorted(others)


def test_the_sweep_removes_what_no_live_operation_owns(package, tmp_path):
    models = tmp_path / "models"
    tiny = load_package(package)
    kept = save_package(models / "kept", tiny.model, tiny.tokenizer)
    gone = dead_pid()
    leftovers = [models / f".import-{gone}-x1", models / f".kept.tmp-{gone}-abcd", models / ".old-run.lock",
                 models / ".running.lock", models / ".deleted.snapshots"]
    live = [models / f".import-{os.getpid()}-x2", models / ".kept.snapshots", models / ".running.snapshots"]
    for path in leftovers + live:
        path.mkdir(parents=True)
    (models / ".deleted.snapshots" / "step-00000010").mkdir()
    (models / ".kept.snapshots" / "weights.bin").write_bytes(b"\0" * 5000)
    (models / ".old-run.lock" / "pid").write_text(str(gone))
    (models / ".running.lock" / "pid").write_text(str(os.getpid()))  # on-disk reservations are no more
    with reserve_name(models, "running", exact=True):  # a run in progress: its snapshots stay
        assert sorted(sweep_leftovers(models)) == sorted(leftovers)
    assert all(p.exists() for p in live) and not any(p.exists() for p in leftovers)
    assert package_info(kept)["snapshot_bytes"] == 5000  # counted toward the package's size (and quotas)
    remove_package(kept)
    assert not (models / ".kept.snapshots").exists()
