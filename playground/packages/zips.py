"""Package zips: export one for download, and import one safely (every member checked before a byte is extracted,
the result loaded once as a check, then moved in whole); a zip of a 🤗 transformers Marian checkpoint (OPUS-MT) is
imported the same way, converted into a package first (playground.packages.marian).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Iterator

from playground import limits
from playground.errors import PackageError
from playground.packages.format import (
    ALLOWED,
    CONFIG,
    REQUIRED,
    RESUME_STATE,
    RESUME_TENSORS,
    WEIGHTS,
    read_config,
    read_json,
    write_json,
)
from playground.packages.marian import (
    MARIAN_FILES,
    OPTIONAL_FILES,
    PICKLED_WEIGHTS,
    import_marian,
    marian_file_bytes,
)
from playground.packages.names import check_name, reserve_name, safe_stem
from playground.packages.store import load_package
from playground.packages.sweep import temp_prefix, written_whole
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
    # a zip that is being served, or written by another call, is replaced whole
    with written_whole(dest) as partial, zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(ALLOWED - left_out):
            if (folder / name).is_file():
                zf.write(folder / name, f"{folder.name}/{name}")
    return dest


def zip_members(zf: zipfile.ZipFile, zip_size: int) -> tuple[dict[str, zipfile.ZipInfo], bool]:
    """Check every member before extracting anything; return ({file name: info} of the flat folder's files to
    extract, whether it is a 🤗 transformers Marian checkpoint rather than a package). A Marian checkpoint's zip (it
    holds source.spm) is a saved or downloaded folder: of its files only those the import reads are extracted."""
    infos = [info for info in zf.infolist() if info.filename and not info.filename.endswith("/")]
    for info in infos:
        check_member_path(info)
    marian = any(Path(info.filename).name == "source.spm" for info in infos)
    limit_of = marian_file_bytes if marian else limits.max_file_bytes
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name, base = info.filename, Path(info.filename).name
        if marian and base not in (*MARIAN_FILES, *OPTIONAL_FILES):
            continue  # another format's weights, special_tokens_map.json, .gitattributes: not read, not extracted
        if not marian and base not in ALLOWED:
            pickled = base.endswith((".pt", ".pth", ".bin", ".pkl", ".ckpt"))
            kind = " (pickled PyTorch files are never loaded)" if pickled else ""
            raise PackageError(f"The zip holds {name!r}, which is not part of a model package{kind}. "
                               f"Allowed files: {', '.join(sorted(ALLOWED))}.")
        if base in members:
            raise PackageError(f"The zip holds {base} twice.")
        limit = limit_of(base)
        if info.file_size > limit and marian:
            raise PackageError(f"{base} in the zip expands to {info.file_size:,} bytes; a Marian checkpoint's {base} "
                               f"is at most {limit:,} here. It was refused: choose a smaller model.")
        if info.file_size > limit:
            raise PackageError(f"{base} in the zip expands to {info.file_size:,} bytes; at most {limit:,} are allowed "
                               f"for it (the operator sets {limits.env_name(base)}). It was refused.")
        total += info.file_size
        members[base] = info
    if total > MAX_ZIP_BYTES:
        raise PackageError(f"The zip expands to {total / GB:.1f} GB; the limit is {MAX_ZIP_BYTES / GB:.0f} GB.")
    if zip_size and total / zip_size > MAX_ZIP_RATIO:
        raise PackageError("The zip expands more than 200-fold, like a zip bomb; it was refused.")
    required = MARIAN_FILES if marian else REQUIRED
    missing = [f for f in required if f not in members]
    if marian and WEIGHTS in missing and any(Path(i.filename).name == PICKLED_WEIGHTS for i in infos):
        raise PackageError(f"The zip holds the weights only as {PICKLED_WEIGHTS} (a Python pickle, which can run code "
                           "when read; the playground reads no pickle). Save them as model.safetensors first "
                           "(transformers' save_pretrained does), then zip the folder again.")
    if missing:
        what = f"a 🤗 transformers Marian checkpoint (it needs {', '.join(MARIAN_FILES)})" if marian else \
            "a model package"
        raise PackageError(f"The zip is not {what}: it lacks {', '.join(missing)}.")
    return members, marian


def check_member_path(info: zipfile.ZipInfo) -> None:
    """A member is a plain file in at most one folder: no absolute or climbing path, no link."""
    name = info.filename
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in Path(name).parts or "\\" in name:
        raise PackageError(f"The zip holds an unsafe path {name!r} (absolute or climbing out); it was refused.")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise PackageError(f"The zip holds a link {name!r}; packages contain plain files only.")
    if len(Path(name).parts) > 2:
        raise PackageError(f"The zip holds a nested path {name!r}; a package is one flat folder.")


def import_zip(zip_path: str | os.PathLike, models_dir: str | os.PathLike, name: str | None = None,
               check: Callable[[Path], object] = load_package,
               convert: Callable[[Path, Path, str], object] = import_marian) -> Path:
    """Validate a package zip, extract it beside models/, load it once as a check (`check`: the app does it in a
    worker process, playground.serving.work.check_upload), then move it in: models/ gets the whole package or
    nothing. A zip of a 🤗 transformers Marian checkpoint is first converted into a package (`convert(checkpoint,
    package, origin)`: import_marian, which the app runs in a worker process too)."""
    zip_path = Path(zip_path)
    with staging(models_dir) as tmp:
        try:
            folder_name, marian = extract_zip(zip_path, tmp)
        except PackageError:
            raise
        except Exception as err:  # zipfile is not hardened: hostile archives raise many kinds of errors
            raise PackageError(f"{zip_path.name} is not a readable zip file ({type(err).__name__}: {err}).") from err
        return install(tmp, models_dir, name, folder_name, check, convert if marian else None)


@contextlib.contextmanager
def staging(models_dir: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder beside the packages (the sweep removes what a killed import leaves), removed at the end."""
    Path(models_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(".import"), dir=models_dir))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install(tmp: Path, models_dir: str | os.PathLike, name: str | None, shown: str,
            check: Callable[[Path], object] = load_package,
            convert: Callable[[Path, Path, str], object] | None = None) -> Path:
    """The package in the staging folder `tmp` (with `convert`: made there from the Marian checkpoint in `tmp`, its
    origin `shown`) checked, then moved into models_dir as `name` (reserved by the caller; None: a name made of
    `shown`, suffixed when taken)."""
    staged = tmp
    if convert is not None:  # the package is written beside the checkpoint's files, under a name save_package takes
        staged = tmp / "package" / (check_name(name) if name else safe_stem(shown))
    try:
        if convert is not None:
            convert(tmp, staged, shown)
        check(staged)  # refuse anything that does not load (every file's size and schema included)
    except PackageError as err:  # named as the visitor knows it, not by the internal folder it was checked in
        raise PackageError(str(err).replace(tmp.name, shown)) from err
    # a given name was reserved for this import by its caller (Library.add): that name, or an error, never another
    with reserve_name(Path(models_dir), check_name(name) if name else safe_stem(shown), exact=bool(name)) as target:
        if target.exists():
            raise PackageError(f"A model named {target.name} exists already; upload the zip under another name.")
        config = read_json(staged / CONFIG)
        config["name"] = target.name
        write_json(staged / CONFIG, config)
        os.replace(staged, target)
    return target


def extract_zip(zip_path: Path, dest: Path) -> tuple[str, bool]:
    """Check every member, then extract the flat folder's files into dest; returns the folder name inside the zip,
    and whether it is a Marian checkpoint (zip_members)."""
    with zipfile.ZipFile(zip_path) as zf:
        members, marian = zip_members(zf, zip_path.stat().st_size)
        for base, info in members.items():
            with zf.open(info) as src, open(dest / base, "wb") as dst:
                if copy_limited(src, dst, info.file_size) != info.file_size:
                    raise PackageError(f"{base} in the zip is truncated or lies about its size.")
        first = Path(next(iter(members.values())).filename).parts
        return (first[0] if len(first) == 2 else zip_path.stem), marian


def copy_limited(src, dst, limit: int) -> int:
    """Copy at most limit+1 bytes: a member that expands beyond what its header says is caught, not written."""
    copied = 0
    while chunk := src.read(min(1 << 20, limit + 1 - copied)):
        dst.write(chunk)
        copied += len(chunk)
        if copied > limit:
            break
    return copied
