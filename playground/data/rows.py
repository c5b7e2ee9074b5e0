"""Rows as they are read, one at a time: cleaned, kept or counted as dropped by reason, then handed over as
ParallelData, what loading a file returns."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from playground.data.files import too_large
from playground.data.languages import check_language
from playground.data.packed import Pair
from playground.errors import DataError

DROP_REASONS = ("malformed", "empty side", "too long", "duplicate")
ACCEPTED_FORMATS = (
    "Accepted formats: a TSV or CSV file with two columns, source then target (an optional header row such as "
    "'en<TAB>de' names the languages); a JSON Lines file with one {\"src\": ..., \"tgt\": ...} or "
    "{\"translation\": {\"en\": ..., \"de\": ...}} object per line; or two aligned plain-text files with one "
    "sentence per line (then upload the target-language file as well); a TMX translation memory; or a Parquet "
    "file with a \"translation\" column or two text columns. Any of them but Parquet may be gzip-compressed."
)
CHARS_PER_TOKEN_LIMIT = 8  # scripts without spaces (Chinese, Thai) are one "token" per sentence, so cap characters too

_EXAMPLE_LINES = 3  # line numbers remembered per drop reason, to point users at them
_PLURAL_REASONS = {"duplicate": "duplicates"}


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
        text = f"{count(len(self.pairs), 'pair')} kept from {count(self.total_rows, 'row')} ({self.fmt}{languages})"
        reasons = [_describe_drops(reason, n, self.dropped_lines.get(reason, []))
                   for reason, n in self.dropped.items() if n]
        return f"{text}; dropped: {', '.join(reasons)}." if reasons else f"{text}; nothing dropped."


class PairFilter:
    """Cleans rows one at a time, keeps the usable pairs and counts the others by reason."""

    def __init__(self, name: str, max_words: int, dedupe: bool, max_rows: int) -> None:
        self.name = name
        self.max_words = max_words
        self.max_rows = max_rows
        self.seen: set[Pair] | None = set() if dedupe else None
        self.pairs: list[Pair] = []
        self.dropped = dict.fromkeys(DROP_REASONS, 0)
        self.dropped_lines: dict[str, list[int]] = {}
        self.total_rows = 0
        self.first_problem = ""

    def add(self, line: int, src: str, tgt: str) -> None:
        self._count_row()
        src, tgt = clean(src), clean(tgt)
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
                f"target of at most {self.max_words} words and {CHARS_PER_TOKEN_LIMIT * self.max_words} "
                "characters."
            )
        return data

    def check_row_count(self, rows: int) -> None:
        """Refuse a file that says up front it has more rows than the limit (Parquet's footer does)."""
        if rows > self.max_rows:
            raise DataError(too_large(self.name, count(rows, "row"), count(self.max_rows, "row"),
                                      "PLAYGROUND_MAX_DATA_ROWS"))

    def _count_row(self) -> None:
        self.total_rows += 1
        if self.total_rows > self.max_rows:
            raise DataError(too_large(self.name, f"more than {count(self.max_rows, 'row')}",
                                      count(self.max_rows, "row"), "PLAYGROUND_MAX_DATA_ROWS"))

    def _drop(self, reason: str, line: int) -> None:
        self.dropped[reason] += 1
        examples = self.dropped_lines.setdefault(reason, [])
        if len(examples) < _EXAMPLE_LINES:
            examples.append(line)

    def _too_long(self, text: str) -> bool:
        return len(text) > CHARS_PER_TOKEN_LIMIT * self.max_words or len(text.split()) > self.max_words


def clean(text: str) -> str:
    """NFC (one code point for "é", however it was typed) and single spaces, so equal sentences compare equal."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _describe_drops(reason: str, n: int, lines: list[int]) -> str:
    label = _PLURAL_REASONS.get(reason, reason) if n != 1 else reason
    where = f" (e.g. line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))})" if lines else ""
    return f"{n:,} {label}{where}"
