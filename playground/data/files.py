"""Opening a data file within the limits: gzip found by its magic bytes, reads capped, one "too large" message."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from playground.errors import DataError
from playground.settings import MB

GZIP_MAGIC = b"\x1f\x8b"
SMALLER_SAMPLE = "Upload a smaller sample of the corpus."


@contextmanager
def open_maybe_gzip(path: Path) -> Iterator[tuple[BinaryIO, bool]]:
    """(a binary stream of the file's content, decompressed if it is gzip data; whether it was). Told by the magic
    bytes, not the extension: uploads get renamed."""
    with path.open("rb") as raw:
        compressed = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        yield (gzip.GzipFile(fileobj=raw) if compressed else raw), compressed


def format_bytes(size: int) -> str:
    return f"{size / MB:,.0f} MB" if size >= MB else f"{size:,} bytes"


def too_large(name: str, found: str, limit: str, env: str, fix: str = SMALLER_SAMPLE) -> str:
    """The one message for data past a limit: what was found, what the limit is, the fix, and the setting that
    raises it. too_large("a.tsv", "3 MB", "2 MB", "PLAYGROUND_MAX_DATA_MB") is "a.tsv is too large: 3 MB; the
    limit is 2 MB. Upload a smaller sample of the corpus (the operator can raise the limit with
    PLAYGROUND_MAX_DATA_MB)."
    """
    return (f"{name} is too large: {found}; the limit is {limit}. {fix.rstrip('.')} (the operator can raise the limit "
            f"with {env}).")


def too_many_bytes(name: str, limit: int, size: int | None = None, after: str = "") -> str:
    """too_large for bytes of text: `size` when known, else "more than the limit"; `after` says where they were
    counted (" after decompression")."""
    found = format_bytes(size) if size is not None else f"more than {format_bytes(limit)}"
    return too_large(name, found + after, format_bytes(limit), "PLAYGROUND_MAX_DATA_MB")


class LimitedReader(io.RawIOBase):
    """A binary stream that refuses to yield more than `limit` bytes: a size check for streamed (decompressed) input."""

    def __init__(self, stream: BinaryIO, limit: int, name: str, after: str) -> None:
        self.stream, self.limit, self.name, self.after, self.read_so_far = stream, limit, name, after, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise DataError(too_many_bytes(self.name, self.limit, after=self.after))
        buffer[: len(data)] = data
        return len(data)
