"""The mini-translation lexicon: nouns, adjectives, pronouns, prepositions, adverbs and conjunctions, English
with German.

Tags say what a noun can do in a sentence; verbs, adjectives and prepositions list the tags they accept, so the
generator says "the cat catches a mouse" but never "the soup reads a dog". "generic" marks nouns that take no
possessive (see playground.datasets.mini_translation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


def tag_set(text: str) -> frozenset[str]:
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
    nouns = [Noun(en, en_pl, de, gender, de_pl, weak, tag_set(tags)) for en, en_pl, de, gender, de_pl, weak, tags in rows]
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
    adjectives = [Adjective(en, de, stem, tag_set(tags)) for en, de, stem, tags in rows]
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
