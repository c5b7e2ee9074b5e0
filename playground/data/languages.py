"""Language labels of parallel data: checking them, reading them from file names, and choosing the two to use.

One matcher serves every format: asking for "en" finds "en-GB" (and the other way round) in a TSV header,
a JSON Lines "translation" object, a TMX file or a Parquet file alike.
"""

from __future__ import annotations

import re
from pathlib import Path

from playground.errors import DataError

MAX_LANGUAGE_CHARS = 64  # what a package's config.json allows (playground.packages.schema)
LANG_CODE = re.compile(r"[a-z]{2,3}([-_][A-Za-z0-9]{2,4})?")  # "en", "deu", "pt-BR", "zh_Hans"
COLUMN_NAMES = {"src", "tgt", "source", "target", "input", "output"}  # header words that are not languages


def check_language(label: str, side: str = "language") -> str:
    """A language label a package can carry: at most 64 printable characters ("en", "pt-BR", "German"). Checked
    before training, since a package with a longer label would be refused when read back."""
    if not isinstance(label, str) or not label.strip() or len(label) > MAX_LANGUAGE_CHARS or not label.isprintable():
        shown = label[:40] + "…" if isinstance(label, str) and len(label) > 40 else label
        raise DataError(f"{side[0].upper()}{side[1:]} {shown!r} is not a usable language label: use 1 to "
                        f"{MAX_LANGUAGE_CHARS} printable characters, such as en, de or pt-BR.")
    return label


def language_from_file_name(path: Path) -> str | None:
    """The Moses/OPUS naming convention: "corpus.de-en.de" holds German."""
    suffix = path.name.removesuffix(".gz").rpartition(".")[2]
    return suffix if len(suffix) == 2 and suffix.isascii() and suffix.isalpha() and suffix.islower() else None


def _normal(code: str) -> str:
    return code.lower().replace("_", "-")


def same_language(code: str, wanted: str) -> bool:
    """Language tags match exactly (ignoring case and _/-) or by their primary subtag ("en-GB" is "en")."""
    a, b = _normal(code), _normal(wanted)
    return a == b or a.split("-")[0] == b.split("-")[0]


def find_language(codes: list[str], wanted: str) -> str | None:
    """The code among `codes` that best stands for `wanted`: the same tag first, then the same primary language."""
    exact = [c for c in codes if _normal(c) == _normal(wanted)]
    return (exact or [c for c in codes if same_language(c, wanted)] or [None])[0]


def choose_languages(
    available: list[str], src_lang: str | None, tgt_lang: str | None, where: str,
    hint: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """Source and target among the `available` language keys: as asked for (variants matched, so "en" finds
    "en-GB"), else the only two there are, else the hinted pair when it is there. `where` names the place in
    messages."""
    src = find_language(available, src_lang) or src_lang if src_lang else None
    tgt = find_language(available, tgt_lang) or tgt_lang if tgt_lang else None
    if hint:
        found = tuple(find_language(available, lang) for lang in hint)
        hint = found if None not in found and found[0] != found[1] else None
    return _pick(available, src, tgt, where, hint)


def _pick(available: list[str], src_lang: str | None, tgt_lang: str | None, where: str,
          hint: tuple[str, str] | None) -> tuple[str, str]:
    """choose_languages once the asked-for languages are spelled as in `available`."""
    listed = ", ".join(repr(lang) for lang in available)
    if src_lang is None and tgt_lang is None and hint and len(available) > 2:
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
            f"{where} has {len(available):,} language{'' if len(available) == 1 else 's'} ({listed}); "
            "choose the source and target language (src_lang, tgt_lang)."
        )
    first, second = available
    if src_lang is None and tgt_lang is None:
        return first, second
    given = src_lang or tgt_lang
    other = second if given == first else first
    return (given, other) if src_lang else (other, given)
