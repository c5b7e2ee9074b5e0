"""The catalogue of built-in datasets: names, titles, descriptions, languages and where the shipped files are.

Light on purpose: the app lists these names in a dropdown, so a generator (and its lexicon) is imported only
when a dataset is generated.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from playground.datasets.split import Split

DATASETS_DIR = Path(__file__).resolve().parents[2] / "assets" / "datasets"  # the shipped files


@dataclass(frozen=True)
class BuiltinDataset:
    name: str
    title: str
    description: str
    src_lang: str
    tgt_lang: str
    generator: str  # "module:function" under playground.datasets, imported when called

    def generate(self, seed: int = 0) -> Split:
        """(train, test) pairs, the same for the same seed."""
        module, _, function = self.generator.partition(":")
        return getattr(importlib.import_module(f"playground.datasets.{module}"), function)(seed)


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
            generator="reverse:generate_reverse",
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
            generator="numbers:generate_numbers",
        ),
        BuiltinDataset(
            name="mini-translation",
            title="Mini translation, English to German",
            description=(  # the counts are the lexicon's (tests/unit/test_builtin_data.py checks them)
                "Sentences from a small grammar (102 nouns, 38 adjectives, 63 verbs) with their "
                "German translation: articles and adjectives agree in gender, number and case; "
                "the verb comes second after an opening adverb, last in 'weil'/'dass' clauses; "
                "separable verbs split ('ruft ... an')."
            ),
            src_lang="en",
            tgt_lang="de",
            generator="mini_translation:generate_mini_translation",
        ),
    )
}
