"""The "numbers" dataset: English number words and their German spelling ("421" -> "four hundred twenty-one" ->
"vierhunderteinundzwanzig")."""

from __future__ import annotations

import random

from playground.datasets.split import TEST_SIZE, Pair, Split

ENGLISH_BELOW_TWENTY = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
ENGLISH_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()

# Units as they appear inside a compound: "ein" in "einundzwanzig", "einhundert",
# "eintausend". Only a final, standalone one is "eins" ("eins", "hunderteins").
GERMAN_UNITS = "_ ein zwei drei vier fünf sechs sieben acht neun".split()
GERMAN_TEN_TO_NINETEEN = (
    "zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn".split()
)
GERMAN_TENS = "_ _ zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split()


def _english_below_thousand(number: int) -> str:
    hundreds, rest = divmod(number, 100)
    words = [f"{ENGLISH_BELOW_TWENTY[hundreds]} hundred"] if hundreds else []
    if rest >= 20:
        tens, units = divmod(rest, 10)
        words.append(ENGLISH_TENS[tens] + (f"-{ENGLISH_BELOW_TWENTY[units]}" if units else ""))
    elif rest or not hundreds:
        words.append(ENGLISH_BELOW_TWENTY[rest])
    return " ".join(words)


def english_number(number: int) -> str:
    """American English without "and": 1200 -> "one thousand two hundred", 21 -> "twenty-one"."""
    if not 0 <= number < 1_000_000:
        raise ValueError(f"only 0..999999 are supported, got {number}")
    thousands, rest = divmod(number, 1000)
    words = [f"{_english_below_thousand(thousands)} thousand"] if thousands else []
    if rest or not thousands:
        words.append(_english_below_thousand(rest))
    return " ".join(words)


def _german_below_thousand(number: int, final: bool) -> str:
    """German words for 1..999; `final` says nothing follows, so a trailing 1 is "eins"."""
    hundreds, rest = divmod(number, 100)
    word = f"{GERMAN_UNITS[hundreds]}hundert" if hundreds else ""
    tens, units = divmod(rest, 10)
    if rest == 1:
        word += "eins" if final else "ein"
    elif rest < 10:
        word += GERMAN_UNITS[rest] if rest else ""
    elif rest < 20:
        word += GERMAN_TEN_TO_NINETEEN[rest - 10]
    elif units:
        word += f"{GERMAN_UNITS[units]}und{GERMAN_TENS[tens]}"
    else:
        word += GERMAN_TENS[tens]
    return word


def german_number(number: int) -> str:
    """German spelling as one word, with "einhundert"/"eintausend": 2354 -> "zweitausenddreihundertvierundfünfzig"."""
    if not 0 <= number < 1_000_000:
        raise ValueError(f"only 0..999999 are supported, got {number}")
    if number == 0:
        return "null"
    thousands, rest = divmod(number, 1000)
    word = f"{_german_below_thousand(thousands, final=False)}tausend" if thousands else ""
    if rest:
        word += _german_below_thousand(rest, final=True)
    return word


def generate_numbers(seed: int = 0) -> Split:
    """All of 0..999 plus samples up to 999,999; ~11,000 training pairs, 500 held-out numbers."""
    rng = random.Random(seed)
    # The words that cannot be composed from others stay in training: a model cannot
    # guess "elf" or "dreißig" it has never seen, so testing on them measures nothing.
    building_blocks = [*range(21), *range(30, 100, 10), 100, 1000]
    in_building_blocks = set(building_blocks)
    drawn = [*range(1000), *rng.sample(range(1000, 10_000), 4000), *rng.sample(range(10_000, 1_000_000), 6500)]
    candidates = [n for n in drawn if n not in in_building_blocks]
    rng.shuffle(candidates)
    test_numbers = candidates[:TEST_SIZE]
    train_numbers = candidates[TEST_SIZE:] + building_blocks
    rng.shuffle(train_numbers)

    def pairs(numbers: list[int]) -> list[Pair]:
        return [(english_number(n), german_number(n)) for n in numbers]

    return pairs(train_numbers), pairs(test_numbers)
