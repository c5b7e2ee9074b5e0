"""The mini-translation dataset's German grammar: noun phrases agree in case, gender and number; verbs go second in
main clauses and last in subordinate ones; hand-checked sentences translate as a grammar book would."""

from __future__ import annotations

import pytest
from helpers import builtin_split as generated

from playground.datasets.lexicon import ADJECTIVES, NOUNS, OPENING_ADVERBS
from playground.datasets.sentences import (
    Clause,
    NounPhrase,
    PrepositionalPhrase,
    Sentence,
    english_noun_phrase,
    german_noun_phrase,
    german_prepositional_phrase,
    translate,
)
from playground.datasets.verbs import VERBS


def german_words(sentence: str) -> list[str]:
    return sentence.rstrip(".").replace(",", "").split()


# --------------------------------------------------------------------------------------
# mini-translation: noun phrases
# --------------------------------------------------------------------------------------

HAND_CHECKED_NOUN_PHRASES = [
    # determiner, adjective, noun, case, plural, German
    ("the", "small", "dog", "nom", False, "der kleine Hund"),
    ("the", "small", "dog", "acc", False, "den kleinen Hund"),
    ("the", "small", "dog", "dat", False, "dem kleinen Hund"),
    ("a", "small", "dog", "nom", False, "ein kleiner Hund"),
    ("a", "small", "dog", "acc", False, "einen kleinen Hund"),
    ("a", "small", "dog", "dat", False, "einem kleinen Hund"),
    ("the", "red", "cup", "nom", False, "die rote Tasse"),
    ("the", "red", "cup", "acc", False, "die rote Tasse"),
    ("the", "red", "cup", "dat", False, "der roten Tasse"),
    ("a", "black", "cat", "nom", False, "eine schwarze Katze"),
    ("a", "black", "cat", "acc", False, "eine schwarze Katze"),
    ("a", "black", "cat", "dat", False, "einer schwarzen Katze"),
    ("the", "red", "car", "nom", False, "das rote Auto"),
    ("the", "red", "car", "acc", False, "das rote Auto"),
    ("the", "red", "car", "dat", False, "dem roten Auto"),
    ("a", "red", "car", "nom", False, "ein rotes Auto"),
    ("a", "red", "car", "acc", False, "ein rotes Auto"),
    ("a", "red", "car", "dat", False, "einem roten Auto"),
    ("no", "old", "horse", "nom", False, "kein altes Pferd"),
    ("no", "old", "man", "acc", False, "keinen alten Mann"),
    ("my", "old", "cat", "dat", False, "meiner alten Katze"),
    ("our", "new", "car", "dat", False, "unserem neuen Auto"),
    ("her", "big", "dog", "acc", False, "ihren großen Hund"),
    ("this", "small", "dog", "nom", False, "dieser kleine Hund"),
    ("this", "red", "car", "acc", False, "dieses rote Auto"),
    ("this", "black", "cat", "dat", False, "dieser schwarzen Katze"),
    # plural: weak after der-words and ein-words, strong with no determiner
    ("the", "small", "dog", "nom", True, "die kleinen Hunde"),
    ("the", "small", "dog", "dat", True, "den kleinen Hunden"),
    ("a", "small", "dog", "nom", True, "kleine Hunde"),
    ("a", "small", "dog", "acc", True, "kleine Hunde"),
    ("a", "small", "dog", "dat", True, "kleinen Hunden"),
    ("no", "small", "dog", "nom", True, "keine kleinen Hunde"),
    ("my", "small", "dog", "dat", True, "meinen kleinen Hunden"),
    ("this", "small", "dog", "acc", True, "diese kleinen Hunde"),
    # dative plural -n only where the plural does not end in -n or -s
    ("the", None, "child", "dat", True, "den Kindern"),
    ("the", None, "car", "dat", True, "den Autos"),
    ("the", None, "woman", "dat", True, "den Frauen"),
    # weak masculine nouns
    ("the", None, "boy", "nom", False, "der Junge"),
    ("a", "small", "boy", "acc", False, "einen kleinen Jungen"),
    ("the", None, "bear", "dat", False, "dem Bären"),
    ("the", None, "neighbor", "acc", False, "den Nachbarn"),
    # adjectives whose stem drops an e
    ("a", "expensive", "coat", "acc", False, "einen teuren Mantel"),
    ("the", "dark", "forest", "dat", False, "dem dunklen Wald"),
    ("a", "sour", "apple", "nom", False, "ein saurer Apfel"),
    # no adjective
    ("a", None, "dog", "nom", False, "ein Hund"),
    ("a", None, "dog", "nom", True, "Hunde"),
]


@pytest.mark.parametrize(("determiner", "adjective", "noun", "case", "plural", "german"), HAND_CHECKED_NOUN_PHRASES)
def test_german_noun_phrase_agreement(
    determiner: str, adjective: str | None, noun: str, case: str, plural: bool, german: str
) -> None:
    assert german_noun_phrase(determiner, adjective, noun, case, plural) == german


@pytest.mark.parametrize(
    ("determiner", "adjective", "noun", "plural", "english"),
    [
        ("the", "small", "dog", False, "the small dog"),
        ("a", "old", "dog", False, "an old dog"),
        ("a", None, "umbrella", False, "an umbrella"),
        ("a", "red", "apple", False, "a red apple"),
        ("a", "small", "mouse", True, "small mice"),
        ("this", None, "child", True, "these children"),
        ("no", None, "dog", True, "no dogs"),
        ("her", "big", "box", True, "her big boxes"),
    ],
)
def test_english_noun_phrase(determiner: str, adjective: str | None, noun: str, plural: bool, english: str) -> None:
    assert english_noun_phrase(determiner, adjective, noun, plural) == english


@pytest.mark.parametrize(
    ("preposition", "phrase", "german"),
    [
        ("in", NounPhrase("forest", "the", "dark"), "im dunklen Wald"),
        ("in", NounPhrase("house"), "im Haus"),
        ("in", NounPhrase("kitchen"), "in der Küche"),
        ("in", NounPhrase("house", "a"), "in einem Haus"),
        ("in", NounPhrase("garden", "this"), "in diesem Garten"),
        ("under", NounPhrase("table"), "unter dem Tisch"),
        ("next to", NounPhrase("bed", "my"), "neben meinem Bett"),
        ("with", NounPhrase("dog", "the", "small", plural=True), "mit den kleinen Hunden"),
        ("with", NounPhrase("dog", "a", plural=True), "mit Hunden"),
    ],
)
def test_german_prepositional_phrase(preposition: str, phrase: NounPhrase, german: str) -> None:
    assert german_prepositional_phrase(preposition, phrase) == german


# --------------------------------------------------------------------------------------
# mini-translation: whole sentences
# --------------------------------------------------------------------------------------

THE_DOG = NounPhrase("dog")
THE_MAN = NounPhrase("man")
THE_WOMAN = NounPhrase("woman")
THE_CHILD = NounPhrase("child")

HAND_CHECKED_SENTENCES = [
    (Sentence(Clause(NounPhrase("dog", "the", "small"), "sehen", NounPhrase("ball", "a", "red"))),
     "The small dog sees a red ball.", "Der kleine Hund sieht einen roten Ball."),
    (Sentence(Clause(THE_MAN, "sehen", THE_DOG), opener="today"),
     "Today the man sees the dog.", "Heute sieht der Mann den Hund."),
    (Sentence(Clause(THE_WOMAN, "anrufen", THE_MAN)),
     "The woman calls the man.", "Die Frau ruft den Mann an."),
    (Sentence(Clause(THE_WOMAN, "anrufen", THE_MAN), opener="in the morning"),
     "In the morning the woman calls the man.", "Morgens ruft die Frau den Mann an."),
    (Sentence(Clause(THE_CHILD, "lachen"), conjunction="because", subordinate=Clause(THE_WOMAN, "anrufen", THE_MAN)),
     "The child laughs because the woman calls the man.", "Das Kind lacht, weil die Frau den Mann anruft."),
    (Sentence(Clause(THE_CHILD, "lachen"), conjunction="because", subordinate=Clause(THE_DOG, "schlafen"),
              subordinate_first=True),
     "Because the dog sleeps, the child laughs.", "Weil der Hund schläft, lacht das Kind."),
    (Sentence(Clause(THE_WOMAN, "wissen", negated=True), conjunction="that", subordinate=Clause(THE_DOG, "schlafen")),
     "The woman does not know that the dog sleeps.", "Die Frau weiß nicht, dass der Hund schläft."),
    (Sentence(Clause(THE_MAN, "haben", NounPhrase("dog", "a"), negated=True)),
     "The man does not have a dog.", "Der Mann hat keinen Hund."),
    (Sentence(Clause(THE_MAN, "sehen", NounPhrase("dog", "a", plural=True), negated=True)),
     "The man does not see dogs.", "Der Mann sieht keine Hunde."),
    (Sentence(Clause(THE_MAN, "sehen", THE_DOG, negated=True)),
     "The man does not see the dog.", "Der Mann sieht den Hund nicht."),
    (Sentence(Clause("he", "aufstehen", negated=True)),
     "He does not get up.", "Er steht nicht auf."),
    (Sentence(Clause(THE_WOMAN, "helfen", THE_CHILD)),
     "The woman helps the child.", "Die Frau hilft dem Kind."),
    (Sentence(Clause(THE_DOG, "folgen", NounPhrase("boy"))),
     "The dog follows the boy.", "Der Hund folgt dem Jungen."),
    (Sentence(Clause(THE_WOMAN, "geben", NounPhrase("apple", "a"), recipient=THE_CHILD)),
     "The woman gives the child an apple.", "Die Frau gibt dem Kind einen Apfel."),
    (Sentence(Clause(THE_WOMAN, "geben", NounPhrase("apple", "a"), recipient=THE_CHILD, negated=True)),
     "The woman does not give the child an apple.", "Die Frau gibt dem Kind keinen Apfel."),
    (Sentence(Clause(THE_CHILD, "spielen", adjunct=PrepositionalPhrase("in", NounPhrase("garden")))),
     "The child plays in the garden.", "Das Kind spielt im Garten."),
    (Sentence(Clause(THE_MAN, "lesen", NounPhrase("newspaper"), adverb="often")),
     "The man often reads the newspaper.", "Der Mann liest oft die Zeitung."),
    (Sentence(Clause("I", "essen", NounPhrase("apple", "a"))),
     "I eat an apple.", "Ich esse einen Apfel."),
    (Sentence(Clause(THE_DOG, "fressen", NounPhrase("cake"))),
     "The dog eats the cake.", "Der Hund frisst den Kuchen."),
    (Sentence(Clause("I", "sein", predicate="tired")), "I am tired.", "Ich bin müde."),
    (Sentence(Clause("we", "sein", predicate="tired", negated=True)), "We are not tired.", "Wir sind nicht müde."),
    (Sentence(Clause(NounPhrase("cat", "a", plural=True), "sein", predicate="hungry")),
     "Cats are hungry.", "Katzen sind hungrig."),
    (Sentence(Clause("they", "lachen"), conjunction="because",
              subordinate=Clause("I", "einschlafen", adjunct=PrepositionalPhrase("on", NounPhrase("sofa")))),
     "They laugh because I fall asleep on the sofa.", "Sie lachen, weil ich auf dem Sofa einschlafe."),
    (Sentence(Clause("she", "fernsehen"), opener="at night"),
     "At night she watches TV.", "Nachts sieht sie fern."),
]  # fmt: skip


@pytest.mark.parametrize(("sentence", "english", "german"), HAND_CHECKED_SENTENCES)
def test_hand_checked_sentences(sentence: Sentence, english: str, german: str) -> None:
    assert translate(sentence) == (english, german)


def test_translate_refuses_inconsistent_structures() -> None:
    with pytest.raises(ValueError):
        translate(Sentence(Clause(THE_DOG, "schlafen", adverb="often", negated=True)))
    with pytest.raises(ValueError):
        translate(Sentence(Clause(THE_DOG, "schlafen"), conjunction="because"))


FINITE_FORMS = {form for verb in VERBS.values() for form in (verb.german_first, verb.german_third, verb.german_plural)}
# In a verb-final clause a separable verb is written in one piece again: "anruft".
CLAUSE_FINAL_FORMS = {
    verb.particle + form
    for verb in VERBS.values()
    for form in (verb.german_first, verb.german_third, verb.german_plural)
}


def test_generated_sentences_starting_with_an_adverb_put_the_verb_second() -> None:
    train, _ = generated("mini-translation")
    checked = 0
    for english, german in train:
        opener = next((o for o in OPENING_ADVERBS if english.startswith(o[0].upper() + o[1:] + " ")), None)
        if opener is None:
            continue
        words = german_words(german)
        assert words[0] == OPENING_ADVERBS[opener].capitalize(), german
        assert words[1] in FINITE_FORMS, german
        checked += 1
    assert checked > 1000


def test_generated_subordinate_clauses_put_the_verb_last() -> None:
    train, _ = generated("mini-translation")
    checked = 0
    for _, german in train:
        if german.startswith("Weil "):
            subordinate, main = german.split(", ", 1)
            assert german_words(subordinate)[-1] in CLAUSE_FINAL_FORMS, german
            # the whole clause is the first constituent, so the main verb follows at once
            assert german_words(main)[0] in FINITE_FORMS, german
            checked += 1
        elif ", weil " in german or ", dass " in german:
            assert german_words(german)[-1] in CLAUSE_FINAL_FORMS, german
            checked += 1
    assert checked > 1000


def test_generated_german_capitalises_nouns_and_nothing_else() -> None:
    noun_forms = set()
    for noun in NOUNS.values():
        noun_forms |= {noun.german, noun.german_plural, noun.german_plural + "n"} | ({noun.weak_form} - {""})
    lowercase_noun_forms = {form.lower() for form in noun_forms}
    # "junge" (young) is spelled like "Junge" (boy) but is an adjective and stays lowercase.
    adjective_forms = {
        adjective.german_stem + ending for adjective in ADJECTIVES.values() for ending in ("e", "en", "er", "es", "em")
    }
    train, test = generated("mini-translation")
    for english, german in train + test:
        assert english[0].isupper() and english.endswith("."), english
        words = german_words(german)
        assert words[0][0].isupper() and german.endswith("."), german
        for word in words[1:]:
            if word[0].isupper():
                assert word in noun_forms, german
            else:
                assert word not in lowercase_noun_forms or word in adjective_forms, german


def test_every_verb_and_adjective_finds_nouns_to_go_with() -> None:
    all_tags = set().union(*(noun.tags for noun in NOUNS.values())) | {"any"}
    for verb in VERBS.values():
        for tags in (verb.subjects, verb.objects, verb.recipients, *(a.tags for a in verb.adjuncts)):
            assert not tags or tags & all_tags, verb
    for adjective in ADJECTIVES.values():
        assert adjective.tags & all_tags, adjective
