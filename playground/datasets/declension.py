"""German determiners and adjective endings by case, gender and number, as the grammar books print them."""

from __future__ import annotations

from dataclasses import dataclass

# Columns: masculine, feminine, neuter, plural. Cases: nominative, accusative, dative.
CASES = ("nom", "acc", "dat")
COLUMN_OF_GENDER = {"m": 0, "f": 1, "n": 2}
PLURAL_COLUMN = 3

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
        case: tuple(stem + ending if has_plural or column != PLURAL_COLUMN else ""
                    for column, ending in enumerate(endings))
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
