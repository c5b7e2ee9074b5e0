"""Reading TMX translation memories (what CAT tools and OPUS export), streamed one <tu> at a time.

The two languages are picked from the ``xml:lang`` of the ``<tuv>`` elements and inline markup is removed.
"""

from __future__ import annotations

from pathlib import Path

from playground.data.files import LimitedReader, open_maybe_gzip
from playground.data.languages import choose_languages, find_language
from playground.data.rows import PairFilter
from playground.errors import DataError

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_TMX_NATIVE_CODE = {"bpt", "ept", "ph", "it", "ut"}  # inline elements whose content is formatting codes, not text


def read_tmx(path: Path, rows: PairFilter, src_lang: str | None, tgt_lang: str | None,
             hint: tuple[str, str] | None, max_bytes: int) -> tuple[str, str]:
    """Add every <tu> of a TMX file (maybe gzipped) to `rows`; return the (source, target) languages chosen.

    The <tu> elements are streamed (each freed after use) with a parser that loads no DTD, resolves no entity and
    reads nothing from the network: entity-expansion bombs and external entities are inert."""
    from lxml import etree  # comes with sacrebleu

    chosen: tuple[str, str] | None = None
    with open_maybe_gzip(path) as (content, compressed):
        stream = LimitedReader(content, max_bytes, path.name, " after decompression" if compressed else "")
        parser = etree.iterparse(stream, events=("end",), tag=("tu", "{*}tu"), resolve_entities=False,
                                 load_dtd=False, no_network=True, huge_tree=False, remove_comments=True,
                                 remove_pis=True)
        try:
            for _, tu in parser:
                segments = _segments(tu)
                if chosen is None and len(segments) >= 2:
                    chosen = choose_languages(list(segments), src_lang, tgt_lang, path.name, hint)
                _add_unit(rows, tu.sourceline or 0, segments, chosen)
                tu.clear(keep_tail=True)
                while tu.getprevious() is not None:  # the processed <tu>s, or the tree would grow with the file
                    del tu.getparent()[0]
        except etree.XMLSyntaxError as error:
            raise DataError(f"{path.name} is not well-formed XML (line {error.lineno}: {error.msg}); a TMX file "
                            "must be valid XML. Export it again from your translation tool.") from error
    if chosen is None:
        raise DataError(f"{path.name} has no translation unit (<tu>) with two languages. A TMX file holds "
                        "<tu><tuv xml:lang=\"en\"><seg>…</seg></tuv><tuv xml:lang=\"de\"><seg>…</seg></tuv></tu>.")
    return chosen


def _segments(tu) -> dict[str, str]:
    """Language -> text of the <seg> of each <tuv> in a <tu> (the first one per language)."""
    segments: dict[str, str] = {}
    for tuv in tu:
        if not isinstance(tuv.tag, str) or tuv.tag.rpartition("}")[2] != "tuv":
            continue
        seg = next((c for c in tuv if isinstance(c.tag, str) and c.tag.rpartition("}")[2] == "seg"), None)
        lang = tuv.get(_XML_LANG) or tuv.get("lang")  # TMX 1.4 uses xml:lang, TMX 1.1 a plain lang attribute
        if lang and seg is not None:
            segments.setdefault(lang, _segment_text(seg))
    return segments


def _add_unit(rows: PairFilter, line: int, segments: dict[str, str], chosen: tuple[str, str] | None) -> None:
    if chosen is None:
        rows.add_malformed(line, "a <tu> without two <tuv> elements that have a language and a <seg>")
        return
    src = find_language(list(segments), chosen[0])
    tgt = find_language(list(segments), chosen[1])
    if src is None or tgt is None or src == tgt:
        rows.add_malformed(line, f"no {chosen[0]!r} and {chosen[1]!r} variants in this <tu>")
    else:
        rows.add(line, segments[src], segments[tgt])


def _segment_text(element) -> str:
    """The text of a <seg>, without inline markup: native codes (<bpt>, <ept>, <ph>, <it>, <ut>) are dropped whole,
    highlighting (<hi>) keeps its text; entities are never expanded (the parser leaves them unresolved)."""
    parts = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and child.tag.rpartition("}")[2] not in _TMX_NATIVE_CODE:
            parts.append(_segment_text(child))
        parts.append(child.tail or "")
    return "".join(parts)
