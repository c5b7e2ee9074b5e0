"""Which mode this app serves in and where its models live: personal or shared (a Hugging Face Space), the models
folder, and whether that folder is on a mount where other processes' files show late.

**Personal** (the default, `python app.py` on your own machine): one person, every package visible and usable.
**Shared** (on a Hugging Face Space, where `SPACE_ID` is set, or with `PLAYGROUND_SHARED=1`): each visitor sees and
uses only their own packages plus the shipped ones (playground.serving.library).

The models folder may be a Storage Bucket mounted into the Space (README, "Run it as a Space"): object storage, where
another reader sees a file seconds late, a file is uploaded whole when it is closed, a rename is a copy and a delete,
and there is no lock across processes (FUSE or NFS: `lagging_mount`).
"""

from __future__ import annotations

import os
from pathlib import Path

from playground.settings import env_flag, env_str, on_space


def shared_mode() -> bool:
    """On a Hugging Face Space (SPACE_ID is set) or when PLAYGROUND_SHARED=1; PLAYGROUND_SHARED=0 forces personal."""
    return env_flag("PLAYGROUND_SHARED", default=on_space())


def lagging_mount(folder: str | os.PathLike, mounts: str | os.PathLike = "/proc/self/mounts") -> bool:
    """Is `folder` on a FUSE or NFS mount (how a Storage Bucket is mounted), where another process's new files show
    late? Judged by the mount that holds it: the longest mount point above it in /proc/self/mounts."""
    path, best, fstype = os.path.realpath(folder), "", ""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    return fstype.startswith(("fuse", "nfs"))


def models_location(shared: bool, default: str | os.PathLike = "models") -> tuple[Path, bool]:
    """(where new packages go, whether they survive a restart of the Space).

    PLAYGROUND_MODELS_DIR wins in both modes; a shared app uses /data/models when /data (a Space's persistent
    storage) is writable; otherwise `default`, which a Space wipes on restart."""
    if env_str("PLAYGROUND_MODELS_DIR"):
        return Path(env_str("PLAYGROUND_MODELS_DIR")), True
    data = Path("/data")
    if shared and data.is_dir() and os.access(data, os.W_OK):
        return data / "models", True
    return Path(default), not shared
