"""The mini-translation verbs: English and German forms, valency, and which nouns fit as subject, objects and
prepositional adjuncts."""

from __future__ import annotations

from dataclasses import dataclass

from playground.datasets.lexicon import tag_set


@dataclass(frozen=True)
class Adjunct:
    """A prepositional phrase a verb accepts, and the nouns that make sense after it."""

    preposition: str
    tags: frozenset[str]


def _adjunct(preposition: str, tags: str) -> Adjunct:
    return Adjunct(preposition, tag_set(tags))


INDOORS = _adjunct("in", "room building")
OUTDOORS = _adjunct("in", "outdoors")
IN_TOWN = _adjunct("in", "town")
UNDER = _adjunct("under", "furniture tree")
ON = _adjunct("on", "furniture")
BEHIND = _adjunct("behind", "landmark")
NEXT_TO = _adjunct("next to", "landmark furniture")
WITH_COMPANION = _adjunct("with", "person animal")
WITH_TOY = _adjunct("with", "toy")

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


ANIMATE = tag_set("person animal")
PEOPLE = tag_set("person")

VERBS = {
    verb.key: verb
    for verb in (
        # intransitive
        Verb("sleep", "sleeps", "schlafe", "schläft", "schlafen", subjects=ANIMATE, adjuncts=(INDOORS, OUTDOORS, UNDER, ON, NEXT_TO)),
        Verb("laugh", "laughs", "lache", "lacht", "lachen", adjuncts=(WITH_COMPANION,)),
        Verb("run", "runs", "laufe", "läuft", "laufen", subjects=ANIMATE, adjuncts=(OUTDOORS, WITH_COMPANION)),
        Verb("play", "plays", "spiele", "spielt", "spielen", subjects=ANIMATE, adjuncts=(INDOORS, OUTDOORS, WITH_COMPANION, WITH_TOY)),
        Verb("sing", "sings", "singe", "singt", "singen", subjects=tag_set("person bird"), adjuncts=(INDOORS, OUTDOORS, WITH_COMPANION)),
        Verb("swim", "swims", "schwimme", "schwimmt", "schwimmen", subjects=tag_set("person swimmer"), adjuncts=(WITH_COMPANION,)),
        Verb("dance", "dances", "tanze", "tanzt", "tanzen", adjuncts=(INDOORS, OUTDOORS, WITH_COMPANION)),
        Verb("wait", "waits", "warte", "wartet", "warten", subjects=ANIMATE, adjuncts=(INDOORS, OUTDOORS, BEHIND, NEXT_TO)),
        Verb("work", "works", "arbeite", "arbeitet", "arbeiten", adjuncts=(INDOORS, OUTDOORS, IN_TOWN)),
        Verb("cry", "cries", "weine", "weint", "weinen", adjuncts=(INDOORS,)),
        Verb("sit", "sits", "sitze", "sitzt", "sitzen", subjects=ANIMATE, adjuncts=(INDOORS, OUTDOORS, UNDER, ON, NEXT_TO)),
        Verb("stand", "stands", "stehe", "steht", "stehen", subjects=ANIMATE, adjuncts=(INDOORS, OUTDOORS, BEHIND, NEXT_TO)),
        Verb("bark", "barks", "belle", "bellt", "bellen", subjects=tag_set("dog"), adjuncts=(OUTDOORS, BEHIND)),
        Verb("fly", "flies", "fliege", "fliegt", "fliegen", subjects=tag_set("bird")),
        Verb("get up", "gets up", "stehe", "steht", "stehen", particle="auf"),
        Verb("fall asleep", "falls asleep", "schlafe", "schläft", "schlafen", particle="ein", subjects=ANIMATE, adjuncts=(INDOORS, ON)),
        Verb("watch TV", "watches TV", "sehe", "sieht", "sehen", particle="fern", adjuncts=(INDOORS, ON, WITH_COMPANION)),
        Verb("go shopping", "goes shopping", "kaufe", "kauft", "kaufen", particle="ein", adjuncts=(IN_TOWN, WITH_COMPANION)),
        # with an accusative object
        Verb("see", "sees", "sehe", "sieht", "sehen", valency="accusative", subjects=ANIMATE, objects=tag_set("person animal thing clothing food vehicle furniture landmark"), adjuncts=(INDOORS, OUTDOORS)),
        Verb("hear", "hears", "höre", "hört", "hören", valency="accusative", subjects=ANIMATE, objects=ANIMATE, adjuncts=(INDOORS, OUTDOORS)),
        Verb("find", "finds", "finde", "findet", "finden", valency="accusative", subjects=ANIMATE, objects=tag_set("thing clothing food"), adjuncts=(INDOORS, OUTDOORS, UNDER, BEHIND, NEXT_TO)),
        Verb("look for", "looks for", "suche", "sucht", "suchen", valency="accusative", subjects=ANIMATE, objects=tag_set("person animal thing clothing food"), adjuncts=(INDOORS, OUTDOORS)),
        Verb("buy", "buys", "kaufe", "kauft", "kaufen", valency="accusative", objects=tag_set("thing clothing food vehicle animal"), adjuncts=(IN_TOWN,)),
        Verb("sell", "sells", "verkaufe", "verkauft", "verkaufen", valency="accusative", objects=tag_set("thing clothing food vehicle animal"), adjuncts=(IN_TOWN,)),
        Verb("eat", "eats", "esse", "isst", "essen", valency="accusative", objects=tag_set("food"), adjuncts=(INDOORS, OUTDOORS)),
        # German says "fressen" when an animal eats.
        Verb("eat", "eats", "fresse", "frisst", "fressen", valency="accusative", subjects=tag_set("animal"), objects=tag_set("food"), adjuncts=(INDOORS, OUTDOORS)),
        Verb("like", "likes", "mag", "mag", "mögen", valency="accusative", objects=tag_set("person animal thing clothing food vehicle")),
        Verb("love", "loves", "liebe", "liebt", "lieben", valency="accusative", objects=ANIMATE),
        Verb("have", "has", "habe", "hat", "haben", valency="accusative", objects=tag_set("animal thing clothing food vehicle")),
        Verb("need", "needs", "brauche", "braucht", "brauchen", valency="accusative", objects=tag_set("thing clothing vehicle food")),
        Verb("carry", "carries", "trage", "trägt", "tragen", valency="accusative", objects=tag_set("thing food")),
        Verb("read", "reads", "lese", "liest", "lesen", valency="accusative", objects=tag_set("readable"), adjuncts=(INDOORS, OUTDOORS, ON)),
        Verb("write", "writes", "schreibe", "schreibt", "schreiben", valency="accusative", objects=tag_set("writable"), adjuncts=(INDOORS,)),
        Verb("open", "opens", "öffne", "öffnet", "öffnen", valency="accusative", objects=tag_set("openable")),
        Verb("close", "closes", "schließe", "schließt", "schließen", valency="accusative", objects=tag_set("closable")),
        Verb("wash", "washes", "wasche", "wäscht", "waschen", valency="accusative", objects=tag_set("animal clothing vehicle container")),
        Verb("paint", "paints", "male", "malt", "malen", valency="accusative", objects=tag_set("person animal thing food vehicle landmark")),
        Verb("hold", "holds", "halte", "hält", "halten", valency="accusative", objects=tag_set("thing food")),
        Verb("catch", "catches", "fange", "fängt", "fangen", valency="accusative", subjects=tag_set("person hunter"), objects=tag_set("catchable")),
        Verb("visit", "visits", "besuche", "besucht", "besuchen", valency="accusative", objects=tag_set("person building town")),
        Verb("meet", "meets", "treffe", "trifft", "treffen", valency="accusative", objects=PEOPLE, adjuncts=(INDOORS, OUTDOORS, IN_TOWN)),
        Verb("ask", "asks", "frage", "fragt", "fragen", valency="accusative", objects=PEOPLE),
        Verb("call", "calls", "rufe", "ruft", "rufen", particle="an", valency="accusative", objects=PEOPLE),
        Verb("pick up", "picks up", "hole", "holt", "holen", particle="ab", valency="accusative", objects=PEOPLE),
        Verb("tidy up", "tidies up", "räume", "räumt", "räumen", particle="auf", valency="accusative", objects=tag_set("room")),
        Verb("put on", "puts on", "ziehe", "zieht", "ziehen", particle="an", valency="accusative", objects=tag_set("clothing")),
        Verb("cook", "cooks", "koche", "kocht", "kochen", valency="accusative", objects=tag_set("cookable"), adjuncts=(INDOORS,)),
        Verb("bake", "bakes", "backe", "backt", "backen", valency="accusative", objects=tag_set("bakeable"), adjuncts=(INDOORS,)),
        Verb("throw", "throws", "werfe", "wirft", "werfen", valency="accusative", objects=tag_set("throwable"), adjuncts=(OUTDOORS,)),
        Verb("build", "builds", "baue", "baut", "bauen", valency="accusative", objects=tag_set("buildable"), adjuncts=(OUTDOORS,)),
        Verb("feed", "feeds", "füttere", "füttert", "füttern", valency="accusative", objects=tag_set("animal"), adjuncts=(OUTDOORS,)),
        # with a dative object where English has a plain object
        Verb("help", "helps", "helfe", "hilft", "helfen", valency="dative", objects=ANIMATE, adjuncts=(INDOORS, OUTDOORS)),
        Verb("follow", "follows", "folge", "folgt", "folgen", valency="dative", subjects=ANIMATE, objects=ANIMATE, adjuncts=(OUTDOORS, IN_TOWN)),
        Verb("thank", "thanks", "danke", "dankt", "danken", valency="dative", objects=PEOPLE),
        # someone (dative) something (accusative)
        Verb("give", "gives", "gebe", "gibt", "geben", valency="ditransitive", recipients=ANIMATE, objects=tag_set("thing clothing food")),
        Verb("show", "shows", "zeige", "zeigt", "zeigen", valency="ditransitive", recipients=PEOPLE, objects=tag_set("animal thing clothing food vehicle")),
        Verb("bring", "brings", "bringe", "bringt", "bringen", valency="ditransitive", recipients=ANIMATE, objects=tag_set("thing food")),
        Verb("send", "sends", "schicke", "schickt", "schicken", valency="ditransitive", recipients=PEOPLE, objects=tag_set("sendable")),
        # followed by "that ..."
        Verb("know", "knows", "weiß", "weiß", "wissen", valency="clause"),
        Verb("say", "says", "sage", "sagt", "sagen", valency="clause"),
        Verb("think", "thinks", "glaube", "glaubt", "glauben", valency="clause"),
        Verb("hope", "hopes", "hoffe", "hofft", "hoffen", valency="clause"),
        # "to be" with a predicate adjective; English "am" is special-cased
        Verb("be", "is", "bin", "ist", "sind", valency="copula", subjects=tag_set("any"), irregular_infinitive="sein"),
    )
}  # fmt: skip
