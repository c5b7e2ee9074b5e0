"""Package names: the safe folder name, the shipped read-only packages, and the in-process reservations that keep two
operations from writing one name.

A name is reserved in this process's memory, not on disk. The models folder may be a Storage Bucket mounted into a
Space, an object store: there os.mkdir is no lock (nothing is exclusive across processes or mounts), files show
to other readers seconds late, and an empty folder does not outlive a restart. One server process serves the
models folder (Gradio runs every handler in its threads); ZeroGPU's worker, forked from it, writes the package the
server reserved and takes no reservation itself. So the reservations are a set under a lock in this process, and
a fork starts with a fresh lock (a thread of the parent may have held it at the fork).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

from playground.errors import PackageError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SHIPPED_MODELS_DIR = Path(__file__).resolve().parents[2] / "models"  # models that come with the repo
SHIPPED_MODELS = ("demo-en-de",)


def is_shipped(folder: str | os.PathLike) -> bool:
    """A package that ships with the repo: read-only in every mode (never deleted, overwritten or resumed into)."""
    folder = Path(folder).resolve()
    return folder.name in SHIPPED_MODELS and folder.parent == SHIPPED_MODELS_DIR


MAX_NAME_SHOWN = 80  # characters of a name a message repeats (a package's name has at most 64)


def shown_name(name: object) -> str:
    """A name as a message repeats it: quoted, and cut when it is longer than any package's (a stranger's 5,000
    characters are not echoed whole)."""
    text = str(name)
    return repr(text if len(text) <= MAX_NAME_SHOWN else text[:MAX_NAME_SHOWN] + "…")


def check_name(name: str) -> str:
    """A package name is one safe folder name: it can never climb out of models/ or hide as a dot-folder."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or ".." in name:
        raise PackageError(f"Invalid model name {shown_name(name)}: use 1-64 letters, digits, '.', '_' or '-', "
                           "starting with a letter or digit.")
    return name


def package_path(models_dir: str | os.PathLike, name: str) -> Path:
    return Path(models_dir) / check_name(name)


def safe_stem(text: str) -> str:
    """A package name made of any text (an uploaded zip's folder name): unsafe runs of characters become '-'."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")[:64]
    return cleaned or "uploaded-model"


def snapshots_folder(folder: Path) -> Path:
    """Where a run with --average-last keeps its validation snapshots (playground.training.averaging.SnapshotStore): a
    dot-folder, so no package name (a visitor's "x-snapshots" included) ever collides with it."""
    return folder.with_name(f".{folder.name}.snapshots")


def average_name(name: str) -> str:
    """The package a run with --average-last writes at the end: the mean of its last validation snapshots."""
    return f"{name}-avg"


RESERVED: set[str] = set()  # the folders (as absolute paths) an operation of this process is writing
RESERVING = threading.Lock()


def fresh_reservation_lock() -> None:
    global RESERVING
    RESERVING = threading.Lock()


os.register_at_fork(after_in_child=fresh_reservation_lock)


def reservation_key(folder: Path) -> str:
    return os.path.abspath(folder)


def reserved(folder: Path) -> bool:
    """An operation of this process is writing this package."""
    return reservation_key(folder) in RESERVED


def try_lock(folder: Path) -> bool:
    """Take the reservation of folder's name; False when an operation holds it."""
    key = reservation_key(folder)
    with RESERVING:
        if key in RESERVED:
            return False
        RESERVED.add(key)
        return True


def unlock(folder: Path) -> None:
    with RESERVING:
        RESERVED.discard(reservation_key(folder))


@contextlib.contextmanager
def reserve_name(models_dir: str | os.PathLike, base: str, *, exact: bool = False) -> Iterator[Path]:
    """Hold a package name for the whole of an operation that writes it (train, import, average, resume), so nothing
    else writes that name meanwhile. exact=False: `base` or the first free `base-N` that is no package yet;
    exact=True: `base` itself (it may be a package: resuming, overwriting), PackageError if another operation holds
    it. Yields the package folder."""
    models_dir = Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    check_name(base)
    name, n = base, 1
    while True:
        folder = models_dir / name
        if exact:
            if not try_lock(folder):
                raise PackageError(f"{name} is being written by another run or upload right now; try again when it "
                                   "has finished, or choose another name.")
            break
        if not folder.exists() and try_lock(folder):
            if not folder.exists():  # an operation that held the name just before us may have finished it
                break
            unlock(folder)
        n += 1
        name = f"{base}-{n}"
    try:
        yield folder
    finally:
        unlock(folder)


@contextlib.contextmanager
def reserve_package(folder: str | os.PathLike, *, overwrite: bool = False,
                    resume: str | os.PathLike | None = None) -> Iterator[Path]:
    """Reserve the exact package `folder` for a command that writes it: an existing package is refused unless
    `overwrite` (or it is the package being resumed), and a shipped one always."""
    folder = Path(folder)
    check_name(folder.name)
    if is_shipped(folder):
        raise PackageError(f"{folder.name} ships with the playground and is never overwritten; choose another --out.")
    resuming = resume is not None and Path(resume).resolve() == folder.resolve()
    if folder.exists() and not (overwrite or resuming):
        raise PackageError(f"{folder} exists already; choose another --out, or pass --overwrite to replace it.")
    with reserve_name(folder.parent, folder.name, exact=True) as reserved_folder:
        yield reserved_folder
