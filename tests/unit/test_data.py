"""Tests for playground.data.load: format detection, validation messages, drop counts, splitting and statistics."""

from __future__ import annotations

import gzip
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.data.load import load_parallel
from playground.data.rows import DROP_REASONS, ParallelData
from playground.data.stats import pair_stats, split_pairs
from playground.errors import DataError

PAIRS = [("Hello, world!", "Hallo, Welt!"), ("Good morning.", "Guten Morgen."), ("Thank you", "Danke schön")]


def write(tmp_path, name, content, compress=False):
    """Write str (UTF-8) or bytes; gzip them when asked."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def tsv(pairs):
    return "".join(f"{src}\t{tgt}\n" for src, tgt in pairs)


def jsonl(records):
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def error_message(path, **kwargs):
    with pytest.raises(DataError) as error:
        load_parallel(path, **kwargs)
    return str(error.value)


# ---- formats, each also gzip-compressed -------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_tsv_without_header(tmp_path, compress):
    data = load_parallel(write(tmp_path, "data.txt", tsv(PAIRS), compress))
    assert data.pairs == PAIRS
    assert data.fmt == ("tsv+gzip" if compress else "tsv")
    assert (data.src_lang, data.tgt_lang, data.total_rows) == (None, None, 3)
    assert data.dropped == dict.fromkeys(DROP_REASONS, 0)


@pytest.mark.parametrize("compress", [False, True])
def test_tsv_language_header(tmp_path, compress):
    data = load_parallel(write(tmp_path, "data.tsv", "en\tde\n" + tsv(PAIRS), compress))
    assert data.pairs == PAIRS
    assert (data.src_lang, data.tgt_lang, data.total_rows) == ("en", "de", 3)


def test_language_header_picks_columns_by_language(tmp_path):
    data = load_parallel(write(tmp_path, "data.tsv", "en\tde\n" + tsv(PAIRS)), src_lang="de")
    assert (data.src_lang, data.tgt_lang) == ("de", "en")
    assert data.pairs[0] == ("Hallo, Welt!", "Hello, world!")
    assert "no language 'fr'" in error_message(write(tmp_path, "d2.tsv", "en\tde\n" + tsv(PAIRS)), tgt_lang="fr")


def test_generic_header_is_skipped_and_keeps_given_languages(tmp_path):
    data = load_parallel(write(tmp_path, "data.csv", 'source,target\n"a, b",c\nyes,ja\n'), src_lang="en", tgt_lang="de")
    assert data.pairs == [("a, b", "c"), ("yes", "ja")]
    assert (data.src_lang, data.tgt_lang, data.total_rows) == ("en", "de", 2)


@pytest.mark.parametrize("compress", [False, True])
def test_csv_with_quotes_and_multiline_field(tmp_path, compress):
    content = ('src,tgt\r\n"Hello, world!","Hallo, Welt!"\r\n"He said ""hi"".",Er sagte „hi“.\r\n'
               '"two\nlines",zwei Zeilen\r\n')
    data = load_parallel(write(tmp_path, "data.csv", content, compress))
    assert data.fmt == ("csv+gzip" if compress else "csv")
    assert data.pairs == [("Hello, world!", "Hallo, Welt!"), ('He said "hi".', "Er sagte „hi“."),
                          ("two lines", "zwei Zeilen")]


def test_semicolon_csv_and_utf8_bom(tmp_path):
    data = load_parallel(write(tmp_path, "excel.csv", "\ufeffen;fr\nyes;oui\ncat;chat\n"))
    assert data.fmt == "csv" and (data.src_lang, data.tgt_lang) == ("en", "fr")
    assert data.pairs == [("yes", "oui"), ("cat", "chat")]


def test_csv_with_braces_is_not_json_lines(tmp_path):
    data = load_parallel(write(tmp_path, "ui.csv", "{n} items,{n} Stück\n{n} files,{n} Dateien\n"))
    assert data.fmt == "csv" and data.pairs[0] == ("{n} items", "{n} Stück")


def test_tsv_keeps_bare_quotes(tmp_path):
    data = load_parallel(write(tmp_path, "quotes.tsv", '"Hi," he said.\t"Hallo", sagte er.\nok\tgut\n'))
    assert data.pairs[0] == ('"Hi," he said.', '"Hallo", sagte er.')


@pytest.mark.parametrize("compress", [False, True])
def test_aligned_files(tmp_path, compress):
    src = write(tmp_path, "corpus.en" + (".gz" if compress else ""), "".join(s + "\r\n" for s, _ in PAIRS), compress)
    tgt = write(tmp_path, "corpus.de", "".join(t + "\n" for _, t in PAIRS) + "\n\n")  # extra final blank lines
    data = load_parallel(src, tgt)
    assert data.pairs == PAIRS
    assert data.fmt == ("aligned+gzip" if compress else "aligned")
    assert (data.src_lang, data.tgt_lang) == ("en", "de")  # from the Moses-style file names


def test_aligned_line_count_mismatch_names_both_counts(tmp_path):
    src = write(tmp_path, "a.txt", "one\ntwo\nthree\n")
    tgt = write(tmp_path, "b.txt", "eins\nzwei\n")
    message = error_message(src, tgt_path=tgt)
    assert "a.txt has 3 lines" in message and "b.txt has 2" in message


@pytest.mark.parametrize("compress", [False, True])
def test_jsonl_src_tgt(tmp_path, compress):
    path = write(tmp_path, "data.jsonl", jsonl({"src": s, "tgt": t} for s, t in PAIRS), compress)
    data = load_parallel(path, src_lang="en", tgt_lang="de")
    assert data.pairs == PAIRS
    assert data.fmt == ("jsonl+gzip" if compress else "jsonl")
    assert (data.src_lang, data.tgt_lang) == ("en", "de")


@pytest.mark.parametrize("compress", [False, True])
def test_jsonl_hugging_face_translation(tmp_path, compress):
    path = write(tmp_path, "hf.json", jsonl({"translation": {"en": s, "de": t}} for s, t in PAIRS), compress)
    data = load_parallel(path)
    assert data.pairs == PAIRS and (data.src_lang, data.tgt_lang) == ("en", "de")
    reverse = load_parallel(path, src_lang="de", tgt_lang="en")
    assert reverse.pairs[0] == ("Hallo, Welt!", "Hello, world!")
    message = error_message(path, src_lang="fr")
    assert "'fr'" in message and "'en', 'de'" in message


def test_jsonl_with_three_languages_needs_a_choice(tmp_path):
    path = write(tmp_path, "multi.jsonl", jsonl([{"translation": {"en": "yes", "de": "ja", "fr": "oui"}}]))
    assert "3 languages" in error_message(path)
    assert load_parallel(path, src_lang="fr", tgt_lang="de").pairs == [("oui", "ja")]


def test_jsonl_few_broken_lines_are_counted(tmp_path):
    records = [{"src": f"s{i}", "tgt": f"t{i}"} for i in range(5)]
    content = jsonl(records[:2]) + '{"src": "broken",\n' + jsonl(records[2:]) + '{"src": "only source"}\n'
    data = load_parallel(write(tmp_path, "data.jsonl", content))
    assert len(data.pairs) == 5 and data.total_rows == 7
    assert data.dropped["malformed"] == 2 and data.dropped_lines["malformed"] == [3, 7]


def test_jsonl_mostly_broken_raises_with_line(tmp_path):
    content = "{'src': 'python', 'tgt': 'dict'}\n" * 3 + '{"src": "a", "tgt": "b"}\n'
    message = error_message(write(tmp_path, "data.jsonl", content))
    assert "3 of 4 rows are malformed" in message and "line 1: not valid JSON" in message and "column 2" in message


def test_jsonl_wrong_keys(tmp_path):
    message = error_message(write(tmp_path, "data.jsonl", jsonl([{"english": "a", "german": "b"}])))
    assert "line 1" in message and "'english'" in message and '"src"' in message


def test_json_document_is_not_json_lines(tmp_path):
    path = write(tmp_path, "data.json", json.dumps([{"src": "a", "tgt": "b"}], indent=2))
    assert "not JSON Lines" in error_message(path)


# ---- bad input --------------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    assert "no such file" in error_message(tmp_path / "nope.tsv")


@pytest.mark.parametrize("content", [b"", b"  \n\n\t\n"])
def test_empty_file(tmp_path, content):
    assert "empty.tsv is empty" in error_message(write(tmp_path, "empty.tsv", content))


def test_empty_after_gunzip(tmp_path):
    assert "empty after decompression" in error_message(write(tmp_path, "x.gz", b"", compress=True))


def test_non_utf8_names_file_and_line(tmp_path):
    path = write(tmp_path, "latin1.tsv", "ok\tgut\nCafé\tKaffee\n".encode("latin-1"))
    message = error_message(path)
    assert "latin1.tsv line 2 is not valid UTF-8" in message and "Re-save it as UTF-8" in message


def test_binary_file(tmp_path):
    message = error_message(write(tmp_path, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))))
    assert "looks like a binary file" in message and "line 3" in message


def test_utf16_file(tmp_path):
    assert "UTF-16" in error_message(write(tmp_path, "u16.tsv", "a\tb\n".encode("utf-16")))


def test_corrupt_gzip(tmp_path):
    data = gzip.compress(tsv(PAIRS * 50).encode())
    assert "Cannot decompress broken.gz" in error_message(write(tmp_path, "broken.gz", data[: len(data) // 2]))


def test_plain_text_single_file_explains_formats(tmp_path):
    message = error_message(write(tmp_path, "english.txt", "Hello world\nGood morning\n"))
    assert "not a two-column file" in message and "JSON Lines" in message and "aligned" in message


def test_three_columns(tmp_path):
    assert "3 tab-separated columns" in error_message(write(tmp_path, "d.tsv", "1\ta\tb\n2\tc\td\n"))


def test_unclosed_csv_quote_names_line(tmp_path):
    content = 'a,b\nc,d\n"never closed,' + "x" * 200_000 + "\n"
    message = error_message(write(tmp_path, "d.csv", content))
    assert "Cannot parse d.csv as CSV at line 3" in message and "quote" in message


def test_size_and_row_limits(tmp_path):
    path = write(tmp_path, "data.tsv", tsv(PAIRS))
    assert "PLAYGROUND_MAX_DATA_MB" in error_message(path, max_bytes=10)  # names a setting that exists
    message = error_message(path, max_bytes=10)  # what was found, the limit, the fix and the setting, in that order
    assert "data.tsv is too large: 78 bytes; the limit is 10 bytes. Upload a smaller sample" in message
    message = error_message(write(tmp_path, "d.gz", tsv(PAIRS), compress=True), max_bytes=10)
    assert "d.gz is too large: more than 10 bytes after decompression; the limit is 10 bytes. Upload" in message
    assert "more than 2 rows" in error_message(path, max_rows=2)


# ---- cleaning and drop reasons ----------------------------------------------------------------------------


def test_dropped_rows_are_counted_by_reason(tmp_path):
    rows = [
        "  Hello   world \tHallo Welt",  # kept, whitespace cleaned
        "Hello world\tHallo Welt",  # duplicate after cleaning
        "\tleer",  # empty side
        "one two three four\tkurz",  # too long (max_words=3)
        "only one column",  # malformed
        "Cafe\u0301\tCafé",  # kept, NFC-normalised
    ]
    data = load_parallel(write(tmp_path, "d.tsv", "\n".join(rows)), max_words=3)
    assert data.pairs == [("Hello world", "Hallo Welt"), ("Café", "Café")]
    assert data.dropped == {"malformed": 1, "empty side": 1, "too long": 1, "duplicate": 1}
    assert data.dropped_lines == {"duplicate": [2], "empty side": [3], "too long": [4], "malformed": [5]}
    assert data.total_rows == 6
    summary = data.summary()
    assert summary.startswith("2 pairs kept from 6 rows (tsv)")
    assert "1 duplicate (e.g. line 2)" in summary and "1 too long" in summary


def test_dedupe_can_be_switched_off(tmp_path):
    data = load_parallel(write(tmp_path, "d.tsv", tsv(PAIRS * 2)), dedupe=False)
    assert len(data.pairs) == 6 and data.dropped["duplicate"] == 0


def test_character_guard_for_text_without_spaces(tmp_path):
    data = load_parallel(write(tmp_path, "zh.tsv", "你好\thello\n" + "长" * 30 + "\tlong\n"), max_words=3)
    assert data.pairs == [("你好", "hello")] and data.dropped["too long"] == 1


def test_no_pairs_left_summarises_why(tmp_path):
    message = error_message(write(tmp_path, "d.tsv", "a b c\tx\nd e f\ty\n"), max_words=2)
    assert "No usable sentence pairs" in message and "2 too long" in message and "at most 2 words" in message


def test_summary_formats_large_numbers():
    data = ParallelData([("a", "b")] * 12_345, {"malformed": 0, "empty side": 15, "too long": 0, "duplicate": 40},
                        "tsv", "en", "de", 12_400)
    assert data.summary() == "12,345 pairs kept from 12,400 rows (tsv, en → de); dropped: 15 empty side, 40 duplicates."


# ---- property: any bytes give pairs or a DataError ---------------------------------------------------------

TEXTY = st.text(alphabet=st.sampled_from(list('ab é中\t\n\r,;"{}[]:\\') + ["\x00", "\ufeff"]), max_size=60)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.one_of(st.binary(max_size=200), TEXTY.map(str.encode), st.binary(max_size=60).map(gzip.compress)))
def test_any_bytes_load_or_raise_data_error(tmp_path, content):
    path = tmp_path / "upload"
    path.write_bytes(content)
    try:
        data = load_parallel(path)
    except DataError as error:
        assert str(error)
    else:
        assert data.pairs and all(src and tgt for src, tgt in data.pairs)


# ---- splitting and statistics ------------------------------------------------------------------------------


def test_split_is_deterministic_and_sized():
    pairs = [(f"s{i}", f"t{i}") for i in range(100)]
    train, val = split_pairs(pairs, val_fraction=0.1, seed=3)
    assert (train, val) == split_pairs(pairs, val_fraction=0.1, seed=3)
    assert split_pairs(pairs, val_fraction=0.1, seed=4)[1] != val
    assert len(val) == 10 and sorted(train + val) == sorted(pairs)
    assert len(split_pairs(pairs, val_fraction=0.5, max_val=7)[1]) == 7


def test_split_small_inputs():
    assert [len(part) for part in split_pairs([("a", "b"), ("c", "d")], val_fraction=0.0)] == [1, 1]
    assert [len(part) for part in split_pairs([("a", "b"), ("c", "d")], val_fraction=0.9)] == [1, 1]
    with pytest.raises(DataError, match="at least 2"):
        split_pairs([("a", "b")])


def test_pair_stats():
    stats = pair_stats([("a b c", "x"), ("a", "y y"), ("b c d e", "z")])
    assert stats.num_pairs == 3
    assert (stats.src.tokens, stats.src.longest_len, stats.src.median_len, stats.src.p95_len) == (8, 4, 3.0, 4)
    assert stats.src.lengths == [3, 1, 4] and stats.src.vocab_size == 5 and stats.src.chars == 13
    assert stats.src.mean_len == pytest.approx(8 / 3)
    assert (stats.tgt.tokens, stats.tgt.vocab_size) == (4, 3)
    assert stats.as_dict()["tgt"]["lengths"] == [1, 2, 1]
    assert pair_stats([]).as_dict()["src"]["tokens"] == 0


def test_a_session_keeps_its_pairs_packed():
    from playground.data.packed import PackedPairs
    from playground.data.stats import pair_stats, split_pairs

    pairs = [(f"the {i}th sentence", f"der {i}. Satz ü") for i in range(2000)] + [("émoji 🙂", "")]
    packed = PackedPairs(pairs)
    assert list(packed) == pairs and len(packed) == len(pairs) and packed[-1] == pairs[-1]
    assert packed[5:8] == pairs[5:8] and packed.swapped()[3] == pairs[3][::-1]
    assert split_pairs(packed, 0.1, seed=3) == split_pairs(pairs, 0.1, seed=3)
    assert pair_stats(packed) == pair_stats(pairs)
    as_list = sum(sys.getsizeof(p) + sys.getsizeof(p[0]) + sys.getsizeof(p[1]) for p in pairs)
    assert packed.nbytes < as_list / 3  # a third of the memory, or less
    with pytest.raises(IndexError):
        packed[len(pairs)]


@pytest.mark.parametrize("compress", [False, True])
def test_asking_for_en_finds_en_gb_in_every_format(tmp_path, compress):
    """One language matcher for all formats: "en" finds "en-GB", "de" finds "de_DE", in JSONL as in TMX."""
    records = jsonl({"translation": {"de_DE": t, "en-GB": s}} for s, t in PAIRS)
    units = "".join(f'<tu><tuv xml:lang="de_DE"><seg>{t}</seg></tuv><tuv xml:lang="en-GB"><seg>{s}</seg></tuv></tu>'
                    for s, t in PAIRS)
    files = {"variants.jsonl": records, "variants.tsv": "de_DE\ten-GB\n" + tsv((t, s) for s, t in PAIRS),
             "variants.tmx": f'<?xml version="1.0"?>\n<tmx version="1.4"><body>{units}</body></tmx>\n'}
    for name, content in files.items():
        data = load_parallel(write(tmp_path, name, content, compress), src_lang="en", tgt_lang="de")
        assert data.pairs == PAIRS, name
        assert (data.src_lang, data.tgt_lang) == ("en-GB", "de_DE"), name
