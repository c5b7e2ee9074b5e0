"""Tests for the built-in datasets: determinism, splits, number words, the files written (the grammar of the
mini-translation sentences: test_mini_translation_grammar.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO
from helpers import builtin_split as generated

from playground.datasets.catalog import BUILTIN_DATASETS
from playground.datasets.lexicon import ADJECTIVES, NOUNS
from playground.datasets.mini_translation import generate_mini_translation
from playground.datasets.numbers import english_number, generate_numbers, german_number
from playground.datasets.reverse import REVERSE_SYMBOLS
from playground.datasets.verbs import VERBS
from playground.datasets.write import write_builtin_datasets
from playground.errors import DataError

# --------------------------------------------------------------------------------------
# every dataset
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reverse", "numbers", "mini-translation"])
def test_same_seed_gives_same_pairs_and_other_seed_differs(name: str) -> None:
    assert BUILTIN_DATASETS[name].generate(0) == generated(name)
    assert generated(name, seed=1) != generated(name)


@pytest.mark.parametrize("name", ["reverse", "numbers", "mini-translation"])
def test_test_set_shares_no_source_or_target_with_train(name: str) -> None:
    train, test = generated(name)
    train_sources = [source for source, _ in train]
    assert len(set(train_sources)) == len(train_sources)
    assert not set(train_sources) & {source for source, _ in test}
    assert not {target for _, target in train} & {target for _, target in test}


@pytest.mark.parametrize(
    ("name", "min_train", "max_train"),
    [("reverse", 10_000, 10_000), ("numbers", 10_000, 12_000), ("mini-translation", 10_000, 10_000)],
)
def test_sizes(name: str, min_train: int, max_train: int) -> None:
    train, test = generated(name)
    assert min_train <= len(train) <= max_train
    assert len(test) == 500


@pytest.mark.parametrize("name", ["reverse", "numbers", "mini-translation"])
def test_pairs_fit_in_a_tsv_line(name: str) -> None:
    train, test = generated(name)
    for source, target in train + test:
        assert source and target
        assert not any(bad in text for text in (source, target) for bad in "\t\n\r")


# --------------------------------------------------------------------------------------
# reverse
# --------------------------------------------------------------------------------------


def test_reverse_targets_are_reversed_sources_of_allowed_length() -> None:
    train, test = generated("reverse")
    for source, target in train + test:
        symbols = source.split()
        assert 4 <= len(symbols) <= 12
        assert set(symbols) <= set(REVERSE_SYMBOLS)
        assert target.split() == symbols[::-1]


# --------------------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------------------

HAND_CHECKED_NUMBERS = [
    (0, "zero", "null"),
    (1, "one", "eins"),
    (7, "seven", "sieben"),
    (11, "eleven", "elf"),
    (12, "twelve", "zwölf"),
    (16, "sixteen", "sechzehn"),
    (17, "seventeen", "siebzehn"),
    (20, "twenty", "zwanzig"),
    (21, "twenty-one", "einundzwanzig"),
    (30, "thirty", "dreißig"),
    (66, "sixty-six", "sechsundsechzig"),
    (77, "seventy-seven", "siebenundsiebzig"),
    (100, "one hundred", "einhundert"),
    (101, "one hundred one", "einhunderteins"),
    (121, "one hundred twenty-one", "einhunderteinundzwanzig"),
    (421, "four hundred twenty-one", "vierhunderteinundzwanzig"),
    (1000, "one thousand", "eintausend"),
    (1001, "one thousand one", "eintausendeins"),
    (1200, "one thousand two hundred", "eintausendzweihundert"),
    (2354, "two thousand three hundred fifty-four", "zweitausenddreihundertvierundfünfzig"),
    (10000, "ten thousand", "zehntausend"),
    (21000, "twenty-one thousand", "einundzwanzigtausend"),
    (99999, "ninety-nine thousand nine hundred ninety-nine", "neunundneunzigtausendneunhundertneunundneunzig"),
    (101001, "one hundred one thousand one", "einhunderteintausendeins"),
    (123456, "one hundred twenty-three thousand four hundred fifty-six",
     "einhundertdreiundzwanzigtausendvierhundertsechsundfünfzig"),
    (999999, "nine hundred ninety-nine thousand nine hundred ninety-nine",
     "neunhundertneunundneunzigtausendneunhundertneunundneunzig"),
]  # fmt: skip


@pytest.mark.parametrize(("number", "english", "german"), HAND_CHECKED_NUMBERS)
def test_number_words(number: int, english: str, german: str) -> None:
    assert english_number(number) == english
    assert german_number(number) == german


@pytest.mark.parametrize("number", [-1, 1_000_000])
def test_numbers_out_of_range_are_refused(number: int) -> None:
    with pytest.raises(ValueError):
        english_number(number)
    with pytest.raises(ValueError):
        german_number(number)


def test_numbers_keep_words_that_cannot_be_composed_in_training() -> None:
    train, _ = generate_numbers(seed=3)
    train_targets = {target for _, target in train}
    assert {"null", "eins", "elf", "zwölf", "sechzehn", "siebzehn", "dreißig", "siebzig"} <= train_targets


def test_numbers_pairs_are_consistent_translations() -> None:
    train, test = generated("numbers")
    by_english = {english_number(n): german_number(n) for n in range(1000)}
    small = [(source, target) for source, target in train + test if source in by_english]
    assert len(small) == 1000
    assert all(by_english[source] == target for source, target in small)




# --------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------


def read_bytes(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_written_files_are_reproducible_and_match_the_committed_assets(tmp_path: Path) -> None:
    write_builtin_datasets(tmp_path / "first", seed=0)
    first = read_bytes(tmp_path / "first")
    assert set(first) == {
        "README.md",
        *(f"{name}/{split}.tsv" for name in BUILTIN_DATASETS for split in ("train", "test")),
    }
    assert first == read_bytes(REPO / "assets" / "datasets"), "run: python -m playground.datasets"
    assert b"python -m playground.datasets" in first["README.md"]
    for name, dataset in BUILTIN_DATASETS.items():
        train_lines = first[f"{name}/train.tsv"].decode("utf-8").split("\n")
        assert train_lines[0] == f"{dataset.src_lang}\t{dataset.tgt_lang}"
        pairs = [tuple(line.split("\t")) for line in train_lines[1:-1]]
        assert pairs == generated(name)[0]
        assert len(first[f"{name}/train.tsv"]) < 1_500_000


def test_catalogue_describes_the_lexicon_it_does_not_import() -> None:
    """The catalogue stays light (the app lists it), so the mini-translation counts are written out: keep them true."""
    description = BUILTIN_DATASETS["mini-translation"].description
    assert f"({len(NOUNS)} nouns, {len(ADJECTIVES)} adjectives, {len(VERBS)} verbs)" in description
    assert BUILTIN_DATASETS["mini-translation"].generate(5) == generate_mini_translation(5)


def test_read_builtin_loads_the_shipped_file_or_generates_it(tmp_path: Path, monkeypatch) -> None:
    from playground.data import builtin

    shipped = builtin.read_builtin("reverse")
    assert shipped.fmt == "tsv" and (shipped.src_lang, shipped.tgt_lang) == ("seq", "rev")
    monkeypatch.setattr(builtin, "DATASETS_DIR", tmp_path)  # no shipped files: made on the spot, the same pairs
    made = builtin.read_builtin("reverse")
    assert made.fmt == "generated" and made.pairs == shipped.pairs
    with pytest.raises(DataError, match="no built-in dataset 'nope'; choose one of reverse, numbers"):
        builtin.read_builtin("nope")
