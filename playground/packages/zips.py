"""Package zips: export one for download, and import one safely (every member checked before a byte is extracted,
the result loaded once as a check, then moved in whole).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

from playground import limits
from playground.errors import PackageError
from playground.packages.format import (
    ALLOWED,
    CONFIG,
    REQUIRED,
    RESUME_STATE,
    RESUME_TENSORS,
    read_config,
    read_json,
    write_json,
)
from playground.packages.names import check_name, reserve_name, safe_stem
from playground.packages.store import load_package
from playground.packages.sweep import temp_prefix
from playground.settings import GB

MAX_ZIP_BYTES = 2 * GB  # uncompressed total a package zip may expand to
MAX_ZIP_RATIO = 200  # uncompressed / compressed size; far above real weights (~1.1), far below zip bombs


def export_zip(folder: str | os.PathLike, dest_dir: str | os.PathLike | None = None, with_state: bool = False) -> Path:
    """Zip the package files; the training state (resume.*, about twice the weights) only `with_state`, for a model
    that is to be trained further on another machine."""
    folder = Path(folder)
    read_config(folder)
    dest = Path(dest_dir or tempfile.mkdtemp(prefix="playground-zip-")) / f"{folder.name}.zip"
    left_out = set() if with_state else {RESUME_TENSORS, RESUME_STATE}
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(ALLOWED - left_out):
            if (folder / name).is_file():
                zf.write(folder / name, f"{folder.name}/{name}")
    return dest


def zip_members(zf: zipfile.ZipFile, zip_size: int) -> dict[str, zipfile.ZipInfo]:
    """Check every member before extracting anything; return {file name: info} of a flat package."""
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in zf.infolist():
        name = info.filename
        if not name or name.endswith("/"):
            continue
        if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in Path(name).parts or "\\" in name:
            raise PackageError(f"The zip holds an unsafe path {name!r} (absolute or climbing out); it was refused.")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise PackageError(f"The zip holds a link {name!r}; packages contain plain files only.")
        parts = Path(name).parts
        if len(parts) > 2:
            raise PackageError(f"The zip holds a nested path {name!r}; a package is one flat folder.")
        base = parts[-1]
        if base not in ALLOWED:
            pickled = base.endswith((".pt", ".pth", ".bin", ".pkl", ".ckpt"))
            kind = " (pickled PyTorch files are never loaded)" if pickled else ""
            raise PackageError(f"The zip holds {name!r}, which is not part of a model package{kind}. "
                               f"Allowed files: {', '.join(sorted(ALLOWED))}.")
        if base in members:
            raise PackageError(f"The zip holds {base} twice.")
        limit = limits.max_file_bytes(base)
        if info.file_size > limit:
            raise PackageError(f"{base} in the zip expands to {info.file_size:,} bytes; at most {limit:,} are allowed "
                               f"for it (the operator sets {limits.env_name(base)}). It was refused.")
        total += info.file_size
        members[base] = info
    if total > MAX_ZIP_BYTES:
        raise PackageError(f"The zip expands to {total / GB:.1f} GB; the limit is {MAX_ZIP_BYTES / GB:.0f} GB.")
    if zip_size and total / zip_size > MAX_ZIP_RATIO:
        raise PackageError("The zip expands more than 200-fold, like a zip bomb; it was refused.")
    missing = [f for f in REQUIRED if f not in members]
    if missing:
        raise PackageError(f"The zip is not a model package: it lacks {', '.join(missing)}.")
    return members


def import_zip(zip_path: str | os.PathLike, models_dir: str | os.PathLike, name: str | None = None,
               check: Callable[[Path], object] = load_package) -> Path:
    """Validate a package zip, extract it beside models/, load it once as a check (`check`: the app does it in a
    worker process, playground.serving.work.check_upload), then move it in: models/ gets the whole package or
    nothing."""
    zip_path, models_dir = Path(zip_path), Path(models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(".import"), dir=models_dir))
    try:
        try:
            folder_name = extract_zip(zip_path, tmp)
        except PackageError:
            raise
        except Exception as err:  # zipfile is not hardened: hostile archives raise many kinds of errors
            raise PackageError(f"{zip_path.name} is not a readable zip file ({type(err).__name__}: {err}).") from err
        try:
            check(tmp)  # refuse anything that does not load (every file's size and schema included)
        except PackageError as err:  # named as the visitor knows it, not by the internal folder it was checked in
            raise PackageError(str(err).replace(tmp.name, folder_name)) from err
        # a given name was reserved for this import by its caller (Library.add): that name, or an error, never another
        with reserve_name(models_dir, check_name(name) if name else safe_stem(folder_name), exact=bool(name)) as target:
            if target.exists():
                raise PackageError(f"A model named {target.name} exists already; upload the zip under another name.")
            config = read_json(tmp / CONFIG)
            config["name"] = target.name
            write_json(tmp / CONFIG, config)
            os.replace(tmp, target)
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def extract_zip(zip_path: Path, dest: Path) -> str:
    """Check every member, then extract the flat package into dest; returns the folder name inside the zip."""
    with zipfile.ZipFile(zip_path) as zf:
        members = zip_members(zf, zip_path.stat().st_size)
        for base, info in members.items():
            with zf.open(info) as src, open(dest / base, "wb") as dst:
                if copy_limited(src, dst, info.file_size) != info.file_size:
                    raise PackageError(f"{base} in the zip is truncated or lies about its size.")
        first = Path(next(iter(members.values())).filename).parts
        return first[0] if len(first) == 2 else zip_path.stem


def copy_limited(src, dst, limit: int) -> int:
    """Copy at most limit+1 bytes: a member that expands beyond what its header says is caught, not written."""
    copied = 0
    while chunk := src.read(min(1 << 20, limit + 1 - copied)):
        dst.write(chunk)
        copied += len(chunk)
        if copied > limit:
            break
    return copied
