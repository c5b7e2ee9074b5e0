"""Built-in datasets the playground can train on without downloading anything.

Every pair is produced by the code in this module, so the sets are small, exact and
reproducible:

* ``reverse``: random symbol sequences and the same sequence reversed.
* ``numbers``: English number words and their German spelling ("421" ->
  "four hundred twenty-one" -> "vierhunderteinundzwanzig").
* ``mini-translation``: English sentences from a small hand-written grammar and their
  German translation, with gender/case agreement, verb-second order, verb-final
  subordinate clauses and separable verbs.

``python -m playground.datasets.lexicon`` regenerates ``assets/datasets``; the same seed
always gives byte-identical files.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

Pair = tuple[str, str]
Split = tuple[list[Pair], list[Pair]]

TEST_SIZE = 500
DATASETS_DIR = Path(__file__).resolve().parents[2] / "assets" / "datasets"  # the shipped files


@dataclass(frozen=True)
class BuiltinDataset:
    name: str
    title: str
    description: str
    src_lang: str
    tgt_lang: str
    generate: Callable[[int], Split]


def _draw_split(draw_pair: Callable[[], Pair], train_size: int, test_size: int) -> Split:
    """Draw a held-out test set first, then training pairs that share no source or target with it.

    Sources are deduplicated across both sets. Targets are checked too, because two
    different sources can have the same translation ("does not see a dog" and
    "sees no dog" both give "sieht keinen Hund").
    """
    seen_sources: set[str] = set()
    test_targets: set[str] = set()
    test: list[Pair] = []
    train: list[Pair] = []
    attempts_left = 100 * (train_size + test_size)  # fail loudly if a grammar is too small
    while len(test) < test_size or len(train) < train_size:
        attempts_left -= 1
        if attempts_left < 0:
            raise RuntimeError("the generator repeats itself too often to fill the requested sizes")
        source, target = draw_pair()
        if source in seen_sources:
            continue
        if len(test) < test_size:
            seen_sources.add(source)
            test_targets.add(target)
            test.append((source, target))
        elif target not in test_targets:
            seen_sources.add(source)
            train.append((source, target))
    return train, test


# --------------------------------------------------------------------------------------
# reverse: sequence reversal
# --------------------------------------------------------------------------------------

REVERSE_SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyz0123456789")
REVERSE_MIN_LENGTH = 4
REVERSE_MAX_LENGTH = 12


def generate_reverse(seed: int = 0) -> Split:
    """Random space-separated symbol sequences (length 4-12) paired with their reversal."""
    rng = random.Random(seed)

    def draw_pair() -> Pair:
        length = rng.randint(REVERSE_MIN_LENGTH, REVERSE_MAX_LENGTH)
        symbols = [rng.choice(REVERSE_SYMBOLS) for _ in range(length)]
        return " ".join(symbols), " ".join(reversed(symbols))

    return _draw_split(draw_pair, train_size=10_000, test_size=TEST_SIZE)


# --------------------------------------------------------------------------------------
# numbers: English number words -> German number words
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# mini-translation: the lexicon
# --------------------------------------------------------------------------------------

# Tags say what a noun can do in a sentence; verbs, adjectives and prepositions list the
# tags they accept, so the generator says "the cat catches a mouse" but never
# "the soup reads a dog". "generic" marks nouns that take no possessive (see below).


def _tags(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Noun:
    english: str
    english_plural: str
    german: str
    gender: str  # "m", "f" or "n"
    german_plural: str
    weak_form: str  # weak masculine nouns take this form outside the nominative singular
    tags: frozenset[str]


def _noun_table(rows: Iterable[tuple[str, str, str, str, str, str, str]]) -> dict[str, Noun]:
    nouns = [Noun(en, en_pl, de, gender, de_pl, weak, _tags(tags)) for en, en_pl, de, gender, de_pl, weak, tags in rows]
    return {noun.english: noun for noun in nouns}


NOUNS = _noun_table([
    # English      plural           German        gender  plural          weak form     tags
    ("man",         "men",           "Mann",        "m", "Männer",       "",           "person generic"),
    ("woman",       "women",         "Frau",        "f", "Frauen",       "",           "person generic"),
    ("child",       "children",      "Kind",        "n", "Kinder",       "",           "person"),
    ("boy",         "boys",          "Junge",       "m", "Jungen",       "Jungen",     "person"),
    ("girl",        "girls",         "Mädchen",     "n", "Mädchen",      "",           "person"),
    ("teacher",     "teachers",      "Lehrer",      "m", "Lehrer",       "",           "person"),
    ("doctor",      "doctors",       "Arzt",        "m", "Ärzte",        "",           "person"),
    ("student",     "students",      "Student",     "m", "Studenten",    "Studenten",  "person"),
    ("neighbor",    "neighbors",     "Nachbar",     "m", "Nachbarn",     "Nachbarn",   "person"),
    ("friend",      "friends",       "Freund",      "m", "Freunde",      "",           "person"),
    ("king",        "kings",         "König",       "m", "Könige",       "",           "person"),
    ("queen",       "queens",        "Königin",     "f", "Königinnen",   "",           "person"),
    ("father",      "fathers",       "Vater",       "m", "Väter",        "",           "person"),
    ("mother",      "mothers",       "Mutter",      "f", "Mütter",       "",           "person"),
    ("brother",     "brothers",      "Bruder",      "m", "Brüder",       "",           "person"),
    ("sister",      "sisters",       "Schwester",   "f", "Schwestern",   "",           "person"),
    ("grandmother", "grandmothers",  "Großmutter",  "f", "Großmütter",   "",           "person"),
    ("baby",        "babies",        "Baby",        "n", "Babys",        "",           "person"),
    ("cook",        "cooks",         "Koch",        "m", "Köche",        "",           "person"),
    ("farmer",      "farmers",       "Bauer",       "m", "Bauern",       "Bauern",     "person"),
    ("dog",         "dogs",          "Hund",        "m", "Hunde",        "",           "animal dog hunter swimmer"),
    ("cat",         "cats",          "Katze",       "f", "Katzen",       "",           "animal hunter"),
    ("horse",       "horses",        "Pferd",       "n", "Pferde",       "",           "animal"),
    ("bird",        "birds",         "Vogel",       "m", "Vögel",        "",           "animal bird catchable"),
    ("mouse",       "mice",          "Maus",        "f", "Mäuse",        "",           "animal catchable"),
    ("cow",         "cows",          "Kuh",         "f", "Kühe",         "",           "animal"),
    ("bear",        "bears",         "Bär",         "m", "Bären",        "Bären",      "animal hunter swimmer"),
    ("lion",        "lions",         "Löwe",        "m", "Löwen",        "Löwen",      "animal hunter"),
    ("monkey",      "monkeys",       "Affe",        "m", "Affen",        "Affen",      "animal"),
    ("rabbit",      "rabbits",       "Hase",        "m", "Hasen",        "Hasen",      "animal catchable"),
    ("elephant",    "elephants",     "Elefant",     "m", "Elefanten",    "Elefanten",  "animal swimmer"),
    ("pig",         "pigs",          "Schwein",     "n", "Schweine",     "",           "animal"),
    ("duck",        "ducks",         "Ente",        "f", "Enten",        "",           "animal bird catchable swimmer"),
    ("frog",        "frogs",         "Frosch",      "m", "Frösche",      "",           "animal catchable swimmer"),
    ("goat",        "goats",         "Ziege",       "f", "Ziegen",       "",           "animal"),
    ("fox",         "foxes",         "Fuchs",       "m", "Füchse",       "",           "animal hunter"),
    ("chicken",     "chickens",      "Huhn",        "n", "Hühner",       "",           "animal catchable"),
    ("owl",         "owls",          "Eule",        "f", "Eulen",        "",           "animal bird hunter"),
    ("ball",        "balls",         "Ball",        "m", "Bälle",        "",           "thing toy throwable catchable"),
    ("book",        "books",         "Buch",        "n", "Bücher",       "",           "thing readable writable openable closable"),
    ("cup",         "cups",          "Tasse",       "f", "Tassen",       "",           "thing container"),
    ("letter",      "letters",       "Brief",       "m", "Briefe",       "",           "thing readable writable openable sendable"),
    ("key",         "keys",          "Schlüssel",   "m", "Schlüssel",    "",           "thing"),
    ("bag",         "bags",          "Tasche",      "f", "Taschen",      "",           "thing container openable closable"),
    ("picture",     "pictures",      "Bild",        "n", "Bilder",       "",           "thing sendable"),
    ("bottle",      "bottles",       "Flasche",     "f", "Flaschen",     "",           "thing container openable"),
    ("lamp",        "lamps",         "Lampe",       "f", "Lampen",       "",           "thing"),
    ("pen",         "pens",          "Stift",       "m", "Stifte",       "",           "thing"),
    ("newspaper",   "newspapers",    "Zeitung",     "f", "Zeitungen",    "",           "thing readable"),
    ("box",         "boxes",         "Kiste",       "f", "Kisten",       "",           "thing container openable closable buildable"),
    ("toy",         "toys",          "Spielzeug",   "n", "Spielzeuge",   "",           "thing toy"),
    ("phone",       "phones",        "Telefon",     "n", "Telefone",     "",           "thing"),
    ("glass",       "glasses",       "Glas",        "n", "Gläser",       "",           "thing container"),
    ("plate",       "plates",        "Teller",      "m", "Teller",       "",           "thing container"),
    ("umbrella",    "umbrellas",     "Regenschirm", "m", "Regenschirme", "",           "thing openable closable"),
    ("stone",       "stones",        "Stein",       "m", "Steine",       "",           "thing throwable"),
    ("doll",        "dolls",         "Puppe",       "f", "Puppen",       "",           "thing toy"),
    ("present",     "presents",      "Geschenk",    "n", "Geschenke",    "",           "thing openable sendable"),
    ("flower",      "flowers",       "Blume",       "f", "Blumen",       "",           "thing sendable"),
    ("car",         "cars",          "Auto",        "n", "Autos",        "",           "vehicle landmark"),
    ("bicycle",     "bicycles",      "Fahrrad",     "n", "Fahrräder",    "",           "vehicle"),
    ("boat",        "boats",         "Boot",        "n", "Boote",        "",           "vehicle buildable"),
    ("hat",         "hats",          "Hut",         "m", "Hüte",         "",           "clothing"),
    ("shoe",        "shoes",         "Schuh",       "m", "Schuhe",       "",           "clothing"),
    ("coat",        "coats",         "Mantel",      "m", "Mäntel",       "",           "clothing"),
    ("shirt",       "shirts",        "Hemd",        "n", "Hemden",       "",           "clothing"),
    ("dress",       "dresses",       "Kleid",       "n", "Kleider",      "",           "clothing"),
    ("jacket",      "jackets",       "Jacke",       "f", "Jacken",       "",           "clothing"),
    ("cap",         "caps",          "Mütze",       "f", "Mützen",       "",           "clothing"),
    ("skirt",       "skirts",        "Rock",        "m", "Röcke",        "",           "clothing"),
    ("apple",       "apples",        "Apfel",       "m", "Äpfel",        "",           "food throwable"),
    ("pear",        "pears",         "Birne",       "f", "Birnen",       "",           "food"),
    ("banana",      "bananas",       "Banane",      "f", "Bananen",      "",           "food"),
    ("cake",        "cakes",         "Kuchen",      "m", "Kuchen",       "",           "food bakeable"),
    ("cookie",      "cookies",       "Keks",        "m", "Kekse",        "",           "food bakeable"),
    ("egg",         "eggs",          "Ei",          "n", "Eier",         "",           "food cookable"),
    ("soup",        "soups",         "Suppe",       "f", "Suppen",       "",           "food cookable"),
    ("sausage",     "sausages",      "Wurst",       "f", "Würste",       "",           "food cookable"),
    ("potato",      "potatoes",      "Kartoffel",   "f", "Kartoffeln",   "",           "food cookable"),
    ("carrot",      "carrots",       "Karotte",     "f", "Karotten",     "",           "food"),
    ("tomato",      "tomatoes",      "Tomate",      "f", "Tomaten",      "",           "food"),
    ("cherry",      "cherries",      "Kirsche",     "f", "Kirschen",     "",           "food"),
    ("orange",      "oranges",       "Orange",      "f", "Orangen",      "",           "food"),
    ("table",       "tables",        "Tisch",       "m", "Tische",       "",           "furniture buildable"),
    ("chair",       "chairs",        "Stuhl",       "m", "Stühle",       "",           "furniture buildable"),
    ("bed",         "beds",          "Bett",        "n", "Betten",       "",           "furniture"),
    ("sofa",        "sofas",         "Sofa",        "n", "Sofas",        "",           "furniture"),
    ("cupboard",    "cupboards",     "Schrank",     "m", "Schränke",     "",           "furniture"),
    ("garden",      "gardens",       "Garten",      "m", "Gärten",       "",           "outdoors"),
    ("park",        "parks",         "Park",        "m", "Parks",        "",           "outdoors"),
    ("forest",      "forests",       "Wald",        "m", "Wälder",       "",           "outdoors"),
    ("kitchen",     "kitchens",      "Küche",       "f", "Küchen",       "",           "room"),
    ("room",        "rooms",         "Zimmer",      "n", "Zimmer",       "",           "room"),
    ("house",       "houses",        "Haus",        "n", "Häuser",       "",           "building landmark buildable"),
    ("school",      "schools",       "Schule",      "f", "Schulen",      "",           "building landmark"),
    ("castle",      "castles",       "Schloss",     "n", "Schlösser",    "",           "building landmark"),
    ("church",      "churches",      "Kirche",      "f", "Kirchen",      "",           "building landmark"),
    ("city",        "cities",        "Stadt",       "f", "Städte",       "",           "town"),
    ("village",     "villages",      "Dorf",        "n", "Dörfer",       "",           "town"),
    ("tree",        "trees",         "Baum",        "m", "Bäume",        "",           "landmark tree"),
    ("door",        "doors",         "Tür",         "f", "Türen",        "",           "landmark openable closable"),
    ("window",      "windows",       "Fenster",     "n", "Fenster",      "",           "landmark openable closable"),
])  # fmt: skip


@dataclass(frozen=True)
class Adjective:
    english: str
    german: str  # predicative form: "Der Hund ist dunkel."
    german_stem: str  # attributive stem the endings attach to: "dunkl" + "e" = "dunkle"
    tags: frozenset[str]  # noun tags it fits; "any" fits every noun


def _adjective_table(rows: Iterable[tuple[str, str, str, str]]) -> dict[str, Adjective]:
    adjectives = [Adjective(en, de, stem, _tags(tags)) for en, de, stem, tags in rows]
    return {adjective.english: adjective for adjective in adjectives}


_OBJECTS = "thing clothing vehicle furniture"
ADJECTIVES = _adjective_table([
    # English      German        stem          fits nouns tagged
    ("small",      "klein",      "klein",      "any"),
    ("big",        "groß",       "groß",       "any"),
    ("beautiful",  "schön",      "schön",      "any"),
    ("old",        "alt",        "alt",        f"person animal {_OBJECTS} building town tree"),
    ("new",        "neu",        "neu",        f"person {_OBJECTS} building"),
    ("young",      "jung",       "jung",       "person animal"),
    ("red",        "rot",        "rot",        f"{_OBJECTS} building food"),
    ("green",      "grün",       "grün",       f"{_OBJECTS} building food"),
    ("yellow",     "gelb",       "gelb",       f"{_OBJECTS} building"),
    ("blue",       "blau",       "blau",       f"{_OBJECTS} building"),
    ("black",      "schwarz",    "schwarz",    f"{_OBJECTS} animal"),
    ("white",      "weiß",       "weiß",       f"{_OBJECTS} animal"),
    ("brown",      "braun",      "braun",      f"{_OBJECTS} animal"),
    ("grey",       "grau",       "grau",       f"{_OBJECTS} animal"),
    ("happy",      "glücklich",  "glücklich",  "person animal"),
    ("sad",        "traurig",    "traurig",    "person animal"),
    ("tired",      "müde",       "müd",        "person animal"),
    ("hungry",     "hungrig",    "hungrig",    "person animal"),
    ("friendly",   "freundlich", "freundlich", "person animal"),
    ("clever",     "klug",       "klug",       "person animal"),
    ("lazy",       "faul",       "faul",       "person animal"),
    ("funny",      "lustig",     "lustig",     "person animal"),
    ("strong",     "stark",      "stark",      "person animal"),
    ("loud",       "laut",       "laut",       "person animal"),
    ("brave",      "mutig",      "mutig",      "person"),
    ("fast",       "schnell",    "schnell",    "animal vehicle"),
    ("expensive",  "teuer",      "teur",       _OBJECTS),
    ("cheap",      "billig",     "billig",     _OBJECTS),
    ("heavy",      "schwer",     "schwer",     "thing furniture"),
    ("clean",      "sauber",     "sauber",     f"{_OBJECTS} room"),
    ("dirty",      "schmutzig",  "schmutzig",  f"{_OBJECTS} room animal"),
    ("dark",       "dunkel",     "dunkl",      "room outdoors clothing"),
    ("warm",       "warm",       "warm",       "room clothing food"),
    ("fresh",      "frisch",     "frisch",     "food"),
    ("sweet",      "süß",        "süß",        "food"),
    ("sour",       "sauer",      "saur",       "food"),
    ("empty",      "leer",       "leer",       "container"),
    ("full",       "voll",       "voll",       "container"),
])  # fmt: skip


# Determiners and adjective endings, written out as the grammar books print them.
# Columns: masculine, feminine, neuter, plural. Cases: nominative, accusative, dative.
CASES = ("nom", "acc", "dat")
_COLUMN_OF_GENDER = {"m": 0, "f": 1, "n": 2}
_PLURAL_COLUMN = 3

DEFINITE_ARTICLE = {
    "nom": ("der", "die", "das", "die"),
    "acc": ("den", "die", "das", "die"),
    "dat": ("dem", "der", "dem", "den"),
}
DIESER = {
    "nom": ("dieser", "diese", "dieses", "diese"),
    "acc": ("diesen", "diese", "dieses", "diese"),
    "dat": ("diesem", "dieser", "diesem", "diesen"),
}
# ein, kein and the possessives (mein, sein, ihr, unser) share these endings.
# "ein" has no plural: "a dog" -> "dogs" -> "Hunde".
EIN_WORD_ENDINGS = {
    "nom": ("", "e", "", "e"),
    "acc": ("en", "e", "", "e"),
    "dat": ("em", "er", "em", "en"),
}

# Weak endings follow a der-word, which already shows case and gender.
WEAK_ADJECTIVE_ENDINGS = {
    "nom": ("e", "e", "e", "en"),
    "acc": ("en", "e", "e", "en"),
    "dat": ("en", "en", "en", "en"),
}
# Mixed endings follow an ein-word, which shows nothing in three cells ("ein" for
# nominative masculine and for nominative/accusative neuter), so the adjective does.
MIXED_ADJECTIVE_ENDINGS = {
    "nom": ("er", "e", "es", "en"),
    "acc": ("en", "e", "es", "en"),
    "dat": ("en", "en", "en", "en"),
}
# Strong endings are used when nothing precedes the adjective ("kleine Hunde").
STRONG_ADJECTIVE_ENDINGS = {
    "nom": ("er", "e", "es", "e"),
    "acc": ("en", "e", "es", "e"),
    "dat": ("em", "er", "em", "en"),
}


def _ein_word(stem: str, has_plural: bool = True) -> dict[str, tuple[str, ...]]:
    return {
        case: tuple(stem + ending if has_plural or column != _PLURAL_COLUMN else "" for column, ending in enumerate(endings))
        for case, endings in EIN_WORD_ENDINGS.items()
    }


@dataclass(frozen=True)
class Determiner:
    english: str
    english_plural: str  # "" where English drops the article: "a dog" -> "dogs"
    german: dict[str, tuple[str, ...]]  # case -> (masculine, feminine, neuter, plural); "" = none
    adjective_endings: dict[str, tuple[str, ...]]


DETERMINERS = {
    determiner.english: determiner
    for determiner in (
        Determiner("the", "the", DEFINITE_ARTICLE, WEAK_ADJECTIVE_ENDINGS),
        Determiner("this", "these", DIESER, WEAK_ADJECTIVE_ENDINGS),
        Determiner("a", "", _ein_word("ein", has_plural=False), MIXED_ADJECTIVE_ENDINGS),
        Determiner("no", "no", _ein_word("kein"), MIXED_ADJECTIVE_ENDINGS),
        Determiner("my", "my", _ein_word("mein"), MIXED_ADJECTIVE_ENDINGS),
        Determiner("his", "his", _ein_word("sein"), MIXED_ADJECTIVE_ENDINGS),
        Determiner("her", "her", _ein_word("ihr"), MIXED_ADJECTIVE_ENDINGS),
        Determiner("our", "our", _ein_word("unser"), MIXED_ADJECTIVE_ENDINGS),
    )
}


@dataclass(frozen=True)
class Pronoun:
    english: str
    german: str
    person: int  # 1 or 3
    plural: bool


PRONOUNS = {
    pronoun.english: pronoun
    for pronoun in (
        Pronoun("I", "ich", 1, False),
        Pronoun("he", "er", 3, False),
        Pronoun("she", "sie", 3, False),
        Pronoun("we", "wir", 1, True),
        Pronoun("they", "sie", 3, True),
    )
}


@dataclass(frozen=True)
class Preposition:
    english: str
    german: str
    contraction: str  # German fuses "in dem" into "im"; "" where there is no such form


# All of these take the dative here: they say where something is, not where it goes.
PREPOSITIONS = {
    preposition.english: preposition
    for preposition in (
        Preposition("in", "in", "im"),
        Preposition("under", "unter", ""),
        Preposition("on", "auf", ""),
        Preposition("behind", "hinter", ""),
        Preposition("next to", "neben", ""),
        Preposition("with", "mit", ""),
    )
}


@dataclass(frozen=True)
class Adjunct:
    """A prepositional phrase a verb accepts, and the nouns that make sense after it."""

    preposition: str
    tags: frozenset[str]


def _adjunct(preposition: str, tags: str) -> Adjunct:
    return Adjunct(preposition, _tags(tags))


INDOORS = _adjunct("in", "room building")
OUTDOORS = _adjunct("in", "outdoors")
IN_TOWN = _adjunct("in", "town")
UNDER = _adjunct("under", "furniture tree")
ON = _adjunct("on", "furniture")
BEHIND = _adjunct("behind", "landmark")
NEXT_TO = _adjunct("next to", "landmark furniture")
WITH_COMPANION = _adjunct("with", "person animal")
WITH_TOY = _adjunct("with", "toy")

# Time adverbs that open a sentence and push the German verb before the subject.
OPENING_ADVERBS = {
    "today": "heute",
    "now": "jetzt",
    "tomorrow": "morgen",
    "in the morning": "morgens",
    "in the evening": "abends",
    "at night": "nachts",
    "sometimes": "manchmal",
    "on Sundays": "sonntags",
}
# Frequency adverbs inside the clause: English before the verb, German after it.
MIDDLE_ADVERBS = {
    "often": "oft",
    "always": "immer",
    "sometimes": "manchmal",
    "usually": "meistens",
}
CONJUNCTIONS = {"because": "weil", "that": "dass"}

VALENCIES = ("intransitive", "accusative", "dative", "ditransitive", "clause", "copula")


@dataclass(frozen=True)
class Verb:
    english: str  # base form, also used after I/we/they and "does not"
    english_third: str  # he/she/it form
    german_first: str  # ich-form without the separable particle
    german_third: str  # er/sie/es-form without the particle
    german_plural: str  # wir/sie-form without the particle
    particle: str = ""  # separable prefix: "ruft ... an", "weil ... anruft"
    valency: str = "intransitive"
    subjects: frozenset[str] = frozenset({"person"})
    objects: frozenset[str] = frozenset()  # the accusative object, or the dative one of helfen etc.
    recipients: frozenset[str] = frozenset()  # dative object of ditransitive verbs
    adjuncts: tuple[Adjunct, ...] = ()
    irregular_infinitive: str = ""  # only where it differs from the wir-form: "sein", not "sind"

    @property
    def key(self) -> str:
        """The German infinitive, which tells verbs apart where English does not ("eat": essen/fressen)."""
        return self.irregular_infinitive or self.particle + self.german_plural


_ANIMATE = _tags("person animal")
_PEOPLE = _tags("person")

VERBS = {
    verb.key: verb
    for verb in (
        # intransitive
        Verb("sleep", "sleeps", "schlafe", "schläft", "schlafen", subjects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS, UNDER, ON, NEXT_TO)),
        Verb("laugh", "laughs", "lache", "lacht", "lachen", adjuncts=(WITH_COMPANION,)),
        Verb("run", "runs", "laufe", "läuft", "laufen", subjects=_ANIMATE, adjuncts=(OUTDOORS, WITH_COMPANION)),
        Verb("play", "plays", "spiele", "spielt", "spielen", subjects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS, WITH_COMPANION, WITH_TOY)),
        Verb("sing", "sings", "singe", "singt", "singen", subjects=_tags("person bird"), adjuncts=(INDOORS, OUTDOORS, WITH_COMPANION)),
        Verb("swim", "swims", "schwimme", "schwimmt", "schwimmen", subjects=_tags("person swimmer"), adjuncts=(WITH_COMPANION,)),
        Verb("dance", "dances", "tanze", "tanzt", "tanzen", adjuncts=(INDOORS, OUTDOORS, WITH_COMPANION)),
        Verb("wait", "waits", "warte", "wartet", "warten", subjects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS, BEHIND, NEXT_TO)),
        Verb("work", "works", "arbeite", "arbeitet", "arbeiten", adjuncts=(INDOORS, OUTDOORS, IN_TOWN)),
        Verb("cry", "cries", "weine", "weint", "weinen", adjuncts=(INDOORS,)),
        Verb("sit", "sits", "sitze", "sitzt", "sitzen", subjects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS, UNDER, ON, NEXT_TO)),
        Verb("stand", "stands", "stehe", "steht", "stehen", subjects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS, BEHIND, NEXT_TO)),
        Verb("bark", "barks", "belle", "bellt", "bellen", subjects=_tags("dog"), adjuncts=(OUTDOORS, BEHIND)),
        Verb("fly", "flies", "fliege", "fliegt", "fliegen", subjects=_tags("bird")),
        Verb("get up", "gets up", "stehe", "steht", "stehen", particle="auf"),
        Verb("fall asleep", "falls asleep", "schlafe", "schläft", "schlafen", particle="ein", subjects=_ANIMATE, adjuncts=(INDOORS, ON)),
        Verb("watch TV", "watches TV", "sehe", "sieht", "sehen", particle="fern", adjuncts=(INDOORS, ON, WITH_COMPANION)),
        Verb("go shopping", "goes shopping", "kaufe", "kauft", "kaufen", particle="ein", adjuncts=(IN_TOWN, WITH_COMPANION)),
        # with an accusative object
        Verb("see", "sees", "sehe", "sieht", "sehen", valency="accusative", subjects=_ANIMATE, objects=_tags("person animal thing clothing food vehicle furniture landmark"), adjuncts=(INDOORS, OUTDOORS)),
        Verb("hear", "hears", "höre", "hört", "hören", valency="accusative", subjects=_ANIMATE, objects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS)),
        Verb("find", "finds", "finde", "findet", "finden", valency="accusative", subjects=_ANIMATE, objects=_tags("thing clothing food"), adjuncts=(INDOORS, OUTDOORS, UNDER, BEHIND, NEXT_TO)),
        Verb("look for", "looks for", "suche", "sucht", "suchen", valency="accusative", subjects=_ANIMATE, objects=_tags("person animal thing clothing food"), adjuncts=(INDOORS, OUTDOORS)),
        Verb("buy", "buys", "kaufe", "kauft", "kaufen", valency="accusative", objects=_tags("thing clothing food vehicle animal"), adjuncts=(IN_TOWN,)),
        Verb("sell", "sells", "verkaufe", "verkauft", "verkaufen", valency="accusative", objects=_tags("thing clothing food vehicle animal"), adjuncts=(IN_TOWN,)),
        Verb("eat", "eats", "esse", "isst", "essen", valency="accusative", objects=_tags("food"), adjuncts=(INDOORS, OUTDOORS)),
        # German says "fressen" when an animal eats.
        Verb("eat", "eats", "fresse", "frisst", "fressen", valency="accusative", subjects=_tags("animal"), objects=_tags("food"), adjuncts=(INDOORS, OUTDOORS)),
        Verb("like", "likes", "mag", "mag", "mögen", valency="accusative", objects=_tags("person animal thing clothing food vehicle")),
        Verb("love", "loves", "liebe", "liebt", "lieben", valency="accusative", objects=_ANIMATE),
        Verb("have", "has", "habe", "hat", "haben", valency="accusative", objects=_tags("animal thing clothing food vehicle")),
        Verb("need", "needs", "brauche", "braucht", "brauchen", valency="accusative", objects=_tags("thing clothing vehicle food")),
        Verb("carry", "carries", "trage", "trägt", "tragen", valency="accusative", objects=_tags("thing food")),
        Verb("read", "reads", "lese", "liest", "lesen", valency="accusative", objects=_tags("readable"), adjuncts=(INDOORS, OUTDOORS, ON)),
        Verb("write", "writes", "schreibe", "schreibt", "schreiben", valency="accusative", objects=_tags("writable"), adjuncts=(INDOORS,)),
        Verb("open", "opens", "öffne", "öffnet", "öffnen", valency="accusative", objects=_tags("openable")),
        Verb("close", "closes", "schließe", "schließt", "schließen", valency="accusative", objects=_tags("closable")),
        Verb("wash", "washes", "wasche", "wäscht", "waschen", valency="accusative", objects=_tags("animal clothing vehicle container")),
        Verb("paint", "paints", "male", "malt", "malen", valency="accusative", objects=_tags("person animal thing food vehicle landmark")),
        Verb("hold", "holds", "halte", "hält", "halten", valency="accusative", objects=_tags("thing food")),
        Verb("catch", "catches", "fange", "fängt", "fangen", valency="accusative", subjects=_tags("person hunter"), objects=_tags("catchable")),
        Verb("visit", "visits", "besuche", "besucht", "besuchen", valency="accusative", objects=_tags("person building town")),
        Verb("meet", "meets", "treffe", "trifft", "treffen", valency="accusative", objects=_PEOPLE, adjuncts=(INDOORS, OUTDOORS, IN_TOWN)),
        Verb("ask", "asks", "frage", "fragt", "fragen", valency="accusative", objects=_PEOPLE),
        Verb("call", "calls", "rufe", "ruft", "rufen", particle="an", valency="accusative", objects=_PEOPLE),
        Verb("pick up", "picks up", "hole", "holt", "holen", particle="ab", valency="accusative", objects=_PEOPLE),
        Verb("tidy up", "tidies up", "räume", "räumt", "räumen", particle="auf", valency="accusative", objects=_tags("room")),
        Verb("put on", "puts on", "ziehe", "zieht", "ziehen", particle="an", valency="accusative", objects=_tags("clothing")),
        Verb("cook", "cooks", "koche", "kocht", "kochen", valency="accusative", objects=_tags("cookable"), adjuncts=(INDOORS,)),
        Verb("bake", "bakes", "backe", "backt", "backen", valency="accusative", objects=_tags("bakeable"), adjuncts=(INDOORS,)),
        Verb("throw", "throws", "werfe", "wirft", "werfen", valency="accusative", objects=_tags("throwable"), adjuncts=(OUTDOORS,)),
        Verb("build", "builds", "baue", "baut", "bauen", valency="accusative", objects=_tags("buildable"), adjuncts=(OUTDOORS,)),
        Verb("feed", "feeds", "füttere", "füttert", "füttern", valency="accusative", objects=_tags("animal"), adjuncts=(OUTDOORS,)),
        # with a dative object where English has a plain object
        Verb("help", "helps", "helfe", "hilft", "helfen", valency="dative", objects=_ANIMATE, adjuncts=(INDOORS, OUTDOORS)),
        Verb("follow", "follows", "folge", "folgt", "folgen", valency="dative", subjects=_ANIMATE, objects=_ANIMATE, adjuncts=(OUTDOORS, IN_TOWN)),
        Verb("thank", "thanks", "danke", "dankt", "danken", valency="dative", objects=_PEOPLE),
        # someone (dative) something (accusative)
        Verb("give", "gives", "gebe", "gibt", "geben", valency="ditransitive", recipients=_ANIMATE, objects=_tags("thing clothing food")),
        Verb("show", "shows", "zeige", "zeigt", "zeigen", valency="ditransitive", recipients=_PEOPLE, objects=_tags("animal thing clothing food vehicle")),
        Verb("bring", "brings", "bringe", "bringt", "bringen", valency="ditransitive", recipients=_ANIMATE, objects=_tags("thing food")),
        Verb("send", "sends", "schicke", "schickt", "schicken", valency="ditransitive", recipients=_PEOPLE, objects=_tags("sendable")),
        # followed by "that ..."
        Verb("know", "knows", "weiß", "weiß", "wissen", valency="clause"),
        Verb("say", "says", "sage", "sagt", "sagen", valency="clause"),
        Verb("think", "thinks", "glaube", "glaubt", "glauben", valency="clause"),
        Verb("hope", "hopes", "hoffe", "hofft", "hoffen", valency="clause"),
        # "to be" with a predicate adjective; English "am" is special-cased
        Verb("be", "is", "bin", "ist", "sind", valency="copula", subjects=_tags("any"), irregular_infinitive="sein"),
    )
}  # fmt: skip


# --------------------------------------------------------------------------------------
# mini-translation: sentence structure and rendering
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NounPhrase:
    noun: str  # key into NOUNS (English singular)
    determiner: str = "the"  # key into DETERMINERS
    adjective: str | None = None  # key into ADJECTIVES
    plural: bool = False


@dataclass(frozen=True)
class PrepositionalPhrase:
    preposition: str  # key into PREPOSITIONS
    noun_phrase: NounPhrase


@dataclass(frozen=True)
class Clause:
    subject: NounPhrase | str  # a noun phrase or a key into PRONOUNS
    verb: str  # key into VERBS: the German infinitive
    object: NounPhrase | None = None  # accusative, or dative for helfen/folgen/danken
    recipient: NounPhrase | None = None  # dative object of ditransitive verbs
    predicate: str | None = None  # adjective key, with verb "sein"
    adjunct: PrepositionalPhrase | None = None
    adverb: str | None = None  # key into MIDDLE_ADVERBS
    negated: bool = False


@dataclass(frozen=True)
class Sentence:
    main: Clause
    opener: str | None = None  # key into OPENING_ADVERBS
    conjunction: str | None = None  # key into CONJUNCTIONS
    subordinate: Clause | None = None
    subordinate_first: bool = False  # "Because ..., ..." (only with "because")


def _article_an(word: str) -> str:
    # Spelling is a good enough guide to pronunciation for this vocabulary.
    return "an" if word[0] in "aeiou" else "a"


def english_noun_phrase(determiner: str, adjective: str | None, noun: str, plural: bool = False) -> str:
    """English noun phrase: "the small dog", "an old car", "these red balls", "small dogs"."""
    entry = NOUNS[noun]
    words = [ADJECTIVES[adjective].english] if adjective else []
    words.append(entry.english_plural if plural else entry.english)
    article = DETERMINERS[determiner].english_plural if plural else determiner
    if article == "a":
        article = _article_an(words[0])
    return " ".join([article, *words] if article else words)


def german_noun_phrase(determiner: str, adjective: str | None, noun: str, case: str, plural: bool = False) -> str:
    """The German noun phrase with agreeing article, adjective and noun.

    german_noun_phrase("a", "small", "dog", "acc") -> "einen kleinen Hund"
    """
    if case not in CASES:
        raise ValueError(f"case must be one of {CASES}, got {case!r}")
    entry = NOUNS[noun]
    column = _PLURAL_COLUMN if plural else _COLUMN_OF_GENDER[entry.gender]
    kind = DETERMINERS[determiner]
    article = kind.german[case][column]
    words = [article] if article else []
    if adjective:
        # With no article in front, the adjective has to show case and gender itself.
        endings = kind.adjective_endings if article else STRONG_ADJECTIVE_ENDINGS
        words.append(ADJECTIVES[adjective].german_stem + endings[case][column])
    if plural:
        # Dative plural adds -n unless the plural already ends in -n or -s.
        needs_n = case == "dat" and not entry.german_plural.endswith(("n", "s"))
        words.append(entry.german_plural + ("n" if needs_n else ""))
    else:
        words.append(entry.weak_form if entry.weak_form and case != "nom" else entry.german)
    return " ".join(words)


def german_prepositional_phrase(preposition: str, noun_phrase: NounPhrase) -> str:
    """German prepositional phrase, always dative: "im dunklen Wald", "in der Küche", "mit den kleinen Hunden"."""
    entry = PREPOSITIONS[preposition]
    phrase = german_noun_phrase(noun_phrase.determiner, noun_phrase.adjective, noun_phrase.noun, "dat", noun_phrase.plural)
    if entry.contraction and phrase.startswith("dem "):
        return f"{entry.contraction} {phrase.removeprefix('dem ')}"
    return f"{entry.german} {phrase}"


def _english_phrase(phrase: NounPhrase) -> str:
    return english_noun_phrase(phrase.determiner, phrase.adjective, phrase.noun, phrase.plural)


def _german_phrase(phrase: NounPhrase, case: str) -> str:
    return german_noun_phrase(phrase.determiner, phrase.adjective, phrase.noun, case, phrase.plural)


def _person_and_number(subject: NounPhrase | str) -> tuple[int, bool]:
    if isinstance(subject, NounPhrase):
        return 3, subject.plural
    pronoun = PRONOUNS[subject]
    return pronoun.person, pronoun.plural


def _english_clause(clause: Clause) -> list[str]:
    verb = VERBS[clause.verb]
    person, plural = _person_and_number(clause.subject)
    third_singular = person == 3 and not plural
    subject = _english_phrase(clause.subject) if isinstance(clause.subject, NounPhrase) else clause.subject
    words = [subject]
    if verb.valency == "copula":
        be = "am" if person == 1 and not plural else verb.english_third if third_singular else "are"
        words += [be, "not"] if clause.negated else [be]
        words.append(ADJECTIVES[clause.predicate].english)
        return words
    if clause.negated:
        words += ["does" if third_singular else "do", "not", verb.english]
    else:
        if clause.adverb:
            words.append(clause.adverb)
        words.append(verb.english_third if third_singular else verb.english)
    if clause.recipient:
        words.append(_english_phrase(clause.recipient))
    if clause.object:
        words.append(_english_phrase(clause.object))
    if clause.adjunct:
        words += [clause.adjunct.preposition, _english_phrase(clause.adjunct.noun_phrase)]
    return words


@dataclass(frozen=True)
class _GermanClause:
    """A German clause taken apart so it can be put together in main or subordinate order."""

    subject: str
    finite_verb: str
    middle: list[str]  # everything between the verb positions
    particle: str


def _german_clause(clause: Clause) -> _GermanClause:
    verb = VERBS[clause.verb]
    person, plural = _person_and_number(clause.subject)
    finite = verb.german_plural if plural else verb.german_first if person == 1 else verb.german_third
    if isinstance(clause.subject, NounPhrase):
        subject = _german_phrase(clause.subject, "nom")
    else:
        subject = PRONOUNS[clause.subject].german

    # "does not see a dog" is "sieht keinen Hund": an indefinite object absorbs the
    # negation as "kein"; anything else gets "nicht" after the objects.
    obj = clause.object
    needs_nicht = clause.negated
    if clause.negated and obj and obj.determiner == "a":
        obj = dataclasses.replace(obj, determiner="no")
        needs_nicht = False

    middle: list[str] = []
    if clause.recipient:
        middle.append(_german_phrase(clause.recipient, "dat"))
    if obj and verb.valency == "dative":
        middle.append(_german_phrase(obj, "dat"))
    if clause.adverb:
        middle.append(MIDDLE_ADVERBS[clause.adverb])
    if obj and verb.valency != "dative":
        middle.append(_german_phrase(obj, "acc"))
    if needs_nicht:
        middle.append("nicht")
    if clause.predicate:
        middle.append(ADJECTIVES[clause.predicate].german)
    if clause.adjunct:
        middle.append(german_prepositional_phrase(clause.adjunct.preposition, clause.adjunct.noun_phrase))
    return _GermanClause(subject, finite, middle, verb.particle)


def _german_main_clause(clause: Clause, first_position: list[str] | None = None) -> list[str]:
    """Verb-second: exactly one constituent precedes the finite verb; a particle goes last."""
    parts = _german_clause(clause)
    if first_position:
        words = [*first_position, parts.finite_verb, parts.subject, *parts.middle]
    else:
        words = [parts.subject, parts.finite_verb, *parts.middle]
    return words + ([parts.particle] if parts.particle else [])


def _german_subordinate_clause(clause: Clause) -> list[str]:
    """Verb-final: the finite verb, rejoined with its particle ("anruft"), ends the clause."""
    parts = _german_clause(clause)
    return [parts.subject, *parts.middle, parts.particle + parts.finite_verb]


def _with_comma(words: list[str]) -> list[str]:
    return [*words[:-1], words[-1] + ","]


def _finish(words: list[str]) -> str:
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def translate(sentence: Sentence) -> Pair:
    """Render a sentence structure as an (English, German) pair."""
    for clause in (sentence.main, sentence.subordinate):
        if clause and clause.negated and clause.adverb:
            raise ValueError("a clause cannot be both negated and carry a frequency adverb")
    if (sentence.subordinate is None) != (sentence.conjunction is None):
        raise ValueError("a subordinate clause needs a conjunction and vice versa")
    if sentence.subordinate_first and (sentence.opener or sentence.conjunction != "because"):
        raise ValueError("only a 'because' clause can come first, and then it replaces the opening adverb")

    english_main = _english_clause(sentence.main)
    opener = [sentence.opener] if sentence.opener else []
    german_opener = [OPENING_ADVERBS[sentence.opener]] if sentence.opener else None
    if sentence.subordinate is None:
        return _finish(opener + english_main), _finish(_german_main_clause(sentence.main, german_opener))

    english_sub = [sentence.conjunction, *_english_clause(sentence.subordinate)]
    german_sub = [CONJUNCTIONS[sentence.conjunction], *_german_subordinate_clause(sentence.subordinate)]
    if sentence.subordinate_first:
        # The whole subordinate clause fills the first position, so the verb follows it.
        english = _with_comma(english_sub) + english_main
        german = _german_main_clause(sentence.main, _with_comma(german_sub))
    else:
        english = opener + english_main + english_sub
        german = _with_comma(_german_main_clause(sentence.main, german_opener)) + german_sub
    return _finish(english), _finish(german)


# --------------------------------------------------------------------------------------
# mini-translation: random sentences
# --------------------------------------------------------------------------------------

# How often each determiner is drawn; "no" is kept rare because it reads oddly when overused.
DETERMINER_WEIGHTS = {"the": 45, "a": 30, "this": 7, "my": 4, "his": 3, "her": 3, "our": 3, "no": 5}
POSSESSIVES = ("my", "his", "her", "our")
VALENCY_WEIGHTS = {"intransitive": 26, "accusative": 40, "dative": 8, "ditransitive": 12, "copula": 14}


def _fits(tags: frozenset[str], wanted: frozenset[str]) -> bool:
    return "any" in wanted or not tags.isdisjoint(wanted)


@functools.cache
def _nouns_fitting(wanted: frozenset[str]) -> tuple[Noun, ...]:
    return tuple(noun for noun in NOUNS.values() if _fits(noun.tags, wanted))


@functools.cache
def _adjectives_fitting(noun_tags: frozenset[str]) -> tuple[str, ...]:
    return tuple(adjective.english for adjective in ADJECTIVES.values() if _fits(noun_tags, adjective.tags))


class _SentenceSampler:
    """Draws random sentences whose nouns fit their verbs, adjectives and prepositions."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        # Lists, not sets: iteration order must not depend on string hashing, or the
        # same seed would give different data in different processes.
        self.verbs_by_valency = {
            valency: [verb for verb in VERBS.values() if verb.valency == valency] for valency in VALENCIES
        }

    def sentence(self) -> Sentence:
        roll = self.rng.random()
        if roll < 0.15 and self.rng.random() < 0.3:
            return Sentence(self.clause(), conjunction="because", subordinate=self.clause(), subordinate_first=True)
        opener = self.rng.choice(list(OPENING_ADVERBS)) if self.rng.random() < 0.3 else None
        # "Sometimes the dog often sleeps": one time adverb per clause is enough.
        main_allows_adverb = opener is None
        if roll < 0.15:
            main = self.clause(allow_adverb=main_allows_adverb)
            return Sentence(main, opener, conjunction="because", subordinate=self.clause())
        if roll < 0.25:
            main = self.clause("clause", allow_adverb=main_allows_adverb)
            return Sentence(main, opener, conjunction="that", subordinate=self.clause())
        return Sentence(self.clause(allow_adverb=main_allows_adverb), opener)

    def clause(self, valency: str | None = None, allow_adverb: bool = True) -> Clause:
        rng = self.rng
        if valency is None:
            valency = rng.choices(list(VALENCY_WEIGHTS), weights=list(VALENCY_WEIGHTS.values()))[0]
        verb = rng.choice(self.verbs_by_valency[valency])
        negated = rng.random() < 0.15
        # "No dog does not sleep" is a double negative; keep "no" out of negated clauses.
        allow_no = not negated
        subject = self.subject(verb.subjects, allow_no)
        subject_noun = subject.noun if isinstance(subject, NounPhrase) else None
        subject_tags = NOUNS[subject_noun].tags if subject_noun else _PEOPLE

        if valency == "copula":
            attributive = subject.adjective if isinstance(subject, NounPhrase) else None
            predicates = [a for a in _adjectives_fitting(subject_tags) if a != attributive]
            return Clause(subject, verb.key, predicate=rng.choice(predicates), negated=negated)

        used = {subject_noun}
        recipient = None
        if verb.recipients:
            recipient = self.noun_phrase(verb.recipients, used, allow_no=False)
            used.add(recipient.noun)
        obj = self.noun_phrase(verb.objects, used, allow_no) if verb.objects else None
        if obj:
            used.add(obj.noun)
        adjunct = None
        if verb.adjuncts and rng.random() < 0.3:
            frame = rng.choice(verb.adjuncts)
            # "in the gardens" sounds odd; "with the dogs" does not.
            companion = frame.preposition == "with"
            phrase = self.noun_phrase(frame.tags, used, allow_no=False, allow_plural=companion)
            adjunct = PrepositionalPhrase(frame.preposition, phrase)
        adverb = None
        if allow_adverb and not negated and rng.random() < 0.1:
            adverb = rng.choice(list(MIDDLE_ADVERBS))
        return Clause(subject, verb.key, obj, recipient, adjunct=adjunct, adverb=adverb, negated=negated)

    def subject(self, tags: frozenset[str], allow_no: bool) -> NounPhrase | str:
        # Pronouns stand for people only, so an animal verb never gets "they" as subject.
        if ("person" in tags or "any" in tags) and self.rng.random() < 0.15:
            return self.rng.choice(list(PRONOUNS))
        return self.noun_phrase(tags, set(), allow_no)

    def noun_phrase(
        self,
        tags: frozenset[str],
        exclude: set[str | None],
        allow_no: bool,
        allow_plural: bool = True,
    ) -> NounPhrase:
        rng = self.rng
        noun = rng.choice([n for n in _nouns_fitting(tags) if n.english not in exclude])
        plural = allow_plural and rng.random() < 0.2
        determiners = [d for d in DETERMINER_WEIGHTS if allow_no or d != "no"]
        if "generic" in noun.tags:
            # "mein Mann" and "meine Frau" mean husband and wife, not "my man"/"my woman".
            determiners = [d for d in determiners if d not in POSSESSIVES]
        determiner = rng.choices(determiners, weights=[DETERMINER_WEIGHTS[d] for d in determiners])[0]
        adjective = None
        if rng.random() < 0.35:
            adjective = rng.choice(_adjectives_fitting(noun.tags))
        return NounPhrase(noun.english, determiner, adjective, plural)


def generate_mini_translation(seed: int = 0) -> Split:
    """~10,000 training and 500 held-out English->German sentence pairs from the toy grammar."""
    sampler = _SentenceSampler(random.Random(seed))
    return _draw_split(lambda: translate(sampler.sentence()), train_size=10_000, test_size=TEST_SIZE)


# --------------------------------------------------------------------------------------
# registry and files
# --------------------------------------------------------------------------------------

BUILTIN_DATASETS = {
    dataset.name: dataset
    for dataset in (
        BuiltinDataset(
            name="reverse",
            title="Sequence reversal",
            description=(
                "Random sequences of 4-12 symbols (a-z, 0-9), separated by spaces; the target is the "
                "same sequence backwards. Needs no language knowledge, so it shows whether attention "
                "has learned to look at the right source position."
            ),
            src_lang="seq",
            tgt_lang="rev",
            generate=generate_reverse,
        ),
        BuiltinDataset(
            name="numbers",
            title="Number words, English to German",
            description=(
                "Integers below one million written out in English ('four hundred twenty-one') and "
                "German ('vierhunderteinundzwanzig'). German swaps units and tens and writes the "
                "whole number as one word."
            ),
            src_lang="en",
            tgt_lang="de",
            generate=generate_numbers,
        ),
        BuiltinDataset(
            name="mini-translation",
            title="Mini translation, English to German",
            description=(
                f"Sentences from a small grammar ({len(NOUNS)} nouns, {len(ADJECTIVES)} adjectives, "
                f"{len(VERBS)} verbs) with their "
                "German translation: articles and adjectives agree in gender, number and case; "
                "the verb comes second after an opening adverb, last in 'weil'/'dass' clauses; "
                "separable verbs split ('ruft ... an')."
            ),
            src_lang="en",
            tgt_lang="de",
            generate=generate_mini_translation,
        ),
    )
}


def _write_tsv(path: Path, languages: Pair, pairs: list[Pair]) -> None:
    lines = ["\t".join(languages), *("\t".join(pair) for pair in pairs)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")


def _readme(splits: dict[str, Split], seed: int) -> str:
    lines = [
        "# Built-in datasets",
        "",
        "Generated by `playground/datasets/lexicon.py`; no data comes from outside the project.",
        "Regenerate (byte-identical for the same seed) with:",
        "",
        "```",
        f"python -m playground.datasets.lexicon --out assets/datasets --seed {seed}",
        "```",
        "",
        "Each folder holds `train.tsv` and `test.tsv`: UTF-8, a header line with the two language",
        "codes, then one tab-separated pair per line. Test pairs share neither source nor target",
        "with the training pairs.",
    ]
    for name, (train, test) in splits.items():
        dataset = BUILTIN_DATASETS[name]
        lines += [
            "",
            f"## {name}: {dataset.title}",
            "",
            dataset.description,
            "",
            f"- languages: `{dataset.src_lang}` -> `{dataset.tgt_lang}`",
            f"- pairs: {len(train)} train, {len(test)} test",
            "- examples:",
            "",
            *(f"  - `{source}` -> `{target}`" for source, target in train[:3]),
        ]
    return "\n".join(lines) + "\n"


def write_builtin_datasets(out_dir: str | Path = DATASETS_DIR, seed: int = 0) -> list[Path]:
    """Write train.tsv and test.tsv for every built-in dataset, plus README.md; return the paths."""
    out = Path(out_dir)
    written: list[Path] = []
    splits: dict[str, Split] = {}
    for name, dataset in BUILTIN_DATASETS.items():
        train, test = splits[name] = dataset.generate(seed)
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for split_name, pairs in (("train", train), ("test", test)):
            path = folder / f"{split_name}.tsv"
            _write_tsv(path, (dataset.src_lang, dataset.tgt_lang), pairs)
            written.append(path)
    readme = out / "README.md"
    readme.write_text(_readme(splits, seed), encoding="utf-8", newline="\n")
    written.append(readme)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Regenerate the built-in datasets.")
    parser.add_argument("--out", default=DATASETS_DIR, help="output folder (default: assets/datasets)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args(argv)
    for path in write_builtin_datasets(args.out, args.seed):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
