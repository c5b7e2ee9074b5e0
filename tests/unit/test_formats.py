"""TMX and Parquet uploads: good files, broken files and hostile ones, all generated here (small on disk)."""

import gzip
import resource
import time

import pytest

from playground.data.load import load_parallel
from playground.errors import DataError

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def tmx(*units: str, doctype: str = '<!DOCTYPE tmx SYSTEM "tmx14.dtd">') -> str:
    body = "\n".join(units)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n{doctype}\n<tmx version="1.4">\n'
            '<header srclang="en" datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="x" '
            f'creationtool="test" creationtoolversion="1"/>\n<body>\n{body}\n</body>\n</tmx>\n')


def tu(**segments: str) -> str:
    """A translation unit; keyword names are language tags with _ for - (en_GB → en-GB)."""
    return "<tu>" + "".join(f'<tuv xml:lang="{lang.replace("_", "-")}"><seg>{text}</seg></tuv>'
                            for lang, text in segments.items()) + "</tu>"


def write(tmp_path, name: str, text: str, compress: bool = False):
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


# ---- TMX ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_tmx_pairs_with_inline_markup_removed(tmp_path, compress):
    text = tmx(tu(en="The <bpt i='1'>&lt;b&gt;</bpt>cat<ept i='1'>&lt;/b&gt;</ept> sleeps<ph>&lt;br/&gt;</ph>.",
                  de="Die <hi>Katze</hi> schläft &amp; träumt."),
               tu(en="A dog.", de="Ein Hund."))
    data = load_parallel(write(tmp_path, "memory.tmx", text, compress))
    assert data.pairs == [("The cat sleeps.", "Die Katze schläft & träumt."), ("A dog.", "Ein Hund.")]
    assert (data.src_lang, data.tgt_lang) == ("en", "de")
    assert data.fmt == ("tmx+gzip" if compress else "tmx")


def test_a_language_label_a_package_cannot_carry_is_refused_when_read(tmp_path):
    """A 70-character xml:lang would train, then make the package unreadable (config.json allows 64)."""
    long_label = "x" * 70
    path = write(tmp_path, "long.tmx", tmx(tu(en="a cat", **{long_label: "eine Katze"})))
    with pytest.raises(DataError, match="target language of long.tmx 'x+…' is not a usable language label"):
        load_parallel(path)
    from playground.training.inputs import TrainData

    with pytest.raises(DataError, match="Source language .* is not a usable language label"):
        TrainData([("a", "b")], [("a", "b")], src_lang="a\tb")


def test_tmx_languages_by_variant_in_either_order(tmp_path):
    # the <tuv> order differs between units, and the file says en-GB / de-DE where the user says en / de
    path = write(tmp_path, "variants.tmx", tmx(tu(en_GB="One cat.", de_DE="Eine Katze."),
                                               tu(de_DE="Zwei Hunde.", en_GB="Two dogs.")))
    data = load_parallel(path, src_lang="de", tgt_lang="en")
    assert data.pairs == [("Eine Katze.", "One cat."), ("Zwei Hunde.", "Two dogs.")]
    assert (data.src_lang, data.tgt_lang) == ("de-DE", "en-GB")


def test_tmx_with_three_languages_asks_for_the_pair_or_takes_the_hint(tmp_path):
    path = write(tmp_path, "three.tmx", tmx(tu(en="cat", de="Katze", fr="chat"), tu(en="dog", de="Hund", fr="chien")))
    with pytest.raises(DataError, match="3 languages .*choose the source and target"):
        load_parallel(path)
    assert load_parallel(path, src_lang="fr", tgt_lang="de").pairs == [("chat", "Katze"), ("chien", "Hund")]
    assert load_parallel(path, language_hint=("en", "fr")).pairs == [("cat", "chat"), ("dog", "chien")]


def test_tmx_units_without_both_languages_are_counted_as_malformed(tmp_path):
    path = write(tmp_path, "gaps.tmx", tmx(tu(en="cat", de="Katze"), tu(en="alone"), tu(en="dog", fr="chien"),
                                           tu(en="bird", de="Vogel"), tu(en="", de="leer")))
    data = load_parallel(path)
    assert data.pairs == [("cat", "Katze"), ("bird", "Vogel")]
    assert data.dropped["malformed"] == 2 and data.dropped["empty side"] == 1 and data.total_rows == 5


def test_broken_tmx_says_where(tmp_path):
    text = tmx(tu(en="cat", de="Katze"), tu(en="dog", de="Hund"))
    with pytest.raises(DataError, match=r"not well-formed XML \(line \d+"):
        load_parallel(write(tmp_path, "cut.tmx", text[: len(text) - 60]))
    with pytest.raises(DataError, match="no translation unit"):
        load_parallel(write(tmp_path, "other.xml", "<?xml version='1.0'?><root><a>1</a></root>"))


def test_tmx_entities_are_never_expanded(tmp_path):
    """A billion-laughs bomb is refused quickly and small; an external entity never reads the file it names."""
    levels = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    bomb = tmx(tu(en="boom &lol9;", de="ok"), doctype=f"<!DOCTYPE tmx [{''.join(levels)}]>")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    try:
        data = load_parallel(write(tmp_path, "bomb.tmx", bomb))
        assert all(len(s) < 100 for pair in data.pairs for s in pair)
    except DataError as error:
        assert "XML" in str(error)
    assert time.perf_counter() - start < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB: under 100 MB grown

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    external = tmx(tu(en="leak &xxe; here", de="nichts"),
                   doctype=f'<!DOCTYPE tmx [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>')
    data = load_parallel(write(tmp_path, "xxe.tmx", external))
    assert data.pairs == [("leak here", "nichts")]


def test_tmx_size_limit_counts_decompressed_bytes(tmp_path):
    text = tmx(*[tu(en=f"sentence {i}", de=f"Satz {i}") for i in range(200)])
    path = write(tmp_path, "big.tmx.gz", text, compress=True)
    assert path.stat().st_size < 2000 < len(text)
    with pytest.raises(DataError, match="more than 2,000 bytes after decompression; the limit is 2,000 bytes"):
        load_parallel(path, max_bytes=2000)


# ---- Parquet -----------------------------------------------------------------------------------------------


def test_parquet_hugging_face_translation_column_in_row_groups(tmp_path):
    rows = [{"en": f"sentence {i}", "de": f"Satz {i}"} for i in range(25)] + [{"en": "", "de": "leer"}]
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"translation": rows}), path, row_group_size=4)  # seven row groups
    data = load_parallel(path)
    assert data.fmt == "parquet" and (data.src_lang, data.tgt_lang) == ("en", "de")
    assert data.pairs[0] == ("sentence 0", "Satz 0") and len(data.pairs) == 25
    assert data.dropped["empty side"] == 1
    reverse = load_parallel(path, src_lang="de")
    assert reverse.pairs[0] == ("Satz 0", "sentence 0") and (reverse.src_lang, reverse.tgt_lang) == ("de", "en")


def test_parquet_two_text_columns(tmp_path):
    path = tmp_path / "named.parquet"
    pq.write_table(pa.table({"id": [1, 2], "target": ["Katze", "Hund"], "source": ["cat", "dog"]}), path)
    assert load_parallel(path).pairs == [("cat", "Katze"), ("dog", "Hund")]  # by name, not by position
    path = tmp_path / "languages.parquet"
    pq.write_table(pa.table({"de": ["Katze", "Hund"], "en": ["cat", "dog"], "fr": ["chat", "chien"]}), path)
    with pytest.raises(DataError, match="3 languages"):
        load_parallel(path)
    data = load_parallel(path, src_lang="en", tgt_lang="fr")
    assert data.pairs == [("cat", "chat"), ("dog", "chien")] and data.src_lang == "en"


def test_parquet_refusals(tmp_path):
    path = tmp_path / "numbers.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]}), path)
    with pytest.raises(DataError, match="not exactly two text columns"):
        load_parallel(path)
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"translation": [{"en": "cat", "de": "Katze"}] * 50}), good)
    data = good.read_bytes()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(data[:40] + b"\0" * (len(data) - 48) + data[-8:])  # header and footer magic, garbage inside
    with pytest.raises(DataError, match="Cannot read broken.parquet as Parquet"):
        load_parallel(broken)
    with pytest.raises(DataError, match="too large: 50 rows; the limit is 10 rows"):
        load_parallel(good, max_rows=10)
    with pytest.raises(DataError, match="of data uncompressed; the limit is 100 bytes"):
        load_parallel(good, max_bytes=100)


def dictionary_bomb(path, value_bytes: int, rows: int, struct: bool = False):
    """A Parquet file of a few hundred bytes whose one dictionary value repeats on every row: its footer counts the
    value once, decoding makes rows x value_bytes of text."""
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * value_bytes]))
    other = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["y"]))
    table = (pa.table({"translation": pa.StructArray.from_arrays([column, other], names=["en", "de"])}) if struct
             else pa.table({"en": column, "de": other}))
    pq.write_table(table, path, compression="zstd", use_dictionary=True)
    return path


@pytest.mark.parametrize("struct", [False, True])
def test_parquet_dictionary_bomb_is_refused_before_it_is_decoded(tmp_path, struct):
    path = dictionary_bomb(tmp_path / "bomb.parquet", value_bytes=1_000_000, rows=20_000, struct=struct)
    assert path.stat().st_size < 2000  # 20 GB of text once decoded
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(DataError, match="more than 10 MB of text once decoded"):
        load_parallel(path, max_bytes=10 * 2**20)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, f"peak memory grew by {grown_mb:.0f} MB"
