"""Leftovers of crashed operations: the temporary folders that saves, imports and downloads make, named so that a
sweep can tell whose they are, and the sweep that removes those of no live operation (or repairs a half-done save).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from playground.packages.format import is_package
from playground.packages.names import reserved

STALE_AFTER_S = 24 * 3600  # a temporary folder this old belongs to no live operation, whatever its pid says
STARTED = time.time()  # this process's leftovers are the ones made after it started
FOLDER_SECRET = secrets.token_bytes(32)  # export_dir's folder names cannot be worked out from their keys


def pid_alive(pid: int, made_at: float) -> bool:
    """Is the process that made a leftover at `made_at` still running? Our own pid counts only for what this process
    made (a restarted container often gets the same pid as the one that crashed)."""
    if pid == os.getpid():
        return made_at >= STARTED - 1
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def temp_prefix(kind: str) -> str:
    """Prefix of a temporary folder that the sweep can attribute to this process."""
    return f"{kind}-{os.getpid()}-"


def export_dir(*key: str, root: str | os.PathLike, empty: bool = True) -> Path:
    """A folder in `root` for one kind of download, e.g. (package, format): the same key gets the same folder,
    emptied (unless not `empty`: its files are replaced in place), so repeated downloads replace each other instead
    of piling up until the sweep (sweep_downloads). Its name is keyed by a secret of this process: in a folder that a
    web server serves (the app's are in Gradio's cache), a key, which can be public (hf:NAME), must not lead to the
    download."""
    digest = hmac.new(FOLDER_SECRET, "\0".join(key).encode(), "sha256").hexdigest()[:32]
    folder = Path(root) / f"{temp_prefix('download')}{digest}"
    if empty:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """A name beside `path` to write the file under, renamed over `path` when the block ends: a reader (a web server
    serving it, another call writing it) only ever finds a whole file. Removed when the block fails (a full disk, a
    cancelled request): no half file is left beside the finished ones."""
    partial = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        yield partial
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def made_by_dead(path: Path, pid_part: str, ttl: float = STALE_AFTER_S) -> bool:
    """Is `path` (named with the pid that made it) older than `ttl` seconds, or made by a process that is gone?"""
    try:
        made_at = path.stat().st_mtime
    except OSError:
        return False
    if time.time() - made_at > ttl:
        return True
    return pid_part.isdigit() and not pid_alive(int(pid_part), made_at)


def sweep_leftovers(models_dir: str | os.PathLike) -> list[Path]:
    """Remove what belongs to no live operation in the models folder: `.import-*` and `.NAME.tmp-*` folders of
    crashed imports and saves, `.NAME.old` of a save that crashed between its two renames (put back when NAME is
    gone), `.NAME.lock` folders (older versions' on-disk reservations) and `.NAME.snapshots` whose package is gone.
    Returns what was removed. Safe to run at any time."""
    models_dir, removed = Path(models_dir), []
    candidates: list[Path] = []
    if models_dir.is_dir():
        for path in models_dir.iterdir():
            name = path.name
            if name.startswith(".") and name.endswith(".snapshots") and path.is_dir():
                owner = path.with_name(name[1:-len(".snapshots")])
                candidates += [] if is_package(owner) or reserved(owner) else [path]
            elif name.startswith(".") and name.endswith(".lock"):  # an on-disk reservation of an older version
                candidates.append(path)
            elif name.startswith(".") and name.endswith(".old") and path.is_dir():
                removed += [path] if recover_interrupted_save(path) is False else []
            elif name.startswith(".import-"):  # .import-PID-random
                candidates += [path] if made_by_dead(path, name.split("-")[1]) else []
            elif name.startswith(".") and ".tmp-" in name:  # .NAME.tmp-PID-random
                candidates += [path] if made_by_dead(path, name.rsplit(".tmp-", 1)[1].split("-")[0]) else []
    for path in candidates:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def sweep_downloads(folder: str | os.PathLike, ttl: float) -> list[Path]:
    """Remove the download folders (export_dir's download-PID-digest) in `folder` that a dead process made or that
    are older than `ttl` seconds. Returns what was removed."""
    removed = []
    for path in Path(folder).glob("download-*"):
        if path.is_dir() and made_by_dead(path, path.name.split("-")[1], ttl):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def recover_interrupted_save(old: Path) -> bool | None:
    """A crash between the two renames of a save leaves only `.NAME.old`: put it back (True); when NAME exists, the
    old copy is deleted (False); while a live save holds NAME, its second rename is due any instant: left (None)."""
    target = old.parent / old.name[1:-4]
    if reserved(target):
        return None
    if not target.exists():
        os.replace(old, target)
        return True
    shutil.rmtree(old, ignore_errors=True)
    return False
