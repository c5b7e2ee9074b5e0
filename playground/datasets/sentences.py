"""Mini-translation sentence structures and their rendering as an (English, German) pair: agreement in gender,
number and case, verb-second main clauses, verb-final subordinate clauses and separable verbs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from playground.datasets.declension import (
    CASES,
    COLUMN_OF_GENDER,
    DETERMINERS,
    PLURAL_COLUMN,
    STRONG_ADJECTIVE_ENDINGS,
)
from playground.datasets.lexicon import (
    ADJECTIVES,
    CONJUNCTIONS,
    MIDDLE_ADVERBS,
    NOUNS,
    OPENING_ADVERBS,
    PREPOSITIONS,
    PRONOUNS,
)
from playground.datasets.split import Pair
from playground.datasets.verbs import VERBS


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
    column = PLURAL_COLUMN if plural else COLUMN_OF_GENDER[entry.gender]
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
    phrase = german_noun_phrase(noun_phrase.determiner, noun_phrase.adjective, noun_phrase.noun, "dat",
                                noun_phrase.plural)
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
