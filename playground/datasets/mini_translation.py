"""The "mini-translation" dataset: random English sentences from a small grammar whose nouns fit their verbs,
adjectives and prepositions, with their German translation."""

from __future__ import annotations

import functools
import random

from playground.datasets.lexicon import (
    ADJECTIVES,
    MIDDLE_ADVERBS,
    NOUNS,
    OPENING_ADVERBS,
    PRONOUNS,
    Noun,
)
from playground.datasets.sentences import (
    Clause,
    NounPhrase,
    PrepositionalPhrase,
    Sentence,
    translate,
)
from playground.datasets.split import TEST_SIZE, Split, draw_split
from playground.datasets.verbs import PEOPLE, VALENCIES, VERBS

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
        subject_tags = NOUNS[subject_noun].tags if subject_noun else PEOPLE

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
    return draw_split(lambda: translate(sampler.sentence()), train_size=10_000, test_size=TEST_SIZE)
