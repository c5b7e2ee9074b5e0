"""Reading JSON Lines: one {"src": ..., "tgt": ...} or {"translation": {"en": ..., "de": ...}} object per line."""

from __future__ import annotations

import json

from playground.data.languages import choose_languages
from playground.data.rows import ACCEPTED_FORMATS, PairFilter
from playground.errors import DataError


def looks_like_jsonl(sample: list[str]) -> bool:
    """Most lines are {...}; a line that parses (or most ending in "}") tells JSON from CSV like
    "{n} items,{n} Stück"."""
    objects = [line.strip() for line in sample if line.strip().startswith("{")]
    if len(objects) * 2 <= len(sample):
        return False
    return sum(line.endswith("}") for line in objects) * 2 > len(objects) or any(map(parses_as_json, objects))


def parses_as_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def read_jsonl(
    lines: list[str], rows: PairFilter, src_lang: str | None, tgt_lang: str | None, hint: tuple[str, str] | None
) -> tuple[str | None, str | None]:
    """Add every line to `rows`; return the (source, target) languages, which "translation" objects name."""
    parsed = _parse(lines)
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
        src_key, tgt_key = choose_languages(list(layout["translation"]), src_lang, tgt_lang, where, hint)
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


def _parse(lines: list[str]) -> list[tuple[int, object, str]]:
    """(line, object or None, why not) of each non-blank line."""
    parsed: list[tuple[int, object, str]] = []
    for line, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            parsed.append((line, json.loads(text), ""))
        except json.JSONDecodeError as error:
            parsed.append((line, None, f"not valid JSON ({error.msg}, column {error.colno})"))
        except (ValueError, RecursionError):  # a huge number, or nesting deeper than Python's recursion limit
            parsed.append((line, None, "not valid JSON"))
    return parsed


def _is_translation(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("translation"), dict) and bool(obj["translation"])


def _is_src_tgt(obj: object) -> bool:
    return isinstance(obj, dict) and "src" in obj and "tgt" in obj
