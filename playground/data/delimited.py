"""Reading two-column TSV and CSV: finding the delimiter, an optional header row, and the rows themselves.

TSV lines are split on the tab as they are (MT corpora contain bare quotes); CSV (comma or semicolon) is parsed
with the csv module, so quoted fields may hold delimiters, quotes and line breaks.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator
from itertools import chain

from playground.data.languages import COLUMN_NAMES, LANG_CODE, choose_languages
from playground.data.rows import ACCEPTED_FORMATS, PairFilter
from playground.errors import DataError

DELIMITER_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon"}  # in order of preference on ties


def detect_delimiter(name: str, head: list[str]) -> str:
    """The delimiter that splits most head lines into the same number (>= 2) of columns; that number must be 2."""
    sample = [line for line in head if line.strip()]
    head_text = "\n".join(head)
    best: tuple[int, int, str] | None = None  # (lines, columns, delimiter)
    for delimiter in DELIMITER_NAMES:
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
            f"{name} has {columns} {DELIMITER_NAMES[delimiter]}-separated columns, but exactly 2 are needed: "
            "source then target. Remove the other columns and upload it again."
        )
    return delimiter


def read_delimited(
    text: str, delimiter: str, rows: PairFilter, src_lang: str | None, tgt_lang: str | None
) -> tuple[str | None, str | None]:
    """Add every row to `rows`; return the (source, target) languages, which a header like "en<TAB>de" names."""
    records = _records(text, delimiter, rows.name)
    src_column, tgt_column = 0, 1
    first = next(records, None)
    header = _header_kind(first[1]) if first else None
    if header == "languages":  # "en<TAB>de": pick the columns by language
        names = [value.strip() for value in first[1]]
        src_lang, tgt_lang = choose_languages(names, src_lang, tgt_lang, f"The header of {rows.name}")
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
    if all(name.lower() in COLUMN_NAMES for name in names):  # before languages: "src" looks like a language code
        return "names"
    if all(LANG_CODE.fullmatch(name) for name in names):
        return "languages"
    return None


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
            f"Cannot parse {name} as CSV at line {line}: {error}. This usually means a quote (\") that is never "
            "closed; "
            "quote fields as \"like this\" and double quotes inside them (\"\")."
        ) from error
