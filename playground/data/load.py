"""Read the parallel text that users upload: detect its format from the content and hand it to that format's reader.

Accepted layouts, detected from the content (not the file name); any of them but Parquet may be gzip-compressed:

- TSV or CSV with two columns, source then target, and an optional header row ("en<TAB>de", "source,target")
  (playground.data.delimited).
- JSON Lines: one {"src": ..., "tgt": ...} or {"translation": {"en": ..., "de": ...}} object per line
  (playground.data.jsonl).
- Two aligned plain-text files (``path`` and ``tgt_path``), one sentence per line.
- TMX, streamed (playground.data.tmx); Parquet, one row group at a time (playground.data.parquet).

Every side is NFC-normalised and its whitespace collapsed to single spaces, so that duplicates are found and
tokenizers round-trip exactly. Rows that cannot be used are counted by reason in ``ParallelData.dropped``
(playground.data.rows).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from playground import limits
from playground.data.delimited import detect_delimiter, read_delimited
from playground.data.files import open_maybe_gzip, too_many_bytes
from playground.data.jsonl import looks_like_jsonl, parses_as_json, read_jsonl
from playground.data.languages import language_from_file_name
from playground.data.parquet import PARQUET_MAGIC, read_parquet
from playground.data.rows import ACCEPTED_FORMATS, PairFilter, ParallelData
from playground.data.tmx import read_tmx
from playground.errors import DataError

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\v\f\r")
_BINARY_SAMPLE_BYTES = 64 * 1024
_DETECTION_SAMPLE_LINES = 200


def load_parallel(
    path: str | os.PathLike,
    tgt_path: str | os.PathLike | None = None,
    *,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    max_words: int = 256,
    dedupe: bool = True,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    language_hint: tuple[str, str] | None = None,
) -> ParallelData:
    """Read sentence pairs from one TSV/CSV/JSONL/TMX/Parquet file, or from two aligned files (``path`` + ``tgt_path``).

    ``max_words`` is the longest side kept, in whitespace words (and ``CHARS_PER_TOKEN_LIMIT * max_words``
    characters). ``max_bytes`` (uncompressed, per file) and ``max_rows`` guard memory. ``language_hint`` (source,
    target) picks the pair of a multilingual file when no language is asked for and the file has more than two.
    Any problem with the input raises ``DataError`` saying what is wrong, where, and how to fix it.
    """
    max_bytes = max_bytes or limits.max_data_bytes()
    max_rows = max_rows or limits.max_data_rows()
    if max_words < 1:
        raise DataError(f"max_words must be at least 1 word, not {max_words}.")
    path = Path(path)
    rows = PairFilter(path.name, max_words, dedupe, max_rows)
    if tgt_path is not None:
        return _load_aligned(path, Path(tgt_path), src_lang, tgt_lang, rows, max_bytes)
    kind = _sniff(path)
    if kind == "parquet":
        src_lang, tgt_lang = read_parquet(path, rows, src_lang, tgt_lang, language_hint, max_bytes)
        return rows.finish("parquet", src_lang, tgt_lang)
    if kind in ("tmx", "tmx+gzip"):
        src_lang, tgt_lang = read_tmx(path, rows, src_lang, tgt_lang, language_hint, max_bytes)
        return rows.finish(kind, src_lang, tgt_lang)

    text, compressed = _read_text(path, max_bytes)
    lines = text.split("\n")
    head = _head(lines)
    sample = [line for line in head if line.strip()]  # not empty: the text is not blank
    first = sample[0].strip()
    if first in ("{", "[") or (first.startswith("[") and parses_as_json(text)):
        raise DataError(
            f"{path.name} is a JSON document, not JSON Lines. Write one complete JSON object per line "
            "(no enclosing list, no pretty-printing), e.g. with pandas: df.to_json(path, orient='records', lines=True)."
        )
    if looks_like_jsonl(sample):
        fmt = "jsonl"
        src_lang, tgt_lang = read_jsonl(lines, rows, src_lang, tgt_lang, language_hint)
    else:
        delimiter = detect_delimiter(path.name, head)
        fmt = "tsv" if delimiter == "\t" else "csv"
        src_lang, tgt_lang = read_delimited(text, delimiter, rows, src_lang, tgt_lang)
    return rows.finish(fmt + ("+gzip" if compressed else ""), src_lang, tgt_lang)


def _sniff(path: Path) -> str:
    """"parquet", "tmx", "tmx+gzip" or "text", from the first bytes (uploads get renamed, so not the extension)."""
    if not path.is_file():
        return "text"  # _read_text says what is wrong
    try:
        with open_maybe_gzip(path) as (content, compressed):
            head = content.read(512)
    except (OSError, EOFError, zlib.error):
        return "text"  # _read_text reports the corrupt gzip data
    if head.startswith(PARQUET_MAGIC) and not compressed:
        return "parquet"
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith((b"<?xml", b"<!DOCTYPE", b"<tmx")):  # XML: only TMX is read; anything else is told so
        return "tmx+gzip" if compressed else "tmx"
    return "text"


def _read_text(path: Path, max_bytes: int) -> tuple[str, bool]:
    """Decoded text of one file with \\n line ends, and whether it was gzip-compressed."""
    name = path.name
    if not path.is_file():
        raise DataError(f"{name}: no such file ({path}). Check the path, or upload the file again.")
    compressed = False
    try:
        with open_maybe_gzip(path) as (content, compressed):
            data = content.read(max_bytes + 1)  # one byte past the limit proves it is too big, without a gzip bomb
    except (OSError, EOFError, zlib.error) as error:
        if compressed:
            raise DataError(
                f"Cannot decompress {name}: the gzip data is corrupt or truncated ({error}). "
                "Compress the file again, or upload it uncompressed."
            ) from error
        raise DataError(f"Cannot read {name}: {error}. Check that the file exists and is readable.") from error

    after = " after decompression" if compressed else ""
    if len(data) > max_bytes:
        raise DataError(too_many_bytes(name, max_bytes, None if compressed else path.stat().st_size, after))
    _check_is_text(name, data, after)
    try:
        text = data.decode("utf-8-sig")  # -sig: drop the byte-order mark that Excel and Notepad write
    except UnicodeDecodeError as error:
        raise DataError(
            f"{name} line {_line_of(data, error.start)} is not valid UTF-8 (byte 0x{data[error.start]:02x}){after}; "
            "the file was probably saved in another encoding such as Windows-1252 or Latin-1. Re-save it as UTF-8 "
            "(Save As → Encoding: UTF-8) and upload it again."
        ) from error
    if not text or text.isspace():
        raise DataError(f"{name} is empty{after}. Upload a file with one sentence pair per line. {ACCEPTED_FORMATS}")
    return text.replace("\r\n", "\n").replace("\r", "\n"), compressed


def _check_is_text(name: str, data: bytes, after: str) -> None:
    """Refuse UTF-16 and binary files (spreadsheets, archives) with a message that says what to export instead."""
    if data[:2] in _UTF16_BOMS:
        raise DataError(f"{name} is saved as UTF-16 text. Re-save it as UTF-8 (Save As → Encoding: UTF-8) and upload "
                        "it again.")
    nul = data.find(b"\x00")
    sample = data[:_BINARY_SAMPLE_BYTES]
    if nul >= 0 or sum(sample.count(byte) for byte in _CONTROL_BYTES) > len(sample) // 100:
        where = f" (NUL byte on line {_line_of(data, nul)})" if nul >= 0 else ""
        raise DataError(
            f"{name} looks like a binary file{after}{where}, not text: perhaps a spreadsheet, archive or UTF-16 file. "
            f"Export it as UTF-8 text first. {ACCEPTED_FORMATS}"
        )


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _head(lines: list[str]) -> list[str]:
    """The lines up to the _DETECTION_SAMPLE_LINES-th non-blank one: a sample with true line numbers."""
    non_blank = 0
    for end, line in enumerate(lines, start=1):
        non_blank += bool(line.strip())
        if non_blank == _DETECTION_SAMPLE_LINES:
            return lines[:end]
    return lines


def _lines(text: str) -> list[str]:
    """Lines without the trailing blank ones (a final line break, or a few, is not a missing sentence)."""
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _load_aligned(
    path: Path, tgt_path: Path, src_lang: str | None, tgt_lang: str | None, rows: PairFilter, max_bytes: int
) -> ParallelData:
    src_text, src_compressed = _read_text(path, max_bytes)
    tgt_text, tgt_compressed = _read_text(tgt_path, max_bytes)
    src_lines, tgt_lines = _lines(src_text), _lines(tgt_text)
    if len(src_lines) != len(tgt_lines):
        raise DataError(
            f"{path.name} has {len(src_lines):,} lines but {tgt_path.name} has {len(tgt_lines):,}: aligned files need "
            "exactly one target line for each source line. Look for a sentence split over two lines or a missing line."
        )
    for line, (src, tgt) in enumerate(zip(src_lines, tgt_lines), start=1):
        rows.add(line, src, tgt)
    fmt = "aligned+gzip" if src_compressed or tgt_compressed else "aligned"
    return rows.finish(fmt, src_lang or language_from_file_name(path), tgt_lang or language_from_file_name(tgt_path))
