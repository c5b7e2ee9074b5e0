"""Read the parallel text that users upload: detect its format, validate it, count what is dropped.

Accepted layouts, detected from the content (not the file name); any of them may be gzip-compressed:

- TSV or CSV with two columns, source then target, and an optional header row ("en<TAB>de", "source,target").
  TSV lines are split on the tab as they are (MT corpora contain bare quotes); CSV (comma or semicolon)
  is parsed with the csv module, so quoted fields may hold delimiters, quotes and line breaks.
- JSON Lines: one {"src": ..., "tgt": ...} or {"translation": {"en": ..., "de": ...}} object per line.
- Two aligned plain-text files (``path`` and ``tgt_path``), one sentence per line.
- TMX (translation memory exchange, what CAT tools and OPUS export): the two languages are picked from the
  ``xml:lang`` of the ``<tuv>`` elements, inline markup is removed, and the file is streamed (never held twice).
- Parquet, as Hugging Face datasets store translation data: a ``translation`` struct column or two string
  columns, read one row group at a time (needs ``pyarrow``).

Every side is NFC-normalised and its whitespace collapsed to single spaces, so that duplicates are found and
tokenizers round-trip exactly. Rows that cannot be used are counted by reason in ``ParallelData.dropped``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import random
import re
import statistics
import unicodedata
import zlib
from collections import Counter
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path

from playground import limits
from playground.errors import DataError

Pair = tuple[str, str]

DROP_REASONS = ("malformed", "empty side", "too long", "duplicate")
ACCEPTED_FORMATS = (
    "Accepted formats: a TSV or CSV file with two columns, source then target (an optional header row such as "
    "'en<TAB>de' names the languages); a JSON Lines file with one {\"src\": ..., \"tgt\": ...} or "
    "{\"translation\": {\"en\": ..., \"de\": ...}} object per line; or two aligned plain-text files with one "
    "sentence per line (then upload the target-language file as well); a TMX translation memory; or a Parquet "
    "file with a \"translation\" column or two text columns. Any of them but Parquet may be gzip-compressed."
)
CHARS_PER_TOKEN_LIMIT = 8  # scripts without spaces (Chinese, Thai) are one "token" per sentence, so cap characters too

_GZIP_MAGIC = b"\x1f\x8b"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\v\f\r")
_BINARY_SAMPLE_BYTES = 64 * 1024
_DETECTION_SAMPLE_LINES = 200
_EXAMPLE_LINES = 3  # line numbers remembered per drop reason, to point users at them
_DELIMITER_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon"}  # in order of preference on ties
_LANG_CODE = re.compile(r"[a-z]{2,3}([-_][A-Za-z0-9]{2,4})?")  # "en", "deu", "pt-BR", "zh_Hans"
_COLUMN_NAMES = {"src", "tgt", "source", "target", "input", "output"}
_PLURAL_REASONS = {"duplicate": "duplicates"}
_PARQUET_MAGIC = b"PAR1"
_PARQUET_BATCH_ROWS = 1_000
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_TMX_NATIVE_CODE = {"bpt", "ept", "ph", "it", "ut"}  # inline elements whose content is formatting codes, not text


class PackedPairs(Sequence):
    """Sentence pairs packed as UTF-8 bytes with end offsets: a read-only sequence of (source, target) tuples that
    holds ~1 byte per character and 16 per pair, where a list of tuples of str holds ~200 bytes per pair more.
    What a web session keeps for as long as it lives; each pair is decoded when it is read."""

    def __init__(self, pairs: Iterable[Pair] = (), *, _sides: tuple | None = None):
        if _sides is None:
            src, tgt, src_ends, tgt_ends = bytearray(), bytearray(), array("Q"), array("Q")
            for source, target in pairs:
                src += source.encode()
                tgt += target.encode()
                src_ends.append(len(src))
                tgt_ends.append(len(tgt))
            _sides = ((src, src_ends), (tgt, tgt_ends))
        self._sides = _sides

    @property
    def nbytes(self) -> int:
        return sum(len(data) + ends.itemsize * len(ends) for data, ends in self._sides)

    def swapped(self) -> PackedPairs:
        """The same pairs as (target, source), sharing the bytes."""
        return PackedPairs(_sides=self._sides[::-1])

    def __len__(self) -> int:
        return len(self._sides[0][1])

    def _text(self, side: int, i: int) -> str:
        data, ends = self._sides[side]
        return data[ends[i - 1] if i else 0:ends[i]].decode()

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("pair index out of range")
        return self._text(0, i), self._text(1, i)


@dataclass
class ParallelData:
    """Sentence pairs read from an upload, with an account of every row that was not kept."""

    pairs: list[Pair]
    dropped: dict[str, int]  # reason -> count, every reason in DROP_REASONS present
    fmt: str  # "tsv", "csv", "jsonl", "aligned", "tmx" or "parquet", with a "+gzip" suffix when compressed
    src_lang: str | None
    tgt_lang: str | None
    total_rows: int
    dropped_lines: dict[str, list[int]] = field(default_factory=dict)  # reason -> first few 1-based line numbers

    def summary(self) -> str:
        """One paragraph for people: how many pairs were kept and why the others were dropped."""
        languages = f", {self.src_lang} → {self.tgt_lang}" if self.src_lang and self.tgt_lang else ""
        text = f"{_count(len(self.pairs), 'pair')} kept from {_count(self.total_rows, 'row')} ({self.fmt}{languages})"
        reasons = [_describe_drops(reason, count, self.dropped_lines.get(reason, []))
                   for reason, count in self.dropped.items() if count]
        return f"{text}; dropped: {', '.join(reasons)}." if reasons else f"{text}; nothing dropped."


def load_parallel(
    path: str | os.PathLike,
    tgt_path: str | os.PathLike | None = None,
    *,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    max_len: int = 256,
    dedupe: bool = True,
    max_bytes: int | None = None,
    max_rows: int | None = None,
    language_hint: tuple[str, str] | None = None,
) -> ParallelData:
    """Read sentence pairs from one TSV/CSV/JSONL/TMX/Parquet file, or from two aligned files (``path`` + ``tgt_path``).

    ``max_len`` is the longest side kept, in whitespace tokens (and ``CHARS_PER_TOKEN_LIMIT * max_len``
    characters). ``max_bytes`` (uncompressed, per file) and ``max_rows`` guard memory. ``language_hint`` (source,
    target) picks the pair of a multilingual file when no language is asked for and the file has more than two.
    Any problem with the input raises ``DataError`` saying what is wrong, where, and how to fix it.
    """
    max_bytes = max_bytes or limits.max_data_bytes()
    max_rows = max_rows or limits.max_data_rows()
    if max_len < 1:
        raise DataError(f"max_len must be at least 1 token, not {max_len}.")
    path = Path(path)
    rows = _PairFilter(path.name, max_len, dedupe, max_rows)
    if tgt_path is not None:
        return _load_aligned(path, Path(tgt_path), src_lang, tgt_lang, rows, max_bytes)
    kind = _sniff(path)
    if kind == "parquet":
        src_lang, tgt_lang = _read_parquet(path, rows, src_lang, tgt_lang, language_hint, max_bytes)
        return rows.finish("parquet", src_lang, tgt_lang)
    if kind in ("tmx", "tmx+gzip"):
        src_lang, tgt_lang = _read_tmx(path, rows, src_lang, tgt_lang, language_hint, max_bytes)
        return rows.finish(kind, src_lang, tgt_lang)

    text, compressed = _read_text(path, max_bytes)
    lines = text.split("\n")
    head = _head(lines)
    sample = [line for line in head if line.strip()]  # not empty: the text is not blank
    first = sample[0].strip()
    if first in ("{", "[") or (first.startswith("[") and _parses_as_json(text)):
        raise DataError(
            f"{path.name} is a JSON document, not JSON Lines. Write one complete JSON object per line "
            "(no enclosing list, no pretty-printing), e.g. with pandas: df.to_json(path, orient='records', lines=True)."
        )
    if _looks_like_jsonl(sample):
        fmt = "jsonl"
        src_lang, tgt_lang = _read_jsonl(lines, rows, src_lang, tgt_lang, language_hint)
    else:
        delimiter = _detect_delimiter(path.name, head)
        fmt = "tsv" if delimiter == "\t" else "csv"
        src_lang, tgt_lang = _read_delimited(text, delimiter, rows, src_lang, tgt_lang)
    return rows.finish(fmt + ("+gzip" if compressed else ""), src_lang, tgt_lang)


def split_pairs(
    pairs: Sequence[Pair], val_fraction: float = 0.05, seed: int = 0, max_val: int = 1000
) -> tuple[list[Pair], list[Pair]]:
    """Split into (train, validation), deterministic for a given seed; both keep the original order.

    The validation set gets ``val_fraction`` of the pairs, at most ``max_val`` and at least 1, and never all of them.
    """
    if len(pairs) < 2:
        raise DataError(f"Need at least 2 sentence pairs to split into training and validation data, got {len(pairs)}.")
    if not 0 <= val_fraction < 1:
        raise DataError(f"val_fraction must be at least 0 and below 1, not {val_fraction}.")
    n_val = min(max(1, round(len(pairs) * val_fraction)), max(1, max_val), len(pairs) - 1)
    val_indices = set(random.Random(seed).sample(range(len(pairs)), n_val))
    train = [pair for i, pair in enumerate(pairs) if i not in val_indices]
    val = [pair for i, pair in enumerate(pairs) if i in val_indices]
    return train, val


@dataclass
class SideStats:
    """Lengths (in whitespace tokens) and vocabulary of one side, source or target."""

    tokens: int  # total whitespace tokens
    mean_len: float
    median_len: float
    max_len: int
    p95_len: int  # 95th percentile, nearest rank
    lengths: list[int]  # one per pair, the data for a length histogram
    vocab_size: int  # distinct whitespace tokens
    chars: int


@dataclass
class PairStats:
    """Corpus statistics shown before training: how long the sentences are and how many words there are."""

    num_pairs: int
    src: SideStats
    tgt: SideStats

    def as_dict(self) -> dict:
        """Plain nested dict (JSON-serialisable)."""
        return asdict(self)


def pair_stats(pairs: Sequence[Pair]) -> PairStats:
    """Statistics of both sides; all zeros for no pairs."""
    return PairStats(len(pairs), _side_stats([src for src, _ in pairs]), _side_stats([tgt for _, tgt in pairs]))


def _side_stats(texts: list[str]) -> SideStats:
    vocabulary: set[str] = set()
    lengths = []
    for text in texts:
        words = text.split()
        vocabulary.update(words)
        lengths.append(len(words))
    if not lengths:
        return SideStats(0, 0.0, 0.0, 0, 0, [], 0, 0)
    ordered = sorted(lengths)
    return SideStats(
        tokens=sum(lengths),
        mean_len=sum(lengths) / len(lengths),
        median_len=float(statistics.median(ordered)),
        max_len=ordered[-1],
        p95_len=ordered[math.ceil(0.95 * len(ordered)) - 1],
        lengths=lengths,
        vocab_size=len(vocabulary),
        chars=sum(map(len, texts)),
    )


class _PairFilter:
    """Cleans rows one at a time, keeps the usable pairs and counts the others by reason."""

    def __init__(self, name: str, max_len: int, dedupe: bool, max_rows: int) -> None:
        self.name = name
        self.max_len = max_len
        self.max_rows = max_rows
        self.seen: set[Pair] | None = set() if dedupe else None
        self.pairs: list[Pair] = []
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.dropped_lines: dict[str, list[int]] = {}
        self.total_rows = 0
        self.first_problem = ""

    def add(self, line: int, src: str, tgt: str) -> None:
        self._count_row()
        src, tgt = _clean(src), _clean(tgt)
        if not src or not tgt:
            self._drop("empty side", line)
        elif self._too_long(src) or self._too_long(tgt):
            self._drop("too long", line)
        elif self.seen is not None and (src, tgt) in self.seen:
            self._drop("duplicate", line)
        else:
            if self.seen is not None:
                self.seen.add((src, tgt))
            self.pairs.append((src, tgt))

    def add_malformed(self, line: int, problem: str) -> None:
        self._count_row()
        self._drop("malformed", line)
        self.first_problem = self.first_problem or f"line {line}: {problem}"

    def finish(self, fmt: str, src_lang: str | None, tgt_lang: str | None) -> ParallelData:
        for label, side in ((src_lang, "source language"), (tgt_lang, "target language")):
            if label is not None:
                check_language(label, f"the {side} of {self.name}")
        data = ParallelData(self.pairs, self.dropped, fmt, src_lang, tgt_lang, self.total_rows, self.dropped_lines)
        malformed = self.dropped["malformed"]
        if malformed * 2 > self.total_rows:  # a few broken rows are dropped; mostly broken means a wrong format
            raise DataError(
                f"{self.name}: {malformed:,} of {self.total_rows:,} rows are malformed, so it is not a usable "
                f"{fmt.split('+')[0].upper()} file (first problem at {self.first_problem}). {ACCEPTED_FORMATS}"
            )
        if not self.pairs:
            raise DataError(
                f"No usable sentence pairs in {self.name}: {data.summary()} Every pair needs a non-empty source and "
                f"target of at most {self.max_len} words (max_len) and {CHARS_PER_TOKEN_LIMIT * self.max_len} characters."
            )
        return data

    def _count_row(self) -> None:
        self.total_rows += 1
        if self.total_rows > self.max_rows:
            raise DataError(
                f"{self.name} has more than {_count(self.max_rows, 'row')}, the limit. Upload a smaller sample of "
                "the corpus (the operator can raise the limit with PLAYGROUND_MAX_DATA_ROWS)."
            )

    def _drop(self, reason: str, line: int) -> None:
        self.dropped[reason] += 1
        examples = self.dropped_lines.setdefault(reason, [])
        if len(examples) < _EXAMPLE_LINES:
            examples.append(line)

    def _too_long(self, text: str) -> bool:
        return len(text) > CHARS_PER_TOKEN_LIMIT * self.max_len or len(text.split()) > self.max_len


def _clean(text: str) -> str:
    """NFC (one code point for "é", however it was typed) and single spaces, so equal sentences compare equal."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _describe_drops(reason: str, count: int, lines: list[int]) -> str:
    label = _PLURAL_REASONS.get(reason, reason) if count != 1 else reason
    where = f" (e.g. line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})" if lines else ""
    return f"{count:,} {label}{where}"


def _read_text(path: Path, max_bytes: int) -> tuple[str, bool]:
    """Decoded text of one file with \\n line ends, and whether it was gzip-compressed."""
    name = path.name
    if not path.is_file():
        raise DataError(f"{name}: no such file ({path}). Check the path, or upload the file again.")
    compressed = False
    try:
        with path.open("rb") as file:
            compressed = file.read(2) == _GZIP_MAGIC  # magic bytes, not the extension: uploads get renamed
            file.seek(0)
            stream = gzip.GzipFile(fileobj=file) if compressed else file
            data = stream.read(max_bytes + 1)  # one byte past the limit proves it is too big, without a gzip bomb
    except (OSError, EOFError, zlib.error) as error:
        if compressed:
            raise DataError(
                f"Cannot decompress {name}: the gzip data is corrupt or truncated ({error}). "
                "Compress the file again, or upload it uncompressed."
            ) from error
        raise DataError(f"Cannot read {name}: {error}. Check that the file exists and is readable.") from error

    after = " after decompression" if compressed else ""
    if len(data) > max_bytes:
        raise DataError(
            f"{name} is larger than the limit of {_format_bytes(max_bytes)}{after}. Upload a smaller sample of the "
            "corpus (the operator can raise the limit with PLAYGROUND_MAX_DATA_MB)."
        )
    if data[:2] in _UTF16_BOMS:
        raise DataError(f"{name} is saved as UTF-16 text. Re-save it as UTF-8 (Save As → Encoding: UTF-8) and upload it again.")
    nul = data.find(b"\x00")
    sample = data[:_BINARY_SAMPLE_BYTES]
    if nul >= 0 or sum(sample.count(byte) for byte in _CONTROL_BYTES) > len(sample) // 100:
        where = f" (NUL byte on line {_line_of(data, nul)})" if nul >= 0 else ""
        raise DataError(
            f"{name} looks like a binary file{after}{where}, not text: perhaps a spreadsheet, archive or UTF-16 file. "
            f"Export it as UTF-8 text first. {ACCEPTED_FORMATS}"
        )
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


def _format_bytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB" if size >= 2**20 else f"{size:,} bytes"


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


def _looks_like_jsonl(sample: list[str]) -> bool:
    """Most lines are {...}; a line that parses (or most ending in "}") tells JSON from CSV like "{n} items,{n} Stück"."""
    objects = [line.strip() for line in sample if line.strip().startswith("{")]
    if len(objects) * 2 <= len(sample):
        return False
    return sum(line.endswith("}") for line in objects) * 2 > len(objects) or any(map(_parses_as_json, objects))


def _parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _lines(text: str) -> list[str]:
    """Lines without the trailing blank ones (a final line break, or a few, is not a missing sentence)."""
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _load_aligned(
    path: Path, tgt_path: Path, src_lang: str | None, tgt_lang: str | None, rows: _PairFilter, max_bytes: int
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
    return rows.finish(fmt, src_lang or _lang_from_name(path), tgt_lang or _lang_from_name(tgt_path))


MAX_LANGUAGE_CHARS = 64  # what a package's config.json allows (playground.packages.schema)


def check_language(label: str, side: str = "language") -> str:
    """A language label a package can carry: at most 64 printable characters ("en", "pt-BR", "German"). Checked
    before training, since a package with a longer label would be refused when read back."""
    if not isinstance(label, str) or not label.strip() or len(label) > MAX_LANGUAGE_CHARS or not label.isprintable():
        shown = label[:40] + "…" if isinstance(label, str) and len(label) > 40 else label
        raise DataError(f"{side[0].upper()}{side[1:]} {shown!r} is not a usable language label: use 1 to "
                        f"{MAX_LANGUAGE_CHARS} printable characters, such as en, de or pt-BR.")
    return label


def _lang_from_name(path: Path) -> str | None:
    """The Moses/OPUS naming convention: "corpus.de-en.de" holds German."""
    suffix = path.name.removesuffix(".gz").rpartition(".")[2]
    return suffix if len(suffix) == 2 and suffix.isascii() and suffix.isalpha() and suffix.islower() else None


def _detect_delimiter(name: str, head: list[str]) -> str:
    """The delimiter that splits most head lines into the same number (>= 2) of columns; that number must be 2."""
    sample = [line for line in head if line.strip()]
    head_text = "\n".join(head)
    best: tuple[int, int, str] | None = None  # (lines, columns, delimiter)
    for delimiter in _DELIMITER_NAMES:
        widths = Counter(len(fields) for _, fields in _records(head_text, delimiter, name))
        if not widths:
            continue
        columns, lines = widths.most_common(1)[0]
        if columns >= 2 and (best is None or lines > best[0]):
            best = (lines, columns, delimiter)
    if best is None or best[0] * 2 < len(sample):
        raise DataError(
            f"{name} is not a two-column file: its first line ({sample[0][:60]!r}) has no tab, comma or semicolon "
            f"separating source and target. {ACCEPTED_FORMATS}"
        )
    _, columns, delimiter = best
    if columns != 2:
        raise DataError(
            f"{name} has {columns} {_DELIMITER_NAMES[delimiter]}-separated columns, but exactly 2 are needed: "
            "source then target. Remove the other columns and upload it again."
        )
    return delimiter


def _records(text: str, delimiter: str, name: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, fields) of each non-blank row; trailing empty fields (a trailing delimiter) are ignored."""
    if delimiter == "\t":
        numbered = ((line, text_line.split("\t")) for line, text_line in enumerate(text.split("\n"), start=1))
    else:
        numbered = _csv_records(text, delimiter, name)
    for line, fields in numbered:
        while len(fields) > 2 and not fields[-1].strip():
            fields.pop()
        if any(value.strip() for value in fields) or len(fields) > 1:
            yield line, fields


def _csv_records(text: str, delimiter: str, name: str) -> Iterator[tuple[int, list[str]]]:
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    line = 1
    try:
        for fields in reader:
            yield line, fields
            line = reader.line_num + 1  # a quoted field may span lines
    except csv.Error as error:
        raise DataError(
            f"Cannot parse {name} as CSV at line {line}: {error}. This usually means a quote (\") that is never closed; "
            "quote fields as \"like this\" and double quotes inside them (\"\")."
        ) from error


def _read_delimited(
    text: str, delimiter: str, rows: _PairFilter, src_lang: str | None, tgt_lang: str | None
) -> tuple[str | None, str | None]:
    records = _records(text, delimiter, rows.name)
    src_column, tgt_column = 0, 1
    first = next(records, None)
    header = _header_kind(first[1]) if first else None
    if header == "languages":  # "en<TAB>de": pick the columns by language
        names = [value.strip() for value in first[1]]
        src_lang, tgt_lang = _choose_languages(names, src_lang, tgt_lang, f"The header of {rows.name}")
        src_column, tgt_column = names.index(src_lang), names.index(tgt_lang)
    elif header is None and first:
        records = chain([first], records)
    for line, fields in records:
        if len(fields) == 2:
            rows.add(line, fields[src_column], fields[tgt_column])
        else:
            rows.add_malformed(line, f"{len(fields)} columns instead of 2")
    return src_lang, tgt_lang


def _header_kind(fields: list[str]) -> str | None:
    """"names" for a header like "source,target", "languages" for one like "en<TAB>de", None for a data row."""
    names = [value.strip() for value in fields]
    if len(names) != 2 or names[0] == names[1]:
        return None
    if all(name.lower() in _COLUMN_NAMES for name in names):  # before languages: "src" looks like a language code
        return "names"
    if all(_LANG_CODE.fullmatch(name) for name in names):
        return "languages"
    return None


def _choose_languages(
    available: list[str], src_lang: str | None, tgt_lang: str | None, where: str,
    hint: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """Source and target among the available language keys, as asked for, else the only two there are (else the
    hinted pair, when it is there)."""
    listed = ", ".join(repr(lang) for lang in available)
    if src_lang is None and tgt_lang is None and hint and len(available) > 2 and set(hint) <= set(available):
        src_lang, tgt_lang = hint
    for lang in (src_lang, tgt_lang):
        if lang is not None and lang not in available:
            raise DataError(f"{where} has no language {lang!r}; available: {listed}. Choose the languages from those.")
    if src_lang is not None and src_lang == tgt_lang:
        raise DataError(f"Source and target language are both {src_lang!r}; choose two different ones from {listed}.")
    if src_lang is not None and tgt_lang is not None:
        return src_lang, tgt_lang
    if len(available) != 2:
        raise DataError(
            f"{where} has {_count(len(available), 'language')} ({listed}); "
            "choose the source and target language (src_lang, tgt_lang)."
        )
    first, second = available
    if src_lang is None and tgt_lang is None:
        return first, second
    given = src_lang or tgt_lang
    other = second if given == first else first
    return (given, other) if src_lang else (other, given)


def _read_jsonl(
    lines: list[str], rows: _PairFilter, src_lang: str | None, tgt_lang: str | None, hint: tuple[str, str] | None
) -> tuple[str | None, str | None]:
    parsed: list[tuple[int, object, str]] = []  # (line, object or None, why not)
    for line, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            parsed.append((line, json.loads(text), ""))
        except json.JSONDecodeError as error:
            parsed.append((line, None, f"not valid JSON ({error.msg}, column {error.colno})"))
        except (ValueError, RecursionError):  # a huge number, or nesting deeper than Python's recursion limit
            parsed.append((line, None, "not valid JSON"))
    layout = next((obj for _, obj, _ in parsed if _is_translation(obj) or _is_src_tgt(obj)), None)
    if layout is None:
        example = next(((line, obj) for line, obj, _ in parsed if isinstance(obj, dict)), None)
        if example is not None:
            line, obj = example
            keys = f"the keys {', '.join(map(repr, obj))}" if obj else "an empty object"
            raise DataError(
                f"{rows.name} line {line} has {keys}, but no line has \"src\" and \"tgt\" or a "
                f"\"translation\" object. {ACCEPTED_FORMATS}"
            )
        src_key, tgt_key, container = "src", "tgt", None  # every line is broken: finish() will say so
    elif _is_translation(layout):
        where = f"The \"translation\" objects in {rows.name}"
        src_key, tgt_key = _choose_languages(list(layout["translation"]), src_lang, tgt_lang, where, hint)
        src_lang, tgt_lang, container = src_key, tgt_key, "translation"
    else:
        src_key, tgt_key, container = "src", "tgt", None
    for line, obj, problem in parsed:
        values = obj.get(container) if container and isinstance(obj, dict) else obj
        if problem:
            rows.add_malformed(line, problem)
        elif not isinstance(values, dict) or src_key not in values or tgt_key not in values:
            where = f"a \"{container}\" object with " if container else "an object with "
            rows.add_malformed(line, f"not {where}{src_key!r} and {tgt_key!r}")
        elif not all(isinstance(values[key], str) or values[key] is None for key in (src_key, tgt_key)):
            rows.add_malformed(line, f"{src_key!r} and {tgt_key!r} must be strings")
        else:
            rows.add(line, values[src_key] or "", values[tgt_key] or "")
    return src_lang, tgt_lang


def _is_translation(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("translation"), dict) and bool(obj["translation"])


def _is_src_tgt(obj: object) -> bool:
    return isinstance(obj, dict) and "src" in obj and "tgt" in obj


# ----------------------------------------------------------------------------------------------------------
# TMX and Parquet: read as streams, never whole


def _sniff(path: Path) -> str:
    """"parquet", "tmx", "tmx+gzip" or "text", from the first bytes (uploads get renamed, so not the extension)."""
    if not path.is_file():
        return "text"  # _read_text says what is wrong
    with path.open("rb") as file:
        head = file.read(512)
        compressed = head[:2] == _GZIP_MAGIC
        if compressed:
            file.seek(0)
            try:
                head = gzip.GzipFile(fileobj=file).read(512)
            except (OSError, EOFError, zlib.error):
                return "text"  # _read_text reports the corrupt gzip data
    if head.startswith(_PARQUET_MAGIC) and not compressed:
        return "parquet"
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if start.startswith((b"<?xml", b"<!DOCTYPE", b"<tmx")):  # XML: only TMX is read; anything else is told so
        return "tmx+gzip" if compressed else "tmx"
    return "text"


class _LimitedReader(io.RawIOBase):
    """A binary stream that refuses to yield more than `limit` bytes: a size check for streamed (decompressed) input."""

    def __init__(self, stream, limit: int, name: str, after: str) -> None:
        self.stream, self.limit, self.name, self.after, self.read_so_far = stream, limit, name, after, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        self.read_so_far += len(data)
        if self.read_so_far > self.limit:
            raise DataError(f"{self.name} is larger than the limit of {_format_bytes(self.limit)}{self.after} "
                            ". Upload a smaller sample of the corpus (the operator can raise the limit with "
                            "PLAYGROUND_MAX_DATA_MB).")
        buffer[: len(data)] = data
        return len(data)


def _same_language(code: str, wanted: str) -> bool:
    """Language tags match exactly (ignoring case and _/-) or by their primary subtag ("en-GB" is "en")."""
    a, b = code.lower().replace("_", "-"), wanted.lower().replace("_", "-")
    return a == b or a.split("-")[0] == b.split("-")[0]


def _find_language(codes: list[str], wanted: str) -> str | None:
    """The code among `codes` that best stands for `wanted`: the same tag first, then the same primary language."""
    exact = [c for c in codes if c.lower().replace("_", "-") == wanted.lower().replace("_", "-")]
    return (exact or [c for c in codes if _same_language(c, wanted)] or [None])[0]


def _resolve_languages(available: list[str], src_lang: str | None, tgt_lang: str | None, where: str,
                       hint: tuple[str, str] | None) -> tuple[str, str]:
    """_choose_languages with language variants matched: asking for "en" finds "en-GB" and the other way round."""
    src = _find_language(available, src_lang) or src_lang if src_lang else None
    tgt = _find_language(available, tgt_lang) or tgt_lang if tgt_lang else None
    if hint:
        found = tuple(_find_language(available, lang) for lang in hint)
        hint = found if None not in found and found[0] != found[1] else None
    return _choose_languages(available, src, tgt, where, hint)


def _tuv_language(tuv) -> str | None:
    return tuv.get(_XML_LANG) or tuv.get("lang")  # TMX 1.4 uses xml:lang, TMX 1.1 a plain lang attribute


def _segment_text(element) -> str:
    """The text of a <seg>, without inline markup: native codes (<bpt>, <ept>, <ph>, <it>, <ut>) are dropped whole,
    highlighting (<hi>) keeps its text; entities are never expanded (the parser leaves them unresolved)."""
    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and child.tag.rpartition("}")[2] not in _TMX_NATIVE_CODE:
            parts.append(_segment_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _read_tmx(path: Path, rows: _PairFilter, src_lang: str | None, tgt_lang: str | None,
              hint: tuple[str, str] | None, max_bytes: int) -> tuple[str, str]:
    """Stream the <tu> elements (each freed after use) with a parser that loads no DTD, resolves no entity and
    reads nothing from the network: entity-expansion bombs and external entities are inert."""
    from lxml import etree  # comes with sacrebleu

    chosen: tuple[str, str] | None = None
    with path.open("rb") as raw:
        compressed = raw.read(2) == _GZIP_MAGIC
        raw.seek(0)
        stream = _LimitedReader(gzip.GzipFile(fileobj=raw) if compressed else raw, max_bytes, path.name,
                                " after decompression" if compressed else "")
        parser = etree.iterparse(stream, events=("end",), tag=("tu", "{*}tu"), resolve_entities=False,
                                 load_dtd=False, no_network=True, huge_tree=False, remove_comments=True,
                                 remove_pis=True)
        try:
            for _, tu in parser:
                segments: dict[str, str] = {}
                for tuv in tu:
                    if not isinstance(tuv.tag, str) or tuv.tag.rpartition("}")[2] != "tuv":
                        continue
                    seg = next((c for c in tuv if isinstance(c.tag, str) and c.tag.rpartition("}")[2] == "seg"), None)
                    lang = _tuv_language(tuv)
                    if lang and seg is not None:
                        segments.setdefault(lang, _segment_text(seg))
                if chosen is None and len(segments) >= 2:
                    chosen = _resolve_languages(list(segments), src_lang, tgt_lang, path.name, hint)
                line = tu.sourceline or 0
                if chosen is None:
                    rows.add_malformed(line, "a <tu> without two <tuv> elements that have a language and a <seg>")
                else:
                    src = _find_language(list(segments), chosen[0])
                    tgt = _find_language(list(segments), chosen[1])
                    if src is None or tgt is None or src == tgt:
                        rows.add_malformed(line, f"no {chosen[0]!r} and {chosen[1]!r} variants in this <tu>")
                    else:
                        rows.add(line, segments[src], segments[tgt])
                tu.clear(keep_tail=True)
                while tu.getprevious() is not None:  # the processed <tu>s, or the tree would grow with the file
                    del tu.getparent()[0]
        except etree.XMLSyntaxError as error:
            raise DataError(f"{path.name} is not well-formed XML (line {error.lineno}: {error.msg}); a TMX file must be "
                            "valid XML. Export it again from your translation tool.") from error
    if chosen is None:
        raise DataError(f"{path.name} has no translation unit (<tu>) with two languages. A TMX file holds "
                        "<tu><tuv xml:lang=\"en\"><seg>…</seg></tuv><tuv xml:lang=\"de\"><seg>…</seg></tuv></tu>.")
    return chosen


def _read_parquet(path: Path, rows: _PairFilter, src_lang: str | None, tgt_lang: str | None,
                  hint: tuple[str, str] | None, max_bytes: int) -> tuple[str | None, str | None]:
    """Hugging Face's layout ({"translation": {"en": …, "de": …}}) or two string columns, one row group at a time;
    sizes are checked from the file's footer before any row is read."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        raise DataError("Reading Parquet files needs the pyarrow package, which this server does not have: "
                        "`pip install pyarrow`, or convert the file to JSON Lines first.") from error
    try:
        parquet = pq.ParquetFile(path)
        meta = parquet.metadata
        if meta.num_row_groups > limits.max_parquet_row_groups():  # each is read on its own: 50,000 took 16 s of CPU
            raise DataError(f"{path.name} is cut into {meta.num_row_groups:,} row groups; this server reads at most "
                            f"{limits.max_parquet_row_groups():,} (the operator sets PLAYGROUND_MAX_PARQUET_ROW_GROUPS). "
                            "Write it again with larger row groups (pandas' to_parquet and datasets do by default).")
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if size > max_bytes:
            raise DataError(f"{path.name} holds {_format_bytes(size)} of data uncompressed, more than the limit of "
                            f"{_format_bytes(max_bytes)}. Upload a smaller sample (the operator can raise the "
                            "limit with PLAYGROUND_MAX_DATA_MB).")
        if meta.num_rows > rows.max_rows:
            raise DataError(f"{path.name} has {meta.num_rows:,} rows, more than the limit of {rows.max_rows:,} rows "
                            "(PLAYGROUND_MAX_DATA_ROWS). Upload a smaller sample of the corpus.")
        schema = parquet.schema_arrow
        columns, src_lang, tgt_lang = _parquet_columns(schema, pa, path.name, src_lang, tgt_lang, hint)
        struct = columns[0] == "translation"
        # dictionary-encoded columns stay encoded (a few bytes per row however long the repeated value): the footer
        # counts a dictionary value once, so the text a batch decodes to is measured, and capped, before decoding
        text = [f"translation.{src_lang}", f"translation.{tgt_lang}"] if struct else list(columns)
        parquet = pq.ParquetFile(path, read_dictionary=text)
        row, decoded = 0, 0
        batches = (batch for group in range(meta.num_row_groups)  # one row group at a time: one dictionary each
                   for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=[group],
                                                     columns=[columns[0]] if struct else text))
        for batch in batches:
            sides = ([batch.column(0).field(src_lang), batch.column(0).field(tgt_lang)] if struct
                     else [batch.column(0), batch.column(1)])
            decoded += sum(_decoded_bytes(side, pa) for side in sides)
            if decoded > max_bytes:
                raise DataError(f"{path.name} holds more than {_format_bytes(max_bytes)} of text once decoded (the "
                                f"limit; rows 1 to {row + batch.num_rows:,} already exceed it). Upload a smaller "
                                "sample (the operator can raise the limit with PLAYGROUND_MAX_DATA_MB).")
            for src, tgt in zip(sides[0].to_pylist(), sides[1].to_pylist()):
                row += 1
                rows.add(row, src or "", tgt or "")
    except (pa.ArrowException, OSError) as error:
        raise DataError(f"Cannot read {path.name} as Parquet: {error}. Write it again (e.g. with pandas' "
                        "to_parquet or datasets' to_parquet), or convert it to JSON Lines.") from error
    return src_lang, tgt_lang


def _decoded_bytes(column, pa) -> int:
    """The bytes of text a string column decodes to, from its offsets (a dictionary column: each row's value's length)
    without decoding it."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        lengths = pc.take(pc.binary_length(column.dictionary), column.indices)
    else:
        lengths = pc.binary_length(column)
    return int(pc.sum(lengths).as_py() or 0)


def _parquet_columns(schema, pa, name: str, src_lang: str | None, tgt_lang: str | None,
                     hint: tuple[str, str] | None) -> tuple[tuple[str, ...], str | None, str | None]:
    """(the columns to read, source language, target language): a "translation" struct of text fields, text columns
    named by language ("en", "de", …), or the only two text columns there are (source first, or named src/tgt)."""
    def is_text(data_type) -> bool:  # a dictionary of strings too (pandas' category columns write one)
        if pa.types.is_dictionary(data_type):
            data_type = data_type.value_type
        return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)

    if "translation" in schema.names:
        struct = schema.field("translation").type
        languages = [f.name for f in struct] if pa.types.is_struct(struct) and all(is_text(f.type) for f in struct) else []
        if len(languages) < 2:
            raise DataError(f"The \"translation\" column of {name} must hold text fields named by language "
                            "({\"en\": …, \"de\": …}), as Hugging Face datasets write it.")
        src, tgt = _resolve_languages(languages, src_lang, tgt_lang, f"The \"translation\" column of {name}", hint)
        return ("translation",), src, tgt
    text_columns = [f.name for f in schema if is_text(f.type)]
    by_language = [c for c in text_columns if _LANG_CODE.fullmatch(c) and c.lower() not in _COLUMN_NAMES]
    if len(by_language) >= 2:
        src, tgt = _resolve_languages(by_language, src_lang, tgt_lang, name, hint)
        return (src, tgt), src, tgt
    if len(text_columns) == 2:
        named = {c.lower(): c for c in text_columns}
        for src_name, tgt_name in (("src", "tgt"), ("source", "target"), ("input", "output")):
            if src_name in named and tgt_name in named:
                return (named[src_name], named[tgt_name]), src_lang, tgt_lang
        return tuple(text_columns), src_lang, tgt_lang
    listed = ", ".join(f"{f.name} ({f.type})" for f in schema) or "none"
    raise DataError(f"{name} has no \"translation\" column and not exactly two text columns (it has: {listed}). "
                    "Keep the source and target text columns only, or name them by language (\"en\", \"de\").")
